"""Jobs on a machine reached over SSH, with paramiko; workdir relative to the remote $HOME.

One Transport, one exec channel per operation (`sh -c '<script>'`). An operation whose
connection dropped is retried once on a fresh connection (spawn only if the launcher was never
sent: its TargetUnreachable carries `sent`, and jobs.start looks for the job's job.pid when the
launcher may have run). Files travel as tar streams over the channel; secrets travel on stdin.
"""

from __future__ import annotations

import logging
import posixpath
import shlex
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from overbrainer.errors import OverbrainerError
from overbrainer.exec import scripts, transfer
from overbrainer.exec.base import (
    Executor,
    JobId,
    JobSpec,
    JobState,
    TargetUnreachable,
    check_env,
    check_secrets,
)
from overbrainer.exec.ssh_connect import WINDOW, SshEndpoint, connect
from overbrainer.support.retry import Policy, retrying

log = logging.getLogger(__name__)

T = TypeVar("T")
Transport = Any  # a paramiko.Transport (paramiko has no type information)
Channel = Any  # a paramiko.Channel
Send = Callable[[bytes], None]
Recv = Callable[[int], bytes]

OP_TIMEOUT = 120.0  # no byte for this long on a channel = the connection is dead
_STDERR_KEEP = 64 << 10


class _Dropped(TargetUnreachable):
    """The connection died during an operation; `sent`: the command reached the target."""

    def __init__(self, message: str, sent: bool):
        super().__init__(message)
        self.sent = sent


class SshExecutor(Executor):
    """SshExecutor("homelab") or SshExecutor(SshEndpoint(host, port=…, key_files=[…], …)).

    `workdir` is resolved on the target (relative = under $HOME, `~/` expanded there) and
    created; the constructor connects, so an unreachable target fails here.
    """

    def __init__(self, host: str | SshEndpoint, workdir: str = "overbrainer", *,
                 op_timeout: float = OP_TIMEOUT, **endpoint: Any):
        self.endpoint = host if isinstance(host, SshEndpoint) else SshEndpoint(host, **endpoint)
        self.op_timeout = op_timeout
        self._t: Transport | None = None
        self._lock = threading.Lock()
        out = self._call("resolving the workdir", lambda t: self._exec(t, scripts.resolve_workdir(workdir)))
        path = out.decode("utf-8", "replace").strip()
        if not path.startswith("/"):
            raise OverbrainerError(f"the workdir on {self.endpoint.name} did not resolve to an absolute path")
        self.workdir = path

    # --- connection -------------------------------------------------------------------------

    def _transport(self) -> Transport:
        with self._lock:
            if self._t is None or not self._t.is_active():
                if self._t is not None:
                    self._t.close()
                self._t = None
                self._t = connect(self.endpoint)
            return self._t

    def _drop(self, t: Transport) -> None:
        with self._lock:
            t.close()
            if self._t is t:
                self._t = None

    def close(self) -> None:
        with self._lock:
            if self._t is not None:
                self._t.close()
                self._t = None

    def _call(self, action: str, fn: Callable[[Transport], T], *, idempotent: bool = True) -> T:
        def dropped(e: BaseException) -> bool:
            return isinstance(e, _Dropped) and (idempotent or not e.sent)

        def reconnecting(e: BaseException, _seconds: float) -> None:
            log.debug("%s: connection to %s dropped; reconnecting once", action, self.endpoint.name)

        return retrying(Policy(2, dropped), reconnecting)(lambda: fn(self._transport()))

    def _abs(self, path: str) -> str:
        return path if path.startswith("/") else f"{self.workdir}/{path}"

    # --- one command on one channel -----------------------------------------------------------

    def _exec(self, t: Transport, script: str, *, action: str = "command", stdin: bytes | None = None,
              feed: Callable[[Send], object] | None = None, sink: Callable[[Recv], object] | None = None,
              timeout: float | None = None) -> bytes:
        """Run `sh -c script`; stdin from bytes or feed(send); stdout to sink(recv) or returned."""
        # lazy: paramiko (with cryptography, ~0.1 s) only once a target is reached over SSH
        import paramiko

        timeout = timeout or self.op_timeout
        sent = False
        chan = None
        try:
            chan = t.open_session(timeout=timeout)
            chan.settimeout(timeout)
            chan.exec_command("sh -c " + shlex.quote(script))
            sent = True
            err = _StderrReader(chan)
            feed_error = _send_input(chan, stdin, feed, action)
            chan.shutdown_write()
            out = _receive_output(chan, sink, action)
            if not chan.status_event.wait(timeout):
                raise TimeoutError("no exit status")
            code = chan.exit_status
            err.join(timeout)
        except (OSError, EOFError, paramiko.SSHException) as e:
            self._drop(t)
            raise _Dropped(f"cannot reach {self.endpoint.name}: {action}: {_why(e)}", sent) from e
        finally:
            if chan is not None:
                self._close_channel(chan, t)
        if code == -1 or not t.is_active():
            self._drop(t)
            raise _Dropped(f"cannot reach {self.endpoint.name}: {action}: the connection closed", sent)
        if code != 0:
            raise OverbrainerError(f"{action} on {self.endpoint.name} failed: {err.summary(code)}")
        if feed_error is not None:
            raise OverbrainerError(f"{action} on {self.endpoint.name} failed: {_why(feed_error)}")
        return out

    def _close_channel(self, chan: Channel, t: Transport) -> None:
        """Close `chan`; a close on a connection that just died fails on its send (paramiko raises
        EOFError, or OSError): the connection is dropped, and the check after the command (or the
        error already raised) says so."""
        # lazy: paramiko (with cryptography, ~0.1 s) only once a target is reached over SSH
        import paramiko

        try:
            chan.close()
        except (OSError, EOFError, paramiko.SSHException):
            self._drop(t)

    def _run(self, action: str, script: str, *, idempotent: bool = True, **kw: Any) -> bytes:
        return self._call(action, lambda t: self._exec(t, script, action=action, **kw), idempotent=idempotent)

    # --- contract ---------------------------------------------------------------------------

    def claim(self, dir: str, owner: str) -> bool:
        if not owner or not owner.isalnum() or not owner.isascii() or len(owner) > 64:
            raise OverbrainerError("invalid claim owner token")
        out = self._run("claim", scripts.claim(self._abs(dir), owner)).decode().strip()
        if out not in ("ours", "taken"):
            raise OverbrainerError(f"claim on {self.endpoint.name} failed: unexpected answer")
        return out == "ours"

    def _upload(self, entries: list[tuple[Path, str]], folder: str | None, progress: transfer.Progress | None) -> None:
        if not entries:
            if folder is not None:  # base.upload sends no empty list of entries without a folder
                self._run("upload", f"mkdir -p -- {shlex.quote(self._abs(folder))}")
            return
        base, members = transfer.under_one_folder([(path, self._abs(there)) for path, there in entries])
        folders = sorted({posixpath.dirname(posixpath.join(base, arc)) for _, arc in members})
        total = transfer.members_size(members) if progress is not None else None
        meters: list[transfer.Meter] = []

        def feed(send: Send) -> None:  # each attempt counts from 0
            if progress is not None:
                meters.append(transfer.Meter(progress, total))
                send = meters[-1].writer(send)
            transfer.write_tar(send, members)

        self._run("upload", scripts.upload(base, folders), feed=feed)
        if meters:
            meters[-1].finish()

    def spawn(self, job: JobSpec) -> JobId:
        check_secrets(job.secrets)
        check_env(job.env)
        d = self._abs(job.dir)
        names = list(job.secrets)
        script = scripts.launcher(d, scripts.wrapper(job.script), job.env, names)
        stdin = "".join(job.secrets[n] + "\n" for n in names).encode()
        out = self._run("spawn", script, stdin=stdin, idempotent=False).decode().strip()
        if not out.isdigit() or int(out) <= 1:
            raise OverbrainerError(f"spawn on {self.endpoint.name} failed: the launcher printed no process id")
        log.debug("job started on %s in %s, pid %s", self.endpoint.name, d, out)
        return JobId(d, int(out), job.container)

    def read_from(self, path: str, offset: int, limit: int) -> bytes:
        return self._run("read", scripts.read_from(self._abs(path), offset, limit))

    def status(self, job: JobId) -> JobState:
        return JobState.parse(self._run("job status", scripts.status(job.dir, job.pid)).decode())

    def cancel(self, job: JobId) -> None:
        self._run("cancel", scripts.cancel(job.dir, job.pid, job.container), timeout=max(self.op_timeout, 90))

    def download(self, remote: str, local: str, entries: Iterable[str], exclude: Iterable[str] = (),
                 progress: transfer.Progress | None = None) -> transfer.Written:
        entries, exclude = list(entries), list(exclude)
        script = scripts.download(self._abs(remote), entries, exclude)
        total = self._tree_size(remote, entries, exclude) if progress is not None else None
        meters: list[transfer.Meter] = []
        written: transfer.Written = {}

        def sink(recv: Recv) -> None:  # each attempt counts from 0
            written.clear()
            if progress is not None:
                meters.append(transfer.Meter(progress, total))
                recv = meters[-1].reader(recv)
            _extract_if_any(recv, local, written)

        self._run("download", script, sink=sink)
        if meters:
            meters[-1].finish()
        return written

    def _tree_size(self, remote: str, entries: list[str], exclude: list[str]) -> int | None:
        """Bytes of the files a download of `entries` brings (None when the target cannot say)."""
        try:
            out = self._run("sizing a download", scripts.tree_size(self._abs(remote), entries, exclude))
        except OverbrainerError as e:
            log.debug("cannot size the download: %s", e)
            return None
        text = out.decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None

    def manifest(self, remote: str, entries: Iterable[str], exclude: Iterable[str] = ()) -> list[tuple[str, str]]:
        script = scripts.manifest(self._abs(remote), list(entries), list(exclude))
        return transfer.parse_manifest(self._run("manifest", script, timeout=max(self.op_timeout, 600)))

    def probe(self, script: str, timeout: float = 60) -> str:
        return self._run("probe", script, timeout=timeout).decode("utf-8", "replace")

    def put_file(self, path: str, content: bytes | str) -> None:
        data = content.encode() if isinstance(content, str) else content
        self._run("writing a file", scripts.put_file(self._abs(path)), stdin=data)


class _ChannelError(Exception):
    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _packet_sender(chan: Channel) -> Send:
    """sendall in pieces of one packet: paramiko re-slices (copies) the rest of a big buffer
    after every packet it sends."""

    def send(data: bytes) -> None:
        size = max(chan.out_max_packet_size - 64, 1024)  # paramiko keeps 64 bytes for headers
        if len(data) <= size:
            chan.sendall(data)
            return
        view = memoryview(data)
        for off in range(0, len(view), size):
            chan.sendall(view[off:off + size].tobytes())

    return send


def _guarded(fn: Callable[[Any], T]) -> Callable[[Any], T]:
    """Tell the channel's errors apart from local file errors raised around it."""
    # lazy: paramiko (with cryptography, ~0.1 s) only once a target is reached over SSH
    import paramiko

    def call(arg: Any) -> T:
        try:
            return fn(arg)
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise _ChannelError(e) from e

    return call


def _send_input(chan: Channel, stdin: bytes | None, feed: Callable[[Send], object] | None,
                action: str) -> BaseException | None:
    """Send `stdin`, then what `feed(send)` sends; returns the channel error a feed met (the
    receiver's error, when it has one, is the one reported)."""
    if stdin is not None:
        chan.sendall(stdin)
    if feed is None:
        return None
    try:
        feed(_guarded(_packet_sender(chan)))
    except _ChannelError as e:
        return e.error
    except OSError as e:
        raise OverbrainerError(f"{action} failed: cannot read {e.filename}: {e.strerror}") from e
    return None


def _receive_output(chan: Channel, sink: Callable[[Recv], object] | None, action: str) -> bytes:
    """stdout handed to `sink(recv)` (then b"") or read whole and returned."""
    if sink is None:
        return _read_all(chan)
    try:
        sink(_guarded(chan.recv))
    except _ChannelError as e:
        raise e.error from None
    except OSError as e:
        raise OverbrainerError(f"{action} failed: cannot write {e.filename}: {e.strerror}") from e
    return b""


def _extract_if_any(recv: Callable[[int], bytes], local: str, written: transfer.Written) -> None:
    first = recv(WINDOW)
    if not first:
        return
    pending = [first]

    def read(n: int) -> bytes:
        # Take all that is buffered: paramiko moves the rest of its buffer on a partial read.
        if pending:
            return pending.pop()
        return recv(max(n, WINDOW))

    transfer.extract_tar(read, local, written)
    while recv(WINDOW):  # tar pads its end: drain so the exit status arrives
        pass


def _read_all(chan: Channel) -> bytes:
    parts: list[bytes] = []
    while True:
        b: bytes = chan.recv(WINDOW)  # all that is buffered (a partial read moves the rest)
        if not b:
            return b"".join(parts)
        parts.append(b)


class _StderrReader:
    """Drain stderr in a thread (it shares the channel window with stdout)."""

    def __init__(self, chan: Channel):
        self.data = bytearray()
        self._thread = threading.Thread(target=self._run, args=(chan,), daemon=True)
        self._thread.start()

    def _run(self, chan: Channel) -> None:
        try:
            while True:
                b = chan.recv_stderr(1 << 16)
                if not b:
                    return
                if len(self.data) < _STDERR_KEEP:
                    self.data += b
        except Exception:  # the main path reports the failure
            return

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def summary(self, code: int) -> str:
        text = bytes(self.data[:4096]).decode("utf-8", "replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()][:20]
        return "; ".join(lines) if lines else f"exit status {code}"


def _why(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:300]
