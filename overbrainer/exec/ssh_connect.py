"""One paramiko connection to a target: ~/.ssh/config, agent + key files, strict known_hosts.

`SshEndpoint` says where to go; every field given explicitly wins over ~/.ssh/config (or the
file named by `ssh_config`), so a Runpod pod (own config, key and pinned host key) is just
another endpoint. The transport gets large windows and packets for throughput and a 15 s
keepalive so an idle firewall does not drop it.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overbrainer.errors import OverbrainerError
from overbrainer.exec.base import HostKeyError, TargetUnreachable

log = logging.getLogger(__name__)

KEEPALIVE = 15
CONNECT_TIMEOUT = 30
WINDOW = 16 << 20  # bytes in flight per channel (and the most a recv returns)
PACKET = 256 << 10  # largest channel packet we ask for (the server may cap it at 32 KiB)


@dataclass
class SshEndpoint:
    """host: an ~/.ssh/config alias, `host` or `user@host`. label: how errors name it."""

    host: str
    port: int | None = None
    user: str | None = None
    key_files: list[str] = field(default_factory=list)
    ssh_config: str | None = None  # default: ~/.ssh/config when it exists
    known_hosts: list[str] = field(default_factory=list)  # default: config's UserKnownHostsFile
    host_key: str | None = None  # "ssh-ed25519 AAAA…": the only key accepted (pinned)
    agent: bool = True
    timeout: float = CONNECT_TIMEOUT
    label: str | None = None

    @property
    def name(self) -> str:
        return self.label or f"target `{self.host}`"


@dataclass
class Resolved:
    hostname: str
    port: int
    user: str
    key_files: list[str]
    known_hosts: list[str]
    key_alias: str | None
    agent: bool
    proxy_command: str | None


def resolve(ep: SshEndpoint) -> Resolved:
    """Apply ssh_config to the endpoint (explicit fields win)."""
    # lazy: paramiko (with cryptography, ~0.1 s) only once a target is reached over SSH
    import paramiko

    user, _, alias = ep.host.rpartition("@")
    cfg_path = Path(ep.ssh_config).expanduser() if ep.ssh_config else Path("~/.ssh/config").expanduser()
    cfg: dict[str, Any] = {}
    if cfg_path.is_file():
        try:
            cfg = paramiko.SSHConfig.from_path(str(cfg_path)).lookup(alias)
        except Exception as e:  # a broken config must name the file, not crash
            raise TargetUnreachable(f"cannot read {cfg_path}: {type(e).__name__}") from e
    elif ep.ssh_config:
        raise TargetUnreachable(f"cannot reach {ep.name}: {cfg_path} does not exist")
    hostname = cfg.get("hostname", alias)
    port = ep.port or int(cfg.get("port", 22))
    user = ep.user or user or cfg.get("user") or _local_user()
    keys = list(ep.key_files) + [os.path.expanduser(k) for k in cfg.get("identityfile", [])]
    identities_only = cfg.get("identitiesonly", "no").lower() == "yes"
    agent_cfg = cfg.get("identityagent", "").lower() != "none"
    known = list(ep.known_hosts) or [os.path.expanduser(p) for p in cfg.get("userknownhostsfile", "").split()]
    if not known:
        known = [os.path.expanduser("~/.ssh/known_hosts")]
    if not keys and not identities_only:
        keys = [os.path.expanduser(f"~/.ssh/{n}") for n in ("id_ed25519", "id_ecdsa", "id_rsa")]
    return Resolved(hostname, port, user, keys, known, cfg.get("hostkeyalias"),
                    ep.agent and agent_cfg and not identities_only and not ep.host_key, cfg.get("proxycommand"))


def _local_user() -> str:
    return getpass.getuser()


def connect(ep: SshEndpoint) -> Any:
    """A connected, authenticated paramiko Transport, or TargetUnreachable / HostKeyError."""
    # lazy: paramiko (with cryptography, ~0.1 s) only once a target is reached over SSH
    import paramiko

    _quiet_paramiko()

    r = resolve(ep)
    sock = None
    try:
        if r.proxy_command:
            sock = paramiko.ProxyCommand(r.proxy_command)
        else:
            sock = socket.create_connection((r.hostname, r.port), timeout=ep.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t = paramiko.Transport(sock, default_window_size=WINDOW, default_max_packet_size=PACKET)
        _prefer_fast_ciphers(t)
        t.banner_timeout = t.auth_timeout = ep.timeout
        t.start_client(timeout=ep.timeout)
    except (OSError, EOFError, paramiko.SSHException) as e:
        if sock is not None:
            sock.close()
        raise TargetUnreachable(f"cannot reach {ep.name}: {_why(e)}") from e
    try:
        _check_host_key(t, ep, r)
        _authenticate(t, ep, r)
    except BaseException:
        t.close()
        raise
    t.set_keepalive(KEEPALIVE)
    if "aes" in (t.local_cipher or "") and "aes" in (t.remote_cipher or ""):
        # OpenSSH's own limit for AES (2^32 blocks). paramiko's 512 MiB default starts a rekey
        # mid-transfer, and a channel closing during that rekey deadlocks its transport thread.
        t.packetizer.REKEY_BYTES = 1 << 36
    return t


def _quiet_paramiko() -> None:
    """paramiko logs a dropped connection as an ERROR with a traceback from its own thread; we
    report drops ourselves (with context), so its log only shows at debug level."""
    plog = logging.getLogger("paramiko")
    if plog.level == logging.NOTSET and not logging.getLogger("overbrainer").isEnabledFor(logging.DEBUG):
        plog.setLevel(logging.CRITICAL)


def _prefer_fast_ciphers(t: Any) -> None:
    """AES-GCM first: one AEAD pass instead of AES-CTR plus a separate HMAC per packet."""
    opts = t.get_security_options()
    fast = [c for c in ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com") if c in opts.ciphers]
    opts.ciphers = tuple(fast + [c for c in opts.ciphers if c not in fast])


def _check_host_key(t: Any, ep: SshEndpoint, r: Resolved) -> None:
    # lazy: paramiko (with cryptography, ~0.1 s) only once a target is reached over SSH
    import paramiko

    key = t.get_remote_server_key()
    shown = r.key_alias or r.hostname
    if ep.host_key:
        kind, _, data = ep.host_key.strip().partition(" ")
        if key.get_name() != kind or key.get_base64() != data.split()[0]:
            raise HostKeyError(f"host key verification failed for {shown}: it is not the pinned key")
        return
    names = [r.key_alias] if r.key_alias else []
    names += [r.hostname] if r.port == 22 else [f"[{r.hostname}]:{r.port}"]
    if r.key_alias and r.port != 22:
        names.append(f"[{r.key_alias}]:{r.port}")
    known = paramiko.HostKeys()
    for path in r.known_hosts:
        if os.path.isfile(path):
            try:
                known.load(path)
            except (OSError, paramiko.SSHException) as e:
                raise HostKeyError(f"cannot read {path}: {type(e).__name__}") from e
    entries = [known.lookup(n) for n in names]
    entries = [e for e in entries if e]
    if any(key.get_name() in e and e[key.get_name()] == key for e in entries):
        return
    if entries:
        raise HostKeyError(
            f"host key verification failed for {shown}: the key differs from the one in known_hosts "
            f"({', '.join(r.known_hosts)}); if the host was reinstalled, remove the old entry"
        )
    port = "" if r.port == 22 else f"-p {r.port} "
    raise HostKeyError(
        f"host key of {shown} is not known: check it and add it with "
        f"`ssh-keyscan {port}{r.hostname} >> {r.known_hosts[0]}`"
    )


def _authenticate(t: Any, ep: SshEndpoint, r: Resolved) -> None:
    # lazy: paramiko (with cryptography, ~0.1 s) only once a target is reached over SSH
    import paramiko

    tried = 0
    candidates: list[Any] = []
    if r.agent:
        try:
            candidates += list(paramiko.Agent().get_keys())
        except paramiko.SSHException:
            pass
    for path in r.key_files:
        if not os.path.isfile(path):
            continue
        try:
            candidates.append(paramiko.PKey.from_path(path))
        except (paramiko.SSHException, OSError, ValueError) as e:
            log.debug("skipping key %s: %s", path, type(e).__name__)
    for key in candidates:
        tried += 1
        try:
            t.auth_publickey(r.user, key)
        except paramiko.AuthenticationException:
            continue
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise TargetUnreachable(f"cannot reach {ep.name}: {_why(e)}") from e
        if t.is_authenticated():
            return
    raise OverbrainerError(
        f"cannot reach {ep.name}: no key was accepted for {r.user}@{r.hostname} "
        f"({tried} tried; check IdentityFile in the ssh config and the agent)"
    )


def _why(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:300]
