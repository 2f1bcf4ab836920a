"""The SSH keys of a Runpod run, made in Python (no `ssh-keygen` needed), in `runs/<id>/ssh/`:

- `id_ed25519` (0600) + `.pub`: the run's client key; the pod's sshd authorizes only it.
- `host_ed25519` (0600) + `.pub`: the pod's host key, delivered to the pod through a Runpod
  account secret. Its public half is pinned: the client never trusts an image's host key.
- `known_hosts`: the pin, keyed by the alias `overbrainer-<id>` (so a new port after a pod restart
  never breaks it), plus a `[host]:port` line for the endpoint last seen.
- `config`: for `ssh -F runs/<id>/ssh/config overbrainer-<id>`, ignoring the user's ssh config,
  agent and known_hosts: only the run's key, only the pinned host key, strict checking.

The private keys are forgotten once no pod of the run may still need them.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from overbrainer.errors import OverbrainerError
from overbrainer.runpod.pod_record import PodEndpoint
from overbrainer.support.atomic import atomic_write_bytes, atomic_write_text

SSH_DIR = "ssh"
CLIENT_KEY = "id_ed25519"
HOST_KEY = "host_ed25519"
KNOWN_HOSTS = "known_hosts"
CONFIG = "config"
PRIVATE = (CLIENT_KEY, HOST_KEY)


def alias(run_id: str) -> str:
    """The ssh host alias of a run's pod (also the pin's name in known_hosts)."""
    return f"overbrainer-{run_id}"


def ssh_line(run_id: str, folder: str | None = None) -> str:
    """The command a user runs, from the project folder, to log in to the run's pod; `folder` is
    where its record is, relative to the project (default `runs/<id>`; a side job's is deeper)."""
    return f"ssh -F {folder or f'runs/{run_id}'}/{SSH_DIR}/{CONFIG} {alias(run_id)}"


@dataclass(frozen=True)
class KeyPair:
    """An ed25519 key: the private key in OpenSSH format, the public one as `ssh-ed25519 AAAA…`."""

    private_openssh: bytes = field(repr=False)
    public: str

    @classmethod
    def generate(cls) -> "KeyPair":
        key = Ed25519PrivateKey.generate()
        private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                    serialization.NoEncryption())
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                               serialization.PublicFormat.OpenSSH).decode("ascii")
        return cls(private, public)


def _quoted(path: Path) -> str:
    """A path for an ssh config line: absolute, double-quoted, `%` doubled; `"` or a line break
    cannot be written safely, so such a path is refused."""
    text = str(Path(path).resolve())
    if '"' in text or "\n" in text or "\r" in text:
        raise OverbrainerError(f"cannot write an ssh config for {text!r}: the path holds a quote or a line break")
    return '"' + text.replace("%", "%%") + '"'


@dataclass
class RunKeys:
    """The keys of one run, in `ssh_dir` (`runs/<id>/ssh`)."""

    ssh_dir: Path
    run_id: str
    client_public: str
    host_public: str

    @property
    def alias(self) -> str:
        return alias(self.run_id)

    @property
    def client_key(self) -> Path:
        return self.ssh_dir / CLIENT_KEY

    @property
    def host_key(self) -> Path:
        return self.ssh_dir / HOST_KEY

    @property
    def known_hosts(self) -> Path:
        return self.ssh_dir / KNOWN_HOSTS

    @property
    def config(self) -> Path:
        return self.ssh_dir / CONFIG

    @classmethod
    def generate(cls, ssh_dir: Path, run_id: str) -> "RunKeys":
        """Make both keys (the folder is 0700, private files 0600) and write the pin."""
        ssh_dir = Path(ssh_dir)
        try:
            ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(ssh_dir, 0o700)
            comment = alias(run_id)
            pairs = {CLIENT_KEY: KeyPair.generate(), HOST_KEY: KeyPair.generate()}
            for name, pair in pairs.items():
                atomic_write_bytes(ssh_dir / name, pair.private_openssh, mode=0o600)
                atomic_write_text(ssh_dir / f"{name}.pub", f"{pair.public} {comment}\n")
        except OSError as e:
            raise OverbrainerError(f"cannot write the SSH keys of run {run_id} in {ssh_dir}: "
                                   f"{e.strerror or e}") from e
        keys = cls(ssh_dir, run_id, pairs[CLIENT_KEY].public, pairs[HOST_KEY].public)
        keys.write_known_hosts(None)
        return keys

    @classmethod
    def load(cls, ssh_dir: Path, run_id: str) -> "RunKeys":
        """The keys a run made earlier (from their public files)."""
        ssh_dir = Path(ssh_dir)

        def public(name: str) -> str:
            path = ssh_dir / f"{name}.pub"
            try:
                words = path.read_text(encoding="ascii").split()
            except (OSError, UnicodeDecodeError) as e:
                raise OverbrainerError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from e
            if len(words) < 2 or words[0] != "ssh-ed25519":
                raise OverbrainerError(f"{path} is not an ed25519 public key")
            return " ".join(words[:2])

        return cls(ssh_dir, run_id, public(CLIENT_KEY), public(HOST_KEY))

    def host_secret_value(self) -> str:
        """The pod's host key as its Runpod secret holds it: the OpenSSH private key file in
        base64 (one line, safe in an env value). Raises when the key was forgotten already."""
        try:
            return base64.b64encode(self.host_key.read_bytes()).decode("ascii")
        except OSError as e:
            raise OverbrainerError(f"cannot read {self.host_key}: {e.strerror or e}") from e

    def write_known_hosts(self, endpoint: PodEndpoint | None) -> Path:
        """The pin: the alias line, and the `[host]:port` line of `endpoint` when known."""
        lines = [f"{self.alias} {self.host_public}"]
        if endpoint is not None:
            lines.append(f"[{endpoint.host}]:{endpoint.port} {self.host_public}")
        atomic_write_text(self.known_hosts, "\n".join(lines) + "\n")
        return self.known_hosts

    def member_alias(self, rank: int) -> str:
        """The SSH alias of a cluster's member: the run's own for the primary (rank 0, what `pod
        ssh` reaches), `<alias>-r<rank>` for the others."""
        return self.alias if rank == 0 else f"{self.alias}-r{int(rank)}"

    def write_config(self, endpoint: PodEndpoint, others: Sequence[PodEndpoint] = ()) -> Path:
        """(Re)write `config` and the pin for `endpoint` (a restarted pod has a new port): call it
        before every connection. `others`: the other members of a cluster, ranks 1, 2, … (each
        its own Host, `member_alias`; every member has the run's host key). The endpoints were
        validated (PodEndpoint) against injection."""
        self.write_known_hosts(endpoint)
        text = f"# Written by overbrainer for run {self.run_id}; use: {ssh_line(self.run_id)}\n"
        for rank, ep in enumerate([endpoint, *others]):
            text += (
                f"Host {self.member_alias(rank)}\n"
                f"  HostName {ep.host}\n"
                f"  Port {ep.port}\n"
                f"  User {ep.user}\n"
                f"  IdentityFile {_quoted(self.client_key)}\n"
                "  IdentitiesOnly yes\n"
                "  IdentityAgent none\n"
                "  ForwardAgent no\n"
                f"  UserKnownHostsFile {_quoted(self.known_hosts)}\n"
                "  GlobalKnownHostsFile /dev/null\n"
                f"  HostKeyAlias {self.alias}\n"
                "  StrictHostKeyChecking yes\n"
                "  CheckHostIP no\n"
                "  UpdateHostKeys no\n"
                "  PasswordAuthentication no\n"
                "  KbdInteractiveAuthentication no\n"
            )
        try:
            atomic_write_text(self.config, text)
        except OSError as e:
            raise OverbrainerError(f"cannot write {self.config}: {e.strerror or e}") from e
        return self.config

    def forget(self) -> list[Path]:
        """Delete the private keys (once no pod of the run may need them); returns what was
        removed. The public halves, the pin and the config stay, for the record."""
        return forget_keys(self.ssh_dir)


def forget_keys(ssh_dir: Path) -> list[Path]:
    """Delete the private keys in a run's `ssh/` folder, if any; returns what was removed."""
    removed = []
    for name in PRIVATE:
        path = Path(ssh_dir) / name
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise OverbrainerError(f"cannot delete {path}: {e.strerror or e}") from e
    return removed
