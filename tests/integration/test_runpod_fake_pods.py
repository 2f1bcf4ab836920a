"""The fake Runpod server's pods are real (tests/fixtures/runpod_pods.py): unshare'd process trees
with their own network and PID namespaces and private /etc/ssh, /root, /workspace and /run; port 22
published on the host's loopback; the fake API reachable inside the pod; secrets filled into env;
`args` run as Docker runs them (through the image's ENTRYPOINT when it has one); every answer is
a Pod as the published schema describes it."""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import paramiko
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.fixtures import runpod_schema
from tests.fixtures.runpod_pods import pids_in_namespace
from tests.fixtures.sshd import wait_for

GPU = "NVIDIA GeForce RTX 4090"
FAKE_ONLY = True  # tests of the fake itself: the pods they leave are killed at its teardown


def create(fake, cmd: list[str], env: dict | None = None, **extra) -> dict:
    """A pod running `cmd` (as `args`, one shell-quoted string; none: the image's CMD)."""
    body = {"name": "overbrainer-t-1", "image": "img", "gpu": {"id": GPU, "count": 1}, "ports": ["22/tcp"],
            "env": env or {}, **({"args": shlex.join(cmd)} if cmd else {}), **extra}
    r = requests.post(fake.url + "/pods", json=body, headers=headers(fake.account_key), timeout=10)
    assert r.status_code == 201, r.text
    assert runpod_schema.problems(runpod_schema.POD, r.json()) == []
    return r.json()


def headers(key: str) -> dict:
    return {"Authorization": f"Bearer {key}", "User-Agent": "test/1"}


def get(fake, pod_id: str, key: str | None = None) -> requests.Response:
    return requests.get(f"{fake.url}/pods/{pod_id}", headers=headers(key or fake.account_key), timeout=10)


def status_is(fake, pod_id: str, status: str):
    return lambda: (doc := get(fake, pod_id).json()).get("status") == status and doc


def workspace(fake, pod_id: str) -> Path:
    return fake.root / "pods" / pod_id / "workspace"


def test_pod_runs_its_command_in_its_own_namespaces(fake_runpod):
    script = ('env > /workspace/env; ls -A /root/.ssh > /workspace/ssh; ip -o link > /workspace/links; '
              'echo $$ > /workspace/pid; ls /etc/ssh > /workspace/etc_ssh; echo done > /workspace/done')
    doc = create(fake_runpod, ["sh", "-c", script], env={"OVERBRAINER_RUN_ID": "t", "QUOTED": "a b 'c'"})
    assert doc["status"] == "PROVISIONING" and doc["ssh"]["direct"] is None and doc["cost"] == 0.69
    wait_for(status_is(fake_runpod, doc["id"], "EXITED"))  # the command ended: the container stopped
    ws = workspace(fake_runpod, doc["id"])
    env = dict(line.split("=", 1) for line in (ws / "env").read_text().splitlines() if "=" in line)
    pod = fake_runpod.pod(doc["id"])
    assert env["RUNPOD_POD_ID"] == doc["id"] and env["RUNPOD_API_KEY"] == pod.key != fake_runpod.account_key
    assert env["QUOTED"] == "a b 'c'" and env["OVERBRAINER_RUN_ID"] == "t" and int(env["RUNPOD_TCP_PORT_22"]) > 0
    assert (ws / "ssh").read_text() == "" and (ws / "pid").read_text().strip() == "1"
    assert [line.split(":")[1].strip() for line in (ws / "links").read_text().splitlines()] == ["lo"]
    assert "sshd_config" in (ws / "etc_ssh").read_text() and "ssh_host" not in (ws / "etc_ssh").read_text()
    assert not Path("/workspace/done").exists()  # the host's /workspace is untouched
    final = get(fake_runpod, doc["id"]).json()
    assert final["cost"] == 0.0 and final["runtime"] is None and final["actions"] == ["start", "terminate"]
    assert [p["id"] for p in fake_runpod.billing()] == []


def test_args_run_split_like_a_shell(fake_runpod):
    doc = create(fake_runpod, [], args="sh -c 'echo \"$RUNPOD_DC_ID\" > /workspace/dc'")
    wait_for(status_is(fake_runpod, doc["id"], "EXITED"))
    assert (workspace(fake_runpod, doc["id"]) / "dc").read_text().strip() == doc["dataCenterId"]


def test_a_wrapper_entrypoint_gets_args_as_its_arguments_and_execs_them(fake_runpod):
    script = 'echo "$0|$1" > /workspace/argv; echo "$$" > /workspace/pid'
    doc = create(fake_runpod, [], image="wrapped", args=f"sh -c '{script}' one",
                 env={"OVERBRAINER_FAKE_ENTRYPOINT_MARK": "/workspace/entrypoint"})
    wait_for(status_is(fake_runpod, doc["id"], "EXITED"))
    ws = workspace(fake_runpod, doc["id"])
    assert (ws / "entrypoint").read_text() == "started\n"  # the wrapper ran first…
    assert (ws / "argv").read_text() == "one|\n"  # `sh -c SCRIPT one`: $0 is `one`
    assert (ws / "pid").read_text().strip() == "1"  # …then exec'd the command (PID 1 stays the container)
    assert "[entrypoint] wrapper" in fake_runpod.pod(doc["id"]).process.log_path.read_text()
    # without args, the image's CMD runs (through the wrapper): the pod stays RUNNING
    idle = create(fake_runpod, [], image="wrapped")
    wait_for(status_is(fake_runpod, idle["id"], "RUNNING"))
    assert fake_runpod.pod(idle["id"]).process.alive()


def test_an_image_not_in_its_registry_is_refused(fake_runpod):
    body = {"name": "overbrainer-t-1", "image": "nosuch/image:1", "gpu": {"id": GPU, "count": 1}}
    r = requests.post(fake_runpod.url + "/pods", json=body, headers=headers(fake_runpod.account_key), timeout=10)
    assert r.status_code == 422 and "nosuch/image:1" in r.json()["detail"]


def test_every_pod_answer_is_a_pod_of_the_published_schema(fake_runpod):
    doc = create(fake_runpod, ["sleep", "infinity"])
    running = wait_for(status_is(fake_runpod, doc["id"], "RUNNING"))
    listed = requests.get(fake_runpod.url + "/pods", headers=headers(fake_runpod.account_key), timeout=10).json()
    for pod in [doc, running, *listed["pods"]]:
        assert runpod_schema.problems(runpod_schema.POD, pod) == [], pod
    fake_runpod.pods.terminated_for = 30
    assert requests.delete(f"{fake_runpod.url}/pods/{doc['id']}", headers=headers(fake_runpod.account_key),
                           timeout=10).status_code == 204
    gone = get(fake_runpod, doc["id"]).json()  # still shown for a while, as TERMINATED
    assert gone["status"] == "TERMINATED" and gone["cost"] == 0.0 and gone["actions"] == []
    assert runpod_schema.problems(runpod_schema.POD, gone) == []
    assert requests.get(fake_runpod.url + "/pods", headers=headers(fake_runpod.account_key),
                        timeout=10).json() == {"pods": []}  # deleted pods are not listed


def test_a_pod_clock_can_be_off(fake_runpod):
    fake_runpod.pods.clock_offset = -3600
    doc = create(fake_runpod, ["sh", "-c", "date +%s > /workspace/now; date -u +%Y > /workspace/year"])
    wait_for(status_is(fake_runpod, doc["id"], "EXITED"))
    seen = int((workspace(fake_runpod, doc["id"]) / "now").read_text())
    assert abs(seen - (time.time() - 3600)) < 60


def _ed25519() -> tuple[str, str, Ed25519PrivateKey]:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return private, public, key


@pytest.mark.ssh
def test_sshd_in_a_pod_is_reached_through_ssh_direct(fake_runpod):
    host_private, host_public, _ = _ed25519()
    client_private, client_public, _ = _ed25519()
    fake_runpod.add_secret_value("test_host_key", host_private)
    script = ('set -e; printf "%s\\n" "$HOST_KEY" > /etc/ssh/ssh_host_ed25519_key; '
              'chmod 600 /etc/ssh/ssh_host_ed25519_key; printf "%s\\n" "$AUTHORIZED" > /root/.ssh/authorized_keys; '
              'exec /usr/sbin/sshd -D -e -h /etc/ssh/ssh_host_ed25519_key')
    doc = create(fake_runpod, ["sh", "-c", script],
                 env={"HOST_KEY": "{{ RUNPOD_SECRET_test_host_key }}", "AUTHORIZED": client_public})
    assert doc["env"]["HOST_KEY"] == "{{ RUNPOD_SECRET_test_host_key }}"  # listings never show the value
    direct = wait_for(lambda: get(fake_runpod, doc["id"]).json()["ssh"]["direct"])
    assert direct["host"] == "127.0.0.1" and direct["username"] == "root"

    def connect():
        ssh = paramiko.SSHClient()
        ssh.set_missing_host_key_policy(paramiko.RejectPolicy())
        ssh.get_host_keys().add(f"[127.0.0.1]:{direct['port']}", "ssh-ed25519",
                                paramiko.Ed25519Key(data=base64.b64decode(host_public.split()[1])))
        try:
            ssh.connect("127.0.0.1", direct["port"], username="root", allow_agent=False, look_for_keys=False,
                        pkey=paramiko.Ed25519Key.from_private_key(io.StringIO(client_private)), timeout=5)
        except (paramiko.SSHException, OSError):
            ssh.close()
            return None  # sshd not listening yet
        return ssh

    ssh = wait_for(connect)
    try:
        _, out, _ = ssh.exec_command("cat /root/.ssh/authorized_keys; ip -o link | wc -l; cat /proc/1/comm")
        lines = out.read().decode().split("\n")
        assert lines[0] == client_public and lines[1].strip() == "1" and lines[2] == "sshd"
    finally:
        ssh.close()


def test_pod_reaches_the_api_with_its_own_key(fake_runpod):
    other = create(fake_runpod, ["sleep", "infinity"])
    script = ('api=http://127.0.0.1:{port}/v2; h="Authorization: Bearer $RUNPOD_API_KEY"; '
              'for path in pods/$RUNPOD_POD_ID pods/{other} pods; do '
              'curl -s -o /dev/null -w "%{{http_code}}\\n" -A pod/1 -H "$h" "$api/$path" >> /workspace/codes; done; '
              'curl -s -o /dev/null -w "%{{http_code}}\\n" -A pod/1 -H "$h" -X DELETE "$api/pods/$RUNPOD_POD_ID" '
              '>> /workspace/codes; sleep infinity').format(port=fake_runpod.port, other=other["id"])
    doc = create(fake_runpod, ["sh", "-c", script])
    wait_for(lambda: fake_runpod.pod(doc["id"]) is None)  # it deleted itself, like the watchdog does
    # (the DELETE's own answer dies with the pod's curl: the call log has it)
    assert (workspace(fake_runpod, doc["id"]) / "codes").read_text().split() == ["200", "404", "403"]
    assert [(c.method, c.key, c.status) for c in fake_runpod.calls_to(key="pod")] == [
        ("GET", "pod", 200), ("GET", "pod", 404), ("GET", "pod", 403), ("DELETE", "pod", 204)]
    assert [p["id"] for p in fake_runpod.listed()] == [other["id"]]


def test_pod_key_may_only_read_and_delete_its_own_pod(fake_runpod):
    doc = create(fake_runpod, ["sleep", "infinity"])
    key = fake_runpod.pod(doc["id"]).key
    h = headers(key)
    assert get(fake_runpod, doc["id"], key).status_code == 200
    assert requests.post(fake_runpod.url + "/pods", json={"name": "x"}, headers=h).status_code == 403
    assert requests.post(f"{fake_runpod.url}/pods/{doc['id']}/action", json={"action": "stop"},
                         headers=h).status_code == 403
    assert requests.get(fake_runpod.url + "/account/secrets", headers=h).status_code == 403
    assert requests.get(fake_runpod.url + "/catalog/gpus", headers=h).status_code == 403
    r = requests.get(fake_runpod.url + "/pods", headers={"User-Agent": "t"})
    assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"
    assert json.loads(r.text) == {"title": "Unauthorized", "status": 401, "detail": "missing bearer token"}
    assert requests.get(fake_runpod.url + "/pods", headers={"Authorization": h["Authorization"]}).text == \
        "error code: 1010"  # a library's default User-Agent meets Cloudflare
    assert requests.delete(f"{fake_runpod.url}/pods/{doc['id']}", headers=h).status_code == 204
    assert get(fake_runpod, doc["id"]).status_code == 404
    assert get(fake_runpod, doc["id"], key).status_code == 401  # a deleted pod's key is dead


def test_delete_kills_the_whole_tree(fake_runpod):
    doc = create(fake_runpod, ["sh", "-c", "setsid sleep 1000 & (sleep 1001 &) ; sleep 1002"])
    pod = wait_for(lambda: fake_runpod.pod(doc["id"]).process)
    ns = pod.namespace
    wait_for(lambda: len(pids_in_namespace(ns)) >= 4)  # sh, three sleeps (and the bridge)
    r = requests.delete(f"{fake_runpod.url}/pods/{doc['id']}", headers=headers(fake_runpod.account_key))
    assert r.status_code == 204
    assert pids_in_namespace(ns) == [] and not pod.alive()
    out = subprocess.run(["pgrep", "-f", "sleep 100[012]"], capture_output=True, text=True).stdout.split()
    assert [pid for pid in out if os.path.exists(f"/proc/{pid}") and
            os.readlink(f"/proc/{pid}/ns/pid") == ns] == []
    assert fake_runpod.billing() == []


def test_stop_start_gives_a_new_port_and_publish_delay(fake_runpod):
    fake_runpod.pods.publish_delay = 0.3
    doc = create(fake_runpod, ["sleep", "infinity"])
    running = wait_for(status_is(fake_runpod, doc["id"], "RUNNING"))
    port = wait_for(lambda: (get(fake_runpod, doc["id"]).json()["ssh"]["direct"] or {}).get("port"))
    assert running["ssh"]["direct"] is None or running["ssh"]["direct"]["port"] == port
    h = headers(fake_runpod.account_key)
    action = f"{fake_runpod.url}/pods/{doc['id']}/action"
    assert requests.post(action, json={"action": "stop"}, headers=h).json()["status"] == "EXITED"
    assert requests.post(action, json={"action": "reset"}, headers=h).status_code == 422
    assert requests.post(action, json={"action": "start"}, headers=h).json()["status"] == "STARTING"
    new_port = wait_for(lambda: (get(fake_runpod, doc["id"]).json()["ssh"]["direct"] or {}).get("port"))
    assert new_port != port
    assert len([p for p in fake_runpod.pods.processes if p.alive()]) == 1


def test_secret_references_are_filled_at_each_start(fake_runpod):
    fake_runpod.add_secret_value("tok", "first")
    doc = create(fake_runpod, ["sh", "-c", 'echo "$A|$B|$C" >> /workspace/seen; sleep infinity'],
                 env={"A": "{{ RUNPOD_SECRET_tok }}", "B": "x{{RUNPOD_SECRET_TOK}}y", "C": "{{ RUNPOD_SECRET_nope }}"})
    seen = workspace(fake_runpod, doc["id"]) / "seen"
    wait_for(seen.exists)
    assert seen.read_text() == "first|xfirsty|{{ RUNPOD_SECRET_nope }}\n"
    [secret] = fake_runpod.secrets.values()
    h = headers(fake_runpod.account_key)
    requests.patch(f"{fake_runpod.url}/account/secrets/{secret['id']}", json={"value": "second"}, headers=h)
    requests.post(f"{fake_runpod.url}/pods/{doc['id']}/action", json={"action": "restart"}, headers=h)
    wait_for(lambda: seen.read_text().count("\n") == 2)
    assert seen.read_text().splitlines()[1] == "second|xsecondy|{{ RUNPOD_SECRET_nope }}"


def test_a_killed_pod_never_sweeps_the_namespace_that_reuses_its_number(fake_runpod):
    """The kernel gives a freed namespace number to the next namespace made (here, most likely,
    the next pod's): sweeping a dead pod again, as every fake's teardown does, must not kill it."""
    first = create(fake_runpod, ["sleep", "infinity"])
    old = wait_for(lambda: fake_runpod.pod(first["id"]).process)
    wait_for(lambda: pids_in_namespace(old.namespace))
    assert requests.delete(f"{fake_runpod.url}/pods/{first['id']}", headers=headers(fake_runpod.account_key),
                           timeout=10).status_code == 204
    second = create(fake_runpod, ["sleep", "infinity"])
    new = wait_for(lambda: fake_runpod.pod(second["id"]).process)
    wait_for(lambda: pids_in_namespace(new.namespace))
    old.kill()  # again, as at teardown
    assert old.leftovers() == [] and new.alive() and pids_in_namespace(new.namespace)
