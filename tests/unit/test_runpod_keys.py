"""A run's SSH keys made in Python, the host-key pin and the per-run ssh config."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
from pathlib import Path

import paramiko
import pytest

from overbrainer.errors import OverbrainerError
from overbrainer.runpod.keys import RunKeys, alias, forget_keys, ssh_line
from overbrainer.runpod.pod_record import PodEndpoint
from tests.fixtures.sshd_server import SshServer, _free_port

RUN = "demo_20260101-120000"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def ssh_g(config: Path, host: str) -> dict[str, list[str]]:
    out = subprocess.run(["ssh", "-G", "-F", str(config), host], capture_output=True, text=True, check=True,
                         stdin=subprocess.DEVNULL).stdout
    seen: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        seen.setdefault(key, []).append(value)
    return seen


@pytest.fixture
def keys(tmp_path) -> RunKeys:
    return RunKeys.generate(tmp_path / "runs" / RUN / "ssh", RUN)


@pytest.fixture
def odd_keys(tmp_path) -> RunKeys:
    """Keys in a folder whose path holds `%` and a space (escaped and quoted in the config)."""
    return RunKeys.generate(tmp_path / "100% sure" / "runs" / RUN / "ssh", RUN)


def test_both_keys_are_ed25519_in_openssh_format_and_private_files_are_0600(keys):
    assert mode(keys.ssh_dir) == 0o700
    for private, public in ((keys.client_key, keys.client_public), (keys.host_key, keys.host_public)):
        assert mode(private) == 0o600
        assert private.read_bytes().startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----")
        loaded = paramiko.Ed25519Key.from_private_key_file(str(private))
        assert f"{loaded.get_name()} {loaded.get_base64()}" == public
        assert Path(f"{private}.pub").read_text() == f"{public} overbrainer-{RUN}\n"
    assert keys.client_public != keys.host_public
    assert RunKeys.load(keys.ssh_dir, RUN) == keys


def test_the_host_key_secret_value_is_the_private_key_file_in_base64(keys):
    value = keys.host_secret_value()
    assert "\n" not in value and base64.b64decode(value) == keys.host_key.read_bytes()


def test_the_pin_is_keyed_by_the_alias_and_the_endpoint_last_seen(keys):
    assert keys.known_hosts.read_text() == f"overbrainer-{RUN} {keys.host_public}\n"
    keys.write_config(PodEndpoint("195.26.233.3", 34446))
    assert keys.known_hosts.read_text() == (f"overbrainer-{RUN} {keys.host_public}\n"
                                            f"[195.26.233.3]:34446 {keys.host_public}\n")
    pinned = paramiko.HostKeys(str(keys.known_hosts))
    assert pinned.lookup("[195.26.233.3]:34446")["ssh-ed25519"].get_base64() == keys.host_public.split()[1]


def test_ssh_reads_the_config_as_pinned_and_strict(keys):
    config = keys.write_config(PodEndpoint("195.26.233.3", 34446, "root"))
    seen = ssh_g(config, alias(RUN))
    assert seen["hostname"] == ["195.26.233.3"] and seen["port"] == ["34446"] and seen["user"] == ["root"]
    assert seen["identityfile"] == [str(keys.client_key.resolve())]
    assert seen["userknownhostsfile"] == [str(keys.known_hosts.resolve())]
    assert seen["globalknownhostsfile"] == ["/dev/null"]
    assert seen["hostkeyalias"] == [alias(RUN)]
    assert seen["stricthostkeychecking"] == ["true"] and seen["identitiesonly"] == ["yes"]
    assert seen["identityagent"] == ["none"] and seen["forwardagent"] == ["no"]
    assert seen["passwordauthentication"] == ["no"] and seen["kbdinteractiveauthentication"] == ["no"]
    assert ssh_line(RUN) == f"ssh -F runs/{RUN}/ssh/config overbrainer-{RUN}"
    # A restarted pod has a new port: the config is rewritten, the pin still holds.
    keys.write_config(PodEndpoint("195.26.233.3", 40001, "root"))
    assert ssh_g(config, alias(RUN))["port"] == ["40001"]


def test_a_path_with_percent_is_escaped_and_one_with_a_quote_refused(tmp_path):
    odd = RunKeys.generate(tmp_path / "100%" / "ssh", RUN)
    seen = ssh_g(odd.write_config(PodEndpoint("10.0.0.1", 22)), alias(RUN))
    # ssh -G shows the value before it expands `%%` to `%` (the real sshd test connects through it)
    assert seen["identityfile"] == [str(odd.client_key.resolve()).replace("%", "%%")]
    quoted = RunKeys.generate(tmp_path / 'a"b' / "ssh", RUN)
    with pytest.raises(OverbrainerError, match="holds a quote or a line break"):
        quoted.write_config(PodEndpoint("10.0.0.1", 22))


@pytest.mark.parametrize("host, port, user", [("a b", 22, "root"), ("h\nProxyCommand x", 22, "root"),
                                              ("h", 0, "root"), ("h", 22, "ro ot"), ("h", True, "root")])
def test_an_endpoint_that_could_inject_config_is_refused(host, port, user):
    with pytest.raises(ValueError):
        PodEndpoint(host, port, user)


def test_forgetting_removes_the_private_keys_only(keys):
    keys.write_config(PodEndpoint("10.0.0.1", 22))
    assert sorted(p.name for p in keys.forget()) == ["host_ed25519", "id_ed25519"]
    assert sorted(p.name for p in keys.ssh_dir.iterdir()) == [
        "config", "host_ed25519.pub", "id_ed25519.pub", "known_hosts"]
    assert forget_keys(keys.ssh_dir) == []
    with pytest.raises(OverbrainerError, match="cannot read"):
        keys.host_secret_value()


@pytest.mark.ssh
def test_a_real_sshd_with_the_run_host_key_is_reached_and_any_other_host_key_refused(tmp_path, odd_keys):
    keys = odd_keys
    server = SshServer(tmp_path / "pod")
    server.ssh_dir.mkdir(parents=True)
    server.host_key.write_bytes(keys.host_key.read_bytes())
    os.chmod(server.host_key, 0o600)
    (server.root / "authorized_keys").write_text(keys.client_public + "\n")
    server.host_key_line = keys.host_public
    server.port = _free_port()
    server._write_client_files()
    Path("/run/sshd").mkdir(exist_ok=True)
    server.start()
    try:
        config = keys.write_config(PodEndpoint(server.host, server.port, server.user))
        argv = ["ssh", "-F", str(config), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", alias(RUN), "echo pinned"]
        ok = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
        assert (ok.returncode, ok.stdout) == (0, "pinned\n"), ok.stderr
        other = RunKeys.generate(tmp_path / "other" / "ssh", RUN)  # a pod serving another key
        keys.known_hosts.write_text(f"{alias(RUN)} {other.host_public}\n")
        refused = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
        assert refused.returncode == 255 and "Host key verification failed" in refused.stderr
    finally:
        server.stop()


def test_a_clusters_members_each_have_their_own_host_in_the_config(keys):
    primary, second = PodEndpoint("203.0.113.5", 22001, "root"), PodEndpoint("203.0.113.9", 22007, "root")
    config = paramiko.SSHConfig.from_path(str(keys.write_config(primary, [second])))
    one, two = config.lookup(keys.alias), config.lookup(keys.member_alias(1))
    assert (one["hostname"], one["port"]) == ("203.0.113.5", "22001")  # `pod ssh`: the primary
    assert (two["hostname"], two["port"]) == ("203.0.113.9", "22007")
    assert one["hostkeyalias"] == two["hostkeyalias"] == keys.alias  # one pinned host key for all members
    assert keys.member_alias(0) == keys.alias and keys.member_alias(1) == f"{keys.alias}-r1"
