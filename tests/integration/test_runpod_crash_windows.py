"""The crash windows of a Runpod run, each reproduced with a real signal on the real `overbrainer`
process and the fake Runpod's real pods (namespaced process trees running the package's
bootstrap, sshd and watchdog). Each ends with the fake listing no pod that nothing will delete.

- killed (-9) between the retrieval and the delete: `train attach` / the next `train` ends the pod;
- SIGHUP while provisioning: handled like SIGTERM, the pod deleted, exit 129;
- killed (-9) while provisioning: the run stuck `preparing` is resolved by `train cancel` or
  `pod rm`, and `pod ls` / `train` name its pods as orphans;
- the client's own deadline delete, when the watchdog cannot delete (its key refused);
- a pod whose clock is an hour ahead: the watchdog's limits are durations on its own clock (an
  hour behind: test_runpod_train's killed-client test).
"""

from __future__ import annotations

import signal

import pytest

from tests.integration.test_runpod_train import PodProject, _ended, fake  # noqa: F401 (fixture)

pytestmark = pytest.mark.ssh

DEADLINE_LINE = "max_hours reached: the pod was deleted before the job ended"


def _account_deletes(fake) -> list:
    return fake.calls_to("DELETE", r"/pods/[^/]+", key="account")


@pytest.mark.parametrize("then", ["attach", "train"])
def test_killed_between_retrieval_and_delete_the_pod_is_ended_by_the_next_command(tmp_path, fake_axolotl,
                                                                                  fake, then):
    from tests.fixtures.runpod import Fault

    p = PodProject(tmp_path, fake_axolotl, fake)
    fake.pod_key_methods = {"GET"}  # its watchdog cannot delete it (as during its 1 h retrieve grace)
    held = fake.inject(Fault(method="DELETE", path=r"/pods/[^/]+", times=10_000, drop=True))  # none gets through
    procs: list = []

    def kill_at_delete(method, path, body):  # a backstop: the client never gets its delete through
        if method == "DELETE" and procs and procs[0].poll() is None:
            procs[0].kill()
    fake.on_request = kill_at_delete
    procs.append(p.popen("train"))
    rid = p.wait_for(lambda: p.run_ids() and p.run_ids()[0], what="the run")
    p.wait_state(rid, "succeeded", timeout=60)
    procs[0].send_signal(signal.SIGKILL)  # kill -9 right after run.json says succeeded
    _ended(procs[0])
    fake.on_request = None
    held.times = 0
    pod = p.pod_json(rid)
    assert pod["state"] in ("running", "deleting") and fake.pod(pod["pod_id"]) is not None  # billing, left
    if then == "attach":
        r = p.run("train", "attach", rid, timeout=120)
        assert r.returncode == 0 and f"train: run {rid} succeeded" in r.stdout, r.stderr
    else:
        fake_axolotl.set_mode("ok")
        r = p.run("train", timeout=120)
        assert r.returncode == 0, r.stderr
    line = (f"run {rid} ended and its results are home, but its pod {pod['pod_id']} was not deleted: "
            "deleting it now")
    assert r.stderr.count(line) == 1, r.stderr
    after = p.pod_json(rid)
    assert after["state"] == "deleted" and after["deleted_by"] == "client"
    assert fake.pod(pod["pod_id"]) is None and not (p.runs / rid / "ssh" / "id_ed25519").exists()
    assert fake.billing() == []


@pytest.mark.parametrize("step,signum,code", [("create", signal.SIGHUP, 129), ("reach", signal.SIGHUP, 129),
                                              ("reach", signal.SIGTERM, 143)])
def test_sighup_or_sigterm_while_provisioning_deletes_the_pod(tmp_path, fake_axolotl, fake, step, signum, code):
    p = PodProject(tmp_path, fake_axolotl, fake)
    procs: list = []
    seen: list = []

    def hook(method, path, body):
        hit = (method == "POST" and path == "/pods") if step == "create" else \
            (method == "GET" and path.startswith("/pods/"))
        if hit and not seen and procs:
            seen.append(path)
            procs[0].send_signal(signum)  # the terminal closed, the SSH session dropped, a timeout
    fake.on_request = hook
    procs.append(p.popen("train"))
    out, err = _ended(procs[0])
    assert seen and procs[0].returncode == code, err
    [rid] = p.run_ids()
    rec = p.record(rid)
    assert rec["state"] == "failed" and rec["message"] == "interrupted before the job started: it has no pod left"
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["deleted_by"] == "client"
    assert [c.key for c in p.deletes()] == ["account"] and fake.billing() == []


@pytest.mark.parametrize("resolve", ["cancel", "rm"])
def test_a_run_killed_while_provisioning_is_resolved_by_cancel_or_pod_rm(tmp_path, fake_axolotl, fake, resolve):
    p = PodProject(tmp_path, fake_axolotl, fake)
    procs: list = []

    def kill_at_first_look(method, path, body):  # kill -9 while the new pod is being reached
        if method == "GET" and path.startswith("/pods/") and procs and procs[0].poll() is None:
            procs[0].kill()
    fake.on_request = kill_at_first_look
    procs.append(p.popen("train"))
    _ended(procs[0])
    fake.on_request = None
    assert procs[0].returncode == -signal.SIGKILL
    [rid] = p.run_ids()
    pod_id = p.pod_json(rid)["pod_id"]
    assert p.record(rid)["state"] == "preparing" and fake.pod(pod_id) is not None  # stuck, billing
    ls = p.run("pod", "ls")
    row = next(line for line in ls.stdout.splitlines() if pod_id in line)
    assert row.rstrip().endswith("run preparing, its process stopped"), ls.stdout
    if resolve == "rm":  # the next `train` names it among the orphans, and deletes nothing of it
        r = p.run("train", timeout=120)
        assert r.returncode == 0, r.stderr
        assert (f"pod {pod_id} (run preparing, its process stopped) is still on Runpod at $0.69/h: remove it "
                f"with `overbrainer pod rm {rid}`") in r.stderr
        assert fake.pod(pod_id) is not None
        r = p.run("pod", "rm", rid)
        by = "`pod rm`"
    else:
        r = p.run("train", "cancel", rid)
        by = "`train cancel`"
    assert r.returncode == 0, r.stderr
    assert f"pod: {pod_id} deleted" in r.stdout
    rec = p.record(rid)
    assert rec["state"] == "failed" and rec["message"] == (
        f"provisioning stopped before the job started (its process was killed); {by} left no pod of it")
    assert p.pod_json(rid)["state"] == "deleted" and fake.pod(pod_id) is None
    assert not (p.runs / rid / "ssh" / "id_ed25519").exists() and fake.secrets == {}
    assert fake.billing() == []


def test_the_client_deletes_at_the_deadline_when_the_watchdog_cannot(tmp_path, fake_axolotl, fake):
    from datetime import datetime

    # max_hours 0.0015 = 5.4 s; the client's guard: the deadline + deadline_margin (300 s scaled: 3 s)
    p = PodProject(tmp_path, fake_axolotl, fake, max_hours="0.0015")
    fake.pod_key_methods = {"GET"}  # the watchdog's key may not delete: only the client can
    fake_axolotl.set_mode("slow")
    r = p.run("train", timeout=120)
    assert r.returncode == 1, r.stderr
    [rid] = p.run_ids()
    rec = p.record(rid)
    assert rec["state"] == "failed" and rec["message"] == DEADLINE_LINE
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["deleted_by"] == "client"
    [delete] = _account_deletes(fake)
    assert delete.path == f"/pods/{pod['pod_id']}"
    assert all(c.status == 403 for c in fake.calls_to("DELETE", r"/pods/[^/]+", key="pod"))  # it could not
    deleted = datetime.fromisoformat(pod["deleted_at"].replace("Z", "+00:00")).timestamp()
    assert deleted >= pod["deadline_unix"] + 3 - 1  # not before the guard (1 s: the record's resolution)
    assert "cannot reach the job" not in r.stderr  # the follower stopped when the client deleted the pod
    assert fake.billing() == []


def test_a_pod_clock_an_hour_ahead_does_not_end_the_run(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)  # max_hours 1: an hour-ahead clock must not read it passed
    fake.pods.clock_offset = 3600
    fake_axolotl.set_mode("ok", delay=2)
    r = p.run("train", timeout=120)
    assert r.returncode == 0, r.stderr
    [rid] = p.run_ids()
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["deleted_by"] in ("client", "watchdog")
    log = (p.runs / rid / ".pod" / "watchdog.log").read_text()
    assert "delete reason=deadline" not in log and "verdict ready" in log
