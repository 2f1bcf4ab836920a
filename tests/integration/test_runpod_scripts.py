"""The pod scripts (overbrainer/runpod/scripts/*.sh), run for real under bash, dash and busybox sh,
against a small Runpod-shaped HTTP server on 127.0.0.1 (GET/DELETE /pods/{id}, POST
/pods/{id}/action) and with a temp folder standing in for the pod's filesystem.

curl is reached through a PATH shim that records its argv, whether its environment holds a key,
and its stdin, then runs the real curl (or fails on demand, to show the loop survives it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from overbrainer import __version__
from overbrainer.runpod import pod_spec as pod_scripts
from tests.fixtures.sshd import wait_for

SHELLS = {"bash": ["bash"], "dash": ["dash"], "busybox": ["busybox", "sh"]}
POD_ID = "pod7h9k2m4n6p"
KEY = "rpa_PODSCOPEDKEY0123456789abcdef"



def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""

class Runpodish:
    """Pods by id; `calls` records (method, path, authorization, user-agent, body); `faults`
    maps "GET"/"DELETE"/"terminate"/"stop" to a status answered instead (a list is consumed).
    The pod list answers 403 to the pod-scoped key unless `list_allowed`."""

    def __init__(self):
        self.pods: dict[str, dict] = {}
        self.list_allowed = False
        self.calls: list[tuple] = []
        self.faults: dict[str, object] = {}
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                server.handle(self, "GET")

            def do_DELETE(self):
                server.handle(self, "DELETE")

            def do_POST(self):
                server.handle(self, "POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v2"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def fault(self, name: str) -> int | None:
        f = self.faults.get(name)
        if isinstance(f, list):
            return f.pop(0) if f else None
        return f

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(length)) if length else None
        with self.lock:
            auth, agent = h.headers.get("Authorization"), h.headers.get("User-Agent")
            self.calls.append((method, h.path, auth, agent, body))
            status, answer = self.answer(method, h.path, h.headers.get("Authorization"), body)
        data = b"" if answer is None else json.dumps(answer).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json" if status < 400 else "application/problem+json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def answer(self, method, path, auth, body):
        parts = path.split("/")  # "", "v2", "pods", id[, "action"]
        if auth != f"Bearer {KEY}":
            return 401, {"title": "Unauthorized", "status": 401, "detail": "missing bearer token"}
        pod_id = parts[3] if len(parts) > 3 and parts[2] == "pods" else None
        if method == "GET" and parts[2:] == ["pods"]:
            if not self.list_allowed:
                return 403, {"title": "Forbidden", "status": 403, "detail": "access denied"}
            return 200, {"pods": list(self.pods.values())}
        name = (body or {}).get("action") if method == "POST" else method
        fault = self.fault(name)
        if fault:
            return fault, {"title": "Error", "status": fault, "detail": "injected"}
        if pod_id not in self.pods:
            return 404, {"title": "Not Found", "status": 404, "detail": "resource not found"}
        if method == "GET":
            return 200, self.pods[pod_id]
        if name == "stop":
            self.pods[pod_id]["status"] = "EXITED"
            return 200, self.pods[pod_id]
        del self.pods[pod_id]
        return 204, None

    def names(self) -> list[str]:
        return [c[4]["action"] if c[4] else "LIST" if c[1].endswith("/pods") else c[0] for c in self.calls]

    def add_pod(self, cost: float = 0.5) -> None:
        self.pods[POD_ID] = {"id": POD_ID, "name": "overbrainer-r-1", "status": "RUNNING", "cost": cost,
                             "env": {"OVERBRAINER_RUN_ID": "r"}}


CURL_SHIM = r"""#!/bin/sh
rec=$OB_SHIM_DIR/calls
if [ -n "${RUNPOD_API_KEY+x}" ]; then echo "env-key" >> "$rec.env"; fi
printf '%s\n' "$@" >> "$rec.argv"
input=$(cat)
printf '%s\n' "$input" >> "$rec.stdin"
n=$(( $(cat "$OB_SHIM_DIR/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$OB_SHIM_DIR/count"
for f in $(cat "$OB_SHIM_DIR/fail" 2>/dev/null); do [ "$f" = "$n" ] && exit 7; done
printf '%s\n' "$input" | exec /usr/bin/curl "$@"
"""


class Pod:
    """A temp folder standing in for the pod, and the env the client would give it."""

    def __init__(self, tmp: Path, api: Runpodish, shell: str):
        self.tmp, self.api, self.shell = tmp, api, SHELLS[shell]
        self.root = tmp / "pod"
        self.run_dir = self.root / "workspace" / "overbrainer" / "r"
        self.dot = self.run_dir / ".pod"
        self.bin = tmp / "bin"
        self.bin.mkdir()
        (self.bin / "curl").write_text(CURL_SHIM)
        os.chmod(self.bin / "curl", 0o755)
        self.env = {
            "PATH": f"{self.bin}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp),
            "OB_SHIM_DIR": str(self.bin), "RUNPOD_POD_ID": POD_ID, "RUNPOD_API_KEY": KEY,
            "OVERBRAINER_API_URL": api.url, "OVERBRAINER_POD_ROOT": str(self.root),
            "OVERBRAINER_RUN_DIR": str(self.run_dir), "OVERBRAINER_VERSION": __version__,
            "OVERBRAINER_WATCHDOG_INTERVAL_MS": "100", "OVERBRAINER_WATCHDOG_PROBE_WAIT_MS": "50",
            "OVERBRAINER_WATCHDOG_CURL_MS": "5000", "OVERBRAINER_MAX_SECONDS": "3600",
            "OVERBRAINER_BOOT_GRACE": "3600", "OVERBRAINER_RETRIEVE_GRACE": "3600",
            "OVERBRAINER_WATCHDOG_SHELL": " ".join(self.shell),
        }
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str]) -> subprocess.Popen:
        out = open(self.tmp / "stdout.log", "ab")
        proc = subprocess.Popen(self.shell + argv, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        self.procs.append(proc)
        return proc

    def watchdog(self) -> subprocess.Popen:
        path = self.tmp / "watchdog.sh"
        path.write_text(pod_scripts.script("watchdog.sh"))
        return self.start([str(path)])

    def bootstrap(self) -> subprocess.Popen:
        return self.start(["-c", pod_scripts.bootstrap_text()])

    def verdict(self) -> str:
        return wait_for(lambda: _read(self.dot / "watchdog"), timeout=20).strip()

    def log(self) -> str:
        return _read(self.dot / "watchdog.log")

    def stdout(self) -> str:
        return _read(self.tmp / "stdout.log")

    def finish(self, proc: subprocess.Popen, timeout: float = 20) -> int:
        return proc.wait(timeout)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        pid = _read(self.root / "run" / "overbrainer" / "sshd.pid").strip()
        # Only the sshd this pod started (its config is under our root): a pid file outlives its
        # process, and the number may by now be another test's process.
        if pid.isdigit() and str(self.root).encode() in _cmdline(int(pid)):
            try:
                os.kill(int(pid), signal.SIGTERM)
            except ProcessLookupError:
                pass

    def assert_key_kept_secret(self) -> None:
        """The key went to curl on stdin only: never argv, a child's env, the log or stdout."""
        assert KEY in _read(self.bin / "calls.stdin")
        assert KEY not in _read(self.bin / "calls.argv")
        assert not (self.bin / "calls.env").exists()
        assert KEY not in self.log() and KEY not in self.stdout()
        for _method, _path, auth, agent, _body in self.api.calls:
            assert auth == f"Bearer {KEY}" and agent == f"overbrainer-watchdog/{__version__}"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@pytest.fixture(params=list(SHELLS))
def pod(request, tmp_path):
    api = Runpodish()
    api.add_pod()
    p = Pod(tmp_path, api, request.param)
    yield p
    p.stop()
    api.httpd.shutdown()
    api.httpd.server_close()


def test_ready_then_the_retrieved_marker_deletes_the_pod(pod):
    proc = pod.watchdog()
    assert pod.verdict() == "ready"
    (pod.dot / "retrieved").write_text("")
    assert pod.finish(proc) == 0
    assert pod.api.names() == ["GET", "DELETE", "GET"]
    assert POD_ID not in pod.api.pods
    assert "delete reason=retrieved" in pod.log() and "DELETE 204" in pod.log()
    assert (pod.dot / "rate").read_text().strip() == "0.5"
    pod.assert_key_kept_secret()


def test_the_deadline_deletes_a_running_job(pod):
    job = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        pod.run_dir.mkdir(parents=True)
        (pod.run_dir / "job.pid").write_text(f"{job.pid}\n")
        pod.env["OVERBRAINER_MAX_SECONDS"] = "1"
        assert pod.finish(pod.watchdog()) == 0
    finally:
        job.kill()
        job.wait()
    assert "job started" in pod.log() and "job ended" not in pod.log()
    assert "delete reason=deadline" in pod.log()
    assert pod.api.names() == ["GET", "DELETE", "GET"]


def test_the_cost_cap_from_the_pod_rate_deletes(pod):
    pod.api.pods[POD_ID]["cost"] = 3600.0  # $1 a second
    pod.env["OVERBRAINER_MAX_COST_USD"] = "0.5"  # counted from the watchdog's own start
    assert pod.finish(pod.watchdog()) == 0
    assert "delete reason=cost_cap" in pod.log()


def test_the_cost_cap_armed_by_the_client_deletes(pod):
    pod.dot.mkdir(parents=True)
    (pod.dot / "cost_cap_in").write_text("1\n")  # seconds left: a duration, whatever the clocks say
    assert pod.finish(pod.watchdog()) == 0
    assert "delete reason=cost_cap" in pod.log() and "cost cap armed: delete at" in pod.log()
    armed = int((pod.dot / "cost_cap_at").read_text())  # on the watchdog's own clock
    assert abs(armed - (time.time() + 1)) < 30


def test_retrieve_grace_after_the_job_ended(pod):
    pod.run_dir.mkdir(parents=True)
    (pod.run_dir / "job.pid").write_text("999999\n")
    (pod.run_dir / "exit_code").write_text("0\n")
    pod.env["OVERBRAINER_RETRIEVE_GRACE"] = "1"
    assert pod.finish(pod.watchdog()) == 0
    log = pod.log()
    assert "job ended" in log and "delete reason=abandoned" in log
    ended = int((pod.dot / "job_ended_at").read_text())
    assert ended <= int(time.time()) - 1


def test_boot_grace_without_a_job_deletes_even_a_kept_pod(pod):
    pod.env.update(OVERBRAINER_BOOT_GRACE="1", OVERBRAINER_KEEP_POD="1")
    del pod.env["OVERBRAINER_MAX_SECONDS"]
    assert pod.finish(pod.watchdog()) == 0
    assert "delete reason=never_started" in pod.log()
    boot_id, boot_at = (pod.dot / "boot_at").read_text().split()
    assert boot_id == POD_ID and int(boot_at) <= int(time.time()) - 1


def test_a_restarted_watchdog_counts_the_boot_grace_from_its_pod_first_start(pod):
    pod.env["OVERBRAINER_BOOT_GRACE"] = "600"
    pod.dot.mkdir(parents=True)
    (pod.dot / "boot_at").write_text(f"otherpod {int(time.time()) - 700}\n")  # a volume's earlier pod
    proc = pod.watchdog()
    assert pod.verdict() == "ready"
    boot_id, boot_at = (pod.dot / "boot_at").read_text().split()
    assert boot_id == POD_ID and int(boot_at) >= int(time.time()) - 5
    proc.send_signal(signal.SIGTERM)
    assert pod.finish(proc) == 0 and pod.api.names() == ["GET"]

    (pod.dot / "boot_at").write_text(f"{POD_ID} {int(time.time()) - 700}\n")  # the container restarts
    assert pod.finish(pod.watchdog()) == 0
    assert "delete reason=never_started" in pod.log()


def test_a_kept_pod_with_a_job_is_never_deleted(pod):
    pod.env.update(OVERBRAINER_KEEP_POD="1", OVERBRAINER_BOOT_GRACE="0", OVERBRAINER_RETRIEVE_GRACE="0")
    pod.env["OVERBRAINER_MAX_SECONDS"] = "0"
    pod.run_dir.mkdir(parents=True)
    (pod.run_dir / "job.pid").write_text("999999\n")  # no such group: the job ended too
    proc = pod.watchdog()
    assert pod.verdict() == "ready"
    (pod.dot / "retrieved").write_text("")
    wait_for(lambda: "job ended" in pod.log())
    (pod.dot / "job_ended_at").unlink()  # the next tick notes the end again: two more ticks seen
    wait_for(lambda: (pod.dot / "job_ended_at").exists())
    assert proc.poll() is None
    assert pod.api.names() == ["GET"]


def test_delete_falls_back_to_terminate_then_stop(pod):
    pod.api.faults.update(DELETE=500, terminate=503)
    pod.dot.mkdir(parents=True)
    (pod.dot / "retrieved").write_text("")
    proc = pod.watchdog()
    wait_for(lambda: "volume keeps billing" in pod.log())
    assert pod.api.names()[:4] == ["GET", "DELETE", "terminate", "stop"]
    assert pod.api.pods[POD_ID]["status"] == "EXITED"
    pod.api.faults.clear()  # the container would be gone; here the next look deletes it
    assert pod.finish(proc) == 0
    pod.assert_key_kept_secret()


def test_runpodctl_is_the_last_resort(pod):
    pod.api.faults.update(DELETE=500, terminate=500, stop=500)
    (pod.bin / "runpodctl").write_text(
        '#!/bin/sh\nprintf "%s\\n" "$*" "${RUNPOD_API_KEY:-none}" > "$OB_SHIM_DIR/runpodctl.rec"\n')
    os.chmod(pod.bin / "runpodctl", 0o755)
    pod.dot.mkdir(parents=True)
    (pod.dot / "retrieved").write_text("")
    pod.watchdog()
    wait_for(lambda: "runpodctl pod delete exit 0" in pod.log())
    args, key = (pod.bin / "runpodctl.rec").read_text().splitlines()
    assert args == f"pod delete {POD_ID}" and key == KEY  # its key in its env, never in argv
    assert KEY not in pod.log()


def test_the_loop_survives_a_failing_curl_and_a_failing_api(pod):
    pod.api.faults.update(DELETE=[500, 502], terminate=[500], stop=[500])
    (pod.bin / "fail").write_text("2 3 4\n")  # curl fails on the whole first delete round
    pod.dot.mkdir(parents=True)
    (pod.dot / "retrieved").write_text("")
    assert pod.finish(pod.watchdog()) == 0
    assert pod.api.names() == ["GET", "DELETE", "terminate", "stop", "DELETE", "terminate", "GET"]
    log = pod.log()
    assert "DELETE 000" in log and "action stop 000" in log and "DELETE 502" in log
    assert log.count("delete failed: trying again next tick") == 2
    assert "pod gone" in log


def test_the_delete_is_repeated_while_the_pod_stays(pod):
    pod.api.pods[POD_ID]["cost"] = 0
    pod.env["OVERBRAINER_MAX_SECONDS"] = "0"
    real = pod.api.answer

    def lying(method, path, auth, body):  # the first DELETE answers 204 but keeps the pod
        if method == "DELETE" and pod.api.names().count("DELETE") == 1:
            return 204, None
        return real(method, path, auth, body)

    pod.api.answer = lying
    assert pod.finish(pod.watchdog()) == 0
    # after the first delete: the pod (200), then the pod list (this key may not read it: 403)
    assert pod.api.names() == ["GET", "DELETE", "GET", "LIST", "DELETE", "GET"]
    assert "pod still there after the delete (GET 200)" in pod.log()


@pytest.mark.parametrize("deleted", ["terminated", "unlisted"])
def test_a_deleted_pod_is_gone_when_terminated_or_no_longer_listed(pod, deleted):
    pod.env["OVERBRAINER_MAX_SECONDS"] = "0"
    pod.api.list_allowed = deleted == "unlisted"
    real = pod.api.answer

    hidden: list[dict] = []

    def deleted_slowly(method, path, auth, body):  # the DELETE is accepted, the pod lingers
        if method == "DELETE" and deleted == "terminated":
            pod.api.pods[POD_ID].update(status="TERMINATED", cost=0)  # shown so for a while
            return 204, None
        if method == "DELETE":
            hidden.append(pod.api.pods.pop(POD_ID))
            return 204, None
        if hidden and method == "GET" and path.endswith(f"/pods/{POD_ID}"):
            return 200, hidden[0]  # still answered one by one, but no longer listed
        return real(method, path, auth, body)

    pod.api.answer = deleted_slowly
    assert pod.finish(pod.watchdog()) == 0
    if deleted == "terminated":
        assert pod.api.names() == ["GET", "DELETE", "GET"] and "pod gone (TERMINATED)" in pod.log()
    else:
        assert pod.api.names() == ["GET", "DELETE", "GET", "LIST"] and "pod gone (not in the pod list)" in pod.log()


@pytest.mark.parametrize("offset", [3600, -3600])
def test_the_watchdog_counts_max_hours_on_its_own_clock(pod, offset):
    """The pod's clock is an hour off from the client's: the limit is a duration, counted from
    the watchdog's own start, so it neither fires at once nor an hour late."""
    real = shutil.which("date")
    (pod.bin / "date").write_text(f'#!/bin/sh\nnow=$(( $({real} +%s) + ({offset}) ))\nexec {real} -d "@$now" "$@"\n')
    os.chmod(pod.bin / "date", 0o755)
    pod.env["OVERBRAINER_MAX_SECONDS"] = "3600" if offset > 0 else "1"
    pod.run_dir.mkdir(parents=True)
    (pod.run_dir / "job.pid").write_text("999999\n")  # a job that ended: each tick notes it
    (pod.run_dir / "exit_code").write_text("0\n")
    proc = pod.watchdog()
    assert pod.verdict() == "ready"
    boot_at = int((pod.dot / "boot_at").read_text().split()[1])
    assert abs(boot_at - (time.time() + offset)) < 60  # the pod's own clock
    if offset > 0:  # an hour ahead: max_hours = 1 h is not reached at once
        wait_for(lambda: (pod.dot / "job_ended_at").exists())
        (pod.dot / "job_ended_at").unlink()
        wait_for(lambda: (pod.dot / "job_ended_at").exists())  # a later tick: still no delete
        assert proc.poll() is None and "DELETE" not in pod.api.names()
    else:  # an hour behind: max_hours = 1 s still ends it a second after its start
        assert pod.finish(proc) == 0
        assert "delete reason=deadline" in pod.log()


@pytest.mark.parametrize("case", ["401", "missing_key", "503_then_200", "503", "unreachable", "404_then_200", "404"])
def test_the_proof_of_the_key(pod, case):
    pod.env["OVERBRAINER_WATCHDOG_PROBE_TRIES"] = "3"
    want = {"401": "failed http_401", "missing_key": "failed missing_key", "503_then_200": "ready",
            "503": "failed http_503", "unreachable": "failed unreachable", "404_then_200": "ready",
            "404": "failed http_404"}[case]
    if case == "401":
        pod.env["RUNPOD_API_KEY"] = "rpa_SOMEOTHERKEY"
    elif case == "missing_key":
        del pod.env["RUNPOD_API_KEY"]
    elif case == "503_then_200":
        pod.api.faults["GET"] = [503, 503]
    elif case == "503":
        pod.api.faults["GET"] = 503
    elif case == "404_then_200":  # Runpod may not show a pod it has just created
        pod.api.faults["GET"] = [404, 404]
    elif case == "404":
        pod.api.faults["GET"] = 404
    else:
        pod.env["OVERBRAINER_API_URL"] = "http://127.0.0.1:9/v2"
    pod.watchdog()
    assert pod.verdict() == want
    gets = {"401": 1, "missing_key": 0, "503_then_200": 3, "503": 3, "unreachable": 0, "404_then_200": 3,
            "404": 3}[case]
    assert pod.api.names() == ["GET"] * gets
    assert KEY not in pod.log()


def test_a_pod_without_curl_says_so(pod):
    bare = pod.tmp / "bare"
    bare.mkdir()
    for tool in ("bash", "dash", "busybox", "date", "sed", "head", "awk", "mv", "rm", "mkdir", "cat", "sleep"):
        os.symlink(shutil.which(tool), bare / tool)
    pod.env["PATH"] = str(bare)
    proc = pod.watchdog()
    assert pod.verdict() == "failed no_curl"
    proc.send_signal(signal.SIGTERM)
    assert pod.finish(proc) == 0
    assert pod.api.calls == []


def test_sigterm_stops_the_watchdog(pod):
    proc = pod.watchdog()
    assert pod.verdict() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert pod.finish(proc) == 0
    assert "stopping" in pod.log()
    assert POD_ID in pod.api.pods


def test_a_failed_bootstrap_deletes_even_a_kept_pod(pod):
    pod.env.update(OVERBRAINER_KEEP_POD="1", OVERBRAINER_AUTHORIZED_KEY="ssh-ed25519 AAAAC3Nz x",
                   OVERBRAINER_HOST_KEY="{{ RUNPOD_SECRET_overbrainer_host_key_r }}")
    proc = pod.bootstrap()
    assert pod.verdict() == "failed bootstrap: host_key_unresolved"
    assert pod.finish(proc) == 0
    assert pod.api.names() == ["DELETE", "GET"]
    assert (pod.dot / "bootstrap_failed").read_text().strip() == "host_key_unresolved"
    assert "delete reason=bootstrap_failed" in pod.log()
    # The watchdog was written first, even though the bootstrap failed.
    assert (pod.root / "run" / "overbrainer" / "watchdog.sh").read_text().strip() == \
        pod_scripts.script("watchdog.sh").strip()
