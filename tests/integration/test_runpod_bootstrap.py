"""The pod bootstrap for real: run keys installed with their modes, a real sshd started with them
(reached with paramiko, key authentication only, the host key pinned), the GPU count checked,
under bash, dash and busybox sh. The stand-in API and the pod folder come from
test_runpod_scripts."""

from __future__ import annotations

import base64
import io
import os
import shlex
import socket
import stat

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from overbrainer.runpod import pod_spec as pod_scripts
from tests.integration.test_runpod_scripts import KEY, SHELLS, Pod, Runpodish

NVIDIA_SMI = ("#!/bin/sh\n[ \"$1\" = -L ] || exit 1\n"
              "printf 'GPU 0: NVIDIA H100 (UUID: GPU-a)\\nGPU 1: NVIDIA H100 (UUID: GPU-b)\\n'\n")


def _keypair() -> tuple[str, str]:
    """(OpenSSH private key text, `ssh-ed25519 AAAA…` public line)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public.decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(params=list(SHELLS))
def booted(request, tmp_path):
    """A pod folder whose env carries a host key (base64, as the account secret holds it), a
    client key and a free sshd port; yields (pod, host public line, client private text)."""
    api = Runpodish()
    api.add_pod()
    pod = Pod(tmp_path, api, request.param)
    host_private, host_public = _keypair()
    client_private, client_public = _keypair()
    (pod.bin / "nvidia-smi").write_text(NVIDIA_SMI)
    os.chmod(pod.bin / "nvidia-smi", 0o755)
    pod.env.update(OVERBRAINER_HOST_KEY=base64.b64encode(host_private.encode()).decode("ascii"),  # RunKeys.host_secret_value
                   OVERBRAINER_AUTHORIZED_KEY=client_public + " overbrainer-r",
                   OVERBRAINER_SSHD_PORT=str(_free_port()), OVERBRAINER_SSHD_ADDRESS="127.0.0.1",
                   OVERBRAINER_GPU_COUNT="2")
    os.makedirs("/run/sshd", exist_ok=True)
    yield pod, host_public, client_private
    pod.stop()
    api.httpd.shutdown()
    api.httpd.server_close()


def _connect(pod: Pod) -> paramiko.Transport:
    transport = paramiko.Transport(("127.0.0.1", int(pod.env["OVERBRAINER_SSHD_PORT"])))
    transport.start_client(timeout=20)
    return transport


def _run(transport: paramiko.Transport, command: str) -> str:
    chan = transport.open_session()
    chan.exec_command(command)
    out = chan.makefile("rb").read().decode()
    chan.recv_exit_status()
    return out


def test_the_bootstrap_installs_the_keys_and_starts_sshd(booted):
    pod, host_public, client_private = booted
    pod.bootstrap()
    assert pod.verdict() == "ready"
    ssh_dir = pod.root / "root" / ".ssh"
    host_key = pod.root / "etc" / "ssh" / "ssh_host_ed25519_key"
    assert _mode(ssh_dir) == 0o700 and _mode(ssh_dir / "authorized_keys") == 0o600
    assert _mode(host_key) == 0o600
    assert (ssh_dir / "authorized_keys").read_text() == pod.env["OVERBRAINER_AUTHORIZED_KEY"] + "\n"
    assert _mode(pod.root / "run" / "overbrainer" / "watchdog.sh") == 0o700

    transport = _connect(pod)
    try:
        served = transport.get_remote_server_key()
        assert f"{served.get_name()} {served.get_base64()}" == host_public  # the run's host key
        with pytest.raises(paramiko.BadAuthenticationType) as refused:
            transport.auth_none("root")
        assert refused.value.allowed_types == ["publickey"]  # key authentication only
        transport.auth_publickey("root", paramiko.Ed25519Key.from_private_key(io.StringIO(client_private)))
        assert _run(transport, f"cat {pod.dot / 'watchdog'}") == "ready\n"
    finally:
        transport.close()

    logs = (pod.dot / "bootstrap.log").read_text() + pod.log() + pod.stdout()
    assert "2 GPU(s)" in logs and "bootstrap: ok" in logs
    assert pod.env["OVERBRAINER_HOST_KEY"] not in logs and KEY not in logs
    sshd_pid = int((pod.root / "run" / "overbrainer" / "sshd.pid").read_text())
    assert KEY.encode() not in open(f"/proc/{sshd_pid}/environ", "rb").read()


def test_another_client_key_is_refused(booted):
    pod, _, _ = booted
    pod.bootstrap()
    assert pod.verdict() == "ready"
    other_private, _ = _keypair()
    transport = _connect(pod)
    try:
        with pytest.raises(paramiko.AuthenticationException):
            transport.auth_publickey("root", paramiko.Ed25519Key.from_private_key(io.StringIO(other_private)))
    finally:
        transport.close()


def test_fewer_gpus_than_asked_fail_the_bootstrap(booted):
    pod, _, _ = booted
    pod.env["OVERBRAINER_GPU_COUNT"] = "4"
    proc = pod.bootstrap()
    assert pod.verdict() == "failed bootstrap: gpu_count 2 of 4"
    assert pod.finish(proc) == 0
    assert pod.api.names() == ["DELETE", "GET"]


def test_a_host_key_that_is_not_one_fails_the_bootstrap(booted):
    pod, _, _ = booted
    pod.env["OVERBRAINER_HOST_KEY"] = "bm90IGEga2V5"  # base64 of "not a key"
    proc = pod.bootstrap()
    assert pod.verdict() == "failed bootstrap: host_key_invalid"
    assert pod.finish(proc) == 0
    assert "delete reason=bootstrap_failed" in pod.log()


def test_the_env_built_by_the_client_drives_the_pod(booted):
    """`args` and the env as sent to Runpod (the bootstrap base64 in OVERBRAINER_BOOTSTRAP, run by
    `sh -c`); Runpod fills in the secret and adds its own vars."""
    pod, _, _ = booted
    _, client_public = _keypair()
    settings = pod_scripts.PodSettings(
        run_id="r", authorized_key=client_public, max_seconds=3600, boot_grace_secs=1, retrieve_grace_secs=60,
        gpu_count=2, api_url=pod.api.url, workdir=str(pod.run_dir.parent), time_scale=0.002)
    env = pod_scripts.pod_env(settings)
    assert env["OVERBRAINER_WATCHDOG_INTERVAL_MS"] == "120"
    env["OVERBRAINER_HOST_KEY"] = pod.env["OVERBRAINER_HOST_KEY"]  # what Runpod puts in place
    for name in ("OVERBRAINER_RUN_DIR", "OVERBRAINER_AUTHORIZED_KEY", "OVERBRAINER_MAX_SECONDS",
                 "OVERBRAINER_BOOT_GRACE", "OVERBRAINER_WATCHDOG_INTERVAL_MS"):
        pod.env.pop(name, None)
    pod.env.update(env)
    words = shlex.split(pod_scripts.pod_args())
    assert words[0] == "sh"
    proc = pod.start(words[1:])  # `sh -c '…'`, run by this test's shell (bash, dash, busybox sh)
    assert pod.verdict() == "ready"
    assert (pod.root / "root" / ".ssh" / "authorized_keys").read_text() == client_public + "\n"
    assert pod.finish(proc) == 0  # no job within the 1 s boot grace
    assert "delete reason=never_started" in pod.log() and "interval=120ms" in pod.log()
