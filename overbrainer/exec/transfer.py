"""Files between here and a target: tar streams, their safe extraction, and the SHA-256
manifests that verify what arrived.

The tar side on this machine is Python's tarfile in stream mode (`w|` / `r|`) with large
buffers; the other end is the target's `tar`. Extraction (tarfile's `data` filter plus the
checks it lacks) refuses absolute names, `..`, links leading outside the destination and special
files, and never writes through a symlink or a hard link. It hashes each regular file as it writes
it (`Written`), so verify need not read it again.

Progress: a `Progress` callback `(done, total)` is given the bytes of a tar stream as they pass
(through a `Meter`: at the start, at most once per PROGRESS_SECS, and once at the end), so a
5 GB model never looks hung.

Manifests and verify: do downloaded files match the target's? A manifest is a sorted list of
(relative path, sha256) of the regular files under some entries (like `find -prune … -type f`),
with basename globs excluded. An extraction records what it wrote in a `Written` map, so verify
need not read those files again while their stat key is unchanged.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import posixpath
import shutil
import stat
import tarfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from overbrainer.errors import OverbrainerError
from overbrainer.support.threads import in_daemon

log = logging.getLogger(__name__)

BUF = 1 << 20
PROGRESS_SECS = 0.5  # at most one progress report per this many seconds (besides start and end)

Progress = Callable[[int, Optional[int]], object]  # (bytes done, bytes in all or None)

class Meter:
    """Counts the bytes of one transfer and reports them to `progress(done, total)`: `(0, total)`
    at once, then at most once per PROGRESS_SECS, and `finish()` reports `(n, n)`. `total` counts
    file data, a tar stream also carries headers and padding: `done` never shows more than `total`.
    A failing callback never stops the transfer."""

    def __init__(self, progress: Progress, total: int | None, clock: Callable[[], float] = time.monotonic):
        self.progress = progress
        self.total = total
        self.done = 0
        self.clock = clock
        self.last = clock()
        self._report(0, total)

    def _report(self, done: int, total: int | None) -> None:
        try:
            self.progress(done, total)
        except Exception:  # noqa: BLE001 - a display problem must not fail a transfer
            log.debug("cannot report transfer progress", exc_info=True)

    def add(self, n: int) -> None:
        self.done += n
        now = self.clock()
        if now - self.last >= PROGRESS_SECS:
            self.last = now
            self._report(self.done if self.total is None else min(self.done, self.total), self.total)

    def finish(self) -> None:
        end = self.done if self.total is None else self.total
        self._report(end, end)

    def writer(self, write: Callable[[bytes], object]) -> Callable[[bytes], None]:
        def counted(data: bytes) -> None:
            write(data)
            self.add(len(data))
        return counted

    def reader(self, read: Callable[[int], bytes]) -> Callable[[int], bytes]:
        def counted(n: int) -> bytes:
            data = read(n)
            self.add(len(data))
            return data
        return counted


class UnsafeArchive(OverbrainerError):
    """A tar stream from the target tried to write outside the destination."""


class _HashingTarFile(tarfile.TarFile):
    """Hashes each regular file's bytes as it writes them (`digest`: the last one, None for a
    sparse member), so the files need not be read again to verify them."""

    digest: str | None = None

    def makefile(self, tarinfo: tarfile.TarInfo, targetpath: Any) -> None:
        self.digest = None
        if tarinfo.sparse is not None:
            return super().makefile(tarinfo, targetpath)
        source: Any = self.fileobj
        source.seek(tarinfo.offset_data)
        h = hashlib.sha256()
        left = tarinfo.size
        with open(targetpath, "wb") as target:
            while left:
                data = source.read(min(left, getattr(self, "copybufsize", None) or BUF))
                if not data:
                    raise tarfile.ReadError("unexpected end of data")
                h.update(data)
                target.write(data)
                left -= len(data)
        self.digest = h.hexdigest()


class _Writer:
    def __init__(self, write: Callable[[bytes], object]):
        self.write = write


class _Reader:
    """Hands tarfile at most `n` bytes per read from large chunks, without copying the rest of
    a chunk on every read (tarfile and paramiko both do that with oversized buffers)."""

    def __init__(self, read: Callable[[int], bytes]):
        self._source = read
        self._chunk = memoryview(b"")
        self._off = 0

    def read(self, n: int) -> bytes:
        if self._off >= len(self._chunk):
            data = self._source(n)
            if not data:
                return b""
            self._chunk, self._off = memoryview(data), 0
        out = self._chunk[self._off:self._off + n].tobytes()
        self._off += len(out)
        return out


def upload_names(local: str | os.PathLike[str], skip: Iterable[str]) -> list[str]:
    """Top-level entries of `local` minus `skip`, sorted."""
    skip = set(skip)
    return sorted(n for n in os.listdir(local) if n not in skip)


Member = tuple[Path, str]  # (a local file or folder, its name in the tar: a relative path)


def members_of(root: str | os.PathLike[str], names: Iterable[str]) -> list[Member]:
    """`root/<name>` under the name `name`, for each name."""
    return [(Path(root, n), n) for n in names]


def under_one_folder(entries: Iterable[tuple[Path, str]]) -> tuple[str, list[Member]]:
    """Chosen files or folders [(local path, absolute remote path)] → (the remote folder they all
    go under, [(local path, its remote path relative to that folder)])."""
    pairs = [(Path(local), posixpath.normpath(remote)) for local, remote in entries]
    base = posixpath.commonpath([posixpath.dirname(r) for _, r in pairs])
    return base, [(local, posixpath.relpath(r, base)) for local, r in pairs]


def write_tar(write: Callable[[bytes], object], members: Iterable[Member], exclude: Iterable[str] = ()) -> int:
    """Stream a tar of each member (folders recursively, symlinks kept, basename globs in
    `exclude` pruned) into `write`; returns the bytes of file data sent."""
    exclude = list(exclude)
    total = 0
    with tarfile.open(fileobj=_Writer(write), mode="w|", bufsize=BUF,  # type: ignore[call-overload]  # write-only
                      format=tarfile.PAX_FORMAT) as tf:
        tf.copybufsize = BUF
        for top, arc in members:
            for path, arcname in _walk(top, arc, exclude):
                info = tf.gettarinfo(str(path), arcname)
                if info is None:  # socket or other unsupported file: skip it
                    continue
                info.uname = info.gname = ""
                if info.isreg():
                    with open(path, "rb") as f:
                        tf.addfile(info, f)
                    total += info.size
                else:
                    tf.addfile(info)
    return total


def tree_size(root: str | os.PathLike[str], names: Iterable[str], exclude: Iterable[str] = ()) -> int:
    """Bytes of the regular files a tar of `root/<name>` carries (symlinks not followed)."""
    return members_size(members_of(root, names), exclude)


def members_size(members: Iterable[Member], exclude: Iterable[str] = ()) -> int:
    """Bytes of the regular files a tar of `members` carries (symlinks not followed)."""
    exclude = list(exclude)
    total = 0
    for top, arc in members:
        for path, _ in _walk(top, arc, exclude):
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def _walk(top: Path, arc: str, exclude: list[str]) -> Iterator[tuple[Path, str]]:
    if excluded(top.name, exclude):
        return
    yield top, arc
    if top.is_dir() and not top.is_symlink():
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not excluded(d, exclude))
            rel = posixpath.normpath(posixpath.join(arc, os.path.relpath(dirpath, top)))
            for n in dirnames + sorted(f for f in filenames if not excluded(f, exclude)):
                yield Path(dirpath, n), f"{rel}/{n}"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _check_name(name: str, what: str) -> str:
    if not name or "\0" in name:
        raise UnsafeArchive(f"refusing a tar member from the target: {what} has an empty or invalid name")
    if name.startswith("/"):
        raise UnsafeArchive(f"refusing tar member {name!r} from the target: it is an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(f"refusing tar member {name!r} from the target: it contains `..`")
    if not parts:
        return "."
    return "/".join(parts)


def extract_tar(read: Callable[[int], bytes], dest: str | os.PathLike[str],
                written: Written | None = None) -> list[str]:
    """Extract a tar stream read from `read(n)` into `dest` safely; returns the member names.
    `written` (when given) gets the SHA-256 of every regular file as its bytes were written.

    tarfile's `data` filter refuses links that are absolute or lead outside, members that would
    land outside, and special files, and drops owners and odd modes. Checked here first, what it
    lacks: empty names, absolute names and `..` (it would strip or resolve them), a symlink to
    nothing, a member that replaces the destination, a parent leading outside (before anything in the way is removed),
    and what is in the way (an existing symlink, a folder where a file goes, a hard-linked file):
    removed, never written through. Raises UnsafeArchive (nothing more is written) on the first
    member refused.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    root = os.path.realpath(dest)
    names: list[str] = []

    def data_filter(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
        try:
            return tarfile.data_filter(member, path)
        except tarfile.FilterError as e:
            raise UnsafeArchive(_refusal(e, member.name, dest)) from None

    with _HashingTarFile.open(fileobj=_Reader(read), mode="r|", bufsize=BUF) as tf:  # type: ignore[call-overload]
        tf.copybufsize = BUF
        for m in tf:
            name = _check_name(m.name, "a member")
            if name == "." and not m.isdir():
                raise UnsafeArchive("refusing a tar member from the target: it replaces the destination")
            target = os.path.join(root, name)
            if not _inside(os.path.realpath(os.path.dirname(target)), root):
                raise UnsafeArchive(f"refusing tar member {name!r} from the target: it leads outside {dest}")
            if m.islnk():
                m.linkname = _check_name(m.linkname, "a hard link")
            elif m.issym() and not m.linkname:
                raise UnsafeArchive(f"refusing symlink {name!r} from the target: it points nowhere")
            if name != ".":
                _clear_the_way(m, target)
            m.name = name
            tf.digest = None
            tf.extract(m, root, set_attrs=not m.issym(), numeric_owner=True, filter=data_filter)
            if written is not None:
                written.pop(name, None)
                if m.isreg() and tf.digest is not None:
                    written[name] = (tf.digest, stat_key(os.lstat(target)))
            names.append(name)
    return names


def _clear_the_way(member: tarfile.TarInfo, target: str) -> None:
    """Remove what stands where `member` goes and would be written through: an existing symlink,
    a folder where a file goes, a file hard-linked elsewhere (writing it would change another
    path)."""
    if os.path.islink(target):
        os.unlink(target)
    elif member.isreg() and os.path.isdir(target):
        shutil.rmtree(target)
    elif member.isreg() and os.path.isfile(target) and os.stat(target).st_nlink > 1:
        os.unlink(target)


def _refusal(error: tarfile.FilterError, name: str, dest: Path) -> str:
    """The data filter's refusal in this module's words."""
    link = "hard link" if error.tarinfo.islnk() else "symlink"
    if isinstance(error, tarfile.SpecialFileError):
        return f"refusing tar member {name!r} from the target: it is a device, fifo or special file"
    if isinstance(error, tarfile.AbsoluteLinkError):
        return f"refusing {link} {name!r} from the target: it points to an absolute path"
    if isinstance(error, tarfile.LinkOutsideDestinationError):
        return f"refusing {link} {name!r} from the target: it points outside {dest}"
    if isinstance(error, tarfile.AbsolutePathError):
        return f"refusing tar member {name!r} from the target: it is an absolute path"
    return f"refusing tar member {name!r} from the target: it leads outside {dest}"


def copy_entries(src: str | os.PathLike[str], dst: str | os.PathLike[str], names: Iterable[str],
                 exclude: Iterable[str] = (), progress: Progress | None = None) -> Written:
    """Local tar pipe from `src/<name>` into `dst` (see copy_members)."""
    src = Path(src).resolve()
    return copy_members(members_of(src, names), dst, exclude, progress, what=str(src))


def copy_members(members: Iterable[Member], dst: str | os.PathLike[str], exclude: Iterable[str] = (),
                 progress: Progress | None = None, what: str = "files") -> Written:
    """Local tar pipe of `members` into `dst` (symlinks kept, basename globs excluded), extracted
    with the same checks as a download; `progress` gets its bytes. A member that would land on
    itself is left alone; one that would land inside itself is refused. Returns what the
    extraction wrote (see extract_tar)."""
    dst = Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    members = _not_onto_themselves(list(members), dst)
    if not members:
        return {}
    exclude = list(exclude)
    meter = Meter(progress, members_size(members, exclude)) if progress is not None else None
    r, w = os.pipe()
    written: Written = {}

    def produce() -> None:
        with open(w, "wb", buffering=0) as out:
            write_tar(out.write, members, exclude)

    producing = in_daemon("tar-pipe", produce)
    try:
        with open(r, "rb", buffering=0) as inp:
            extract_tar(meter.reader(inp.read) if meter else inp.read, dst, written)
            while inp.read(BUF):
                pass
    finally:
        failure = producing.exception()  # waits: the writer ends once the pipe is read or closed
    if failure is not None and not isinstance(failure, BrokenPipeError):
        raise OverbrainerError(f"copying {what} to {dst} failed: {failure}") from failure
    if meter is not None:
        meter.finish()
    return written


def _not_onto_themselves(members: list[Member], dst: Path) -> list[Member]:
    """The members whose copy in `dst` would not be the member itself (a local target shares
    the run directory); OverbrainerError when one would land inside itself."""
    out = []
    for top, arc in members:
        here, there = _located(top), _located(dst / arc)
        if here == there:
            continue
        if top.is_dir() and not top.is_symlink() and _inside(str(there), str(here)):
            raise OverbrainerError(f"refusing to copy {top} into itself ({dst / arc})")
        out.append((top, arc))
    return out


def _located(path: Path) -> Path:
    """`path` with its folders' symlinks resolved, not its own name's."""
    return Path(os.path.realpath(path.parent), path.name)


# --- Manifests and verify.

# What an extraction wrote: {relative path: (sha256 of the bytes written, stat key of the file
# after writing)}. verify trusts a hash only while the file's stat key is unchanged.
Written = dict[str, tuple[str, tuple[int, ...]]]


class VerifyError(OverbrainerError):
    """Downloaded files do not match the target's SHA-256 manifest."""


def check_entries(entries: Iterable[str]) -> list[str]:
    """Relative paths without `..`, used for download/manifest entry lists."""
    out = []
    for e in entries:
        parts = e.strip("/").split("/")
        if not e or e.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise OverbrainerError(f"invalid entry {e!r}: a relative path without `..` is required")
        out.append("/".join(parts))
    return out


def stat_key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def excluded(name: str, exclude: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in exclude)


def sha256_file(path: str | os.PathLike[str]) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def local_files(root: str | os.PathLike[str], entries: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
    """Relative paths of the regular files under `entries` (like `find -prune … -type f`)."""
    root = Path(root)
    exclude = list(exclude)
    out: list[str] = []
    for entry in check_entries(entries):
        top = root / entry
        if excluded(top.name, exclude) or not os.path.lexists(top):
            continue
        if top.is_symlink():
            continue
        if top.is_file():
            out.append(entry)
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if not excluded(d, exclude)]
            rel = os.path.relpath(dirpath, root)
            for n in filenames:
                p = os.path.join(dirpath, n)
                if not excluded(n, exclude) and os.path.isfile(p) and not os.path.islink(p):
                    out.append(f"{rel}/{n}")
    return sorted(out)


def local_manifest(root: str | os.PathLike[str], entries: Iterable[str], exclude: Iterable[str] = (),
                   written: Written | None = None) -> list[tuple[str, str]]:
    """Sorted [(path, sha256)] of the regular files under `entries`; a file an extraction
    recorded in `written` and unchanged since (same stat key) is not read again."""
    return [(p, _known_sha(Path(root, p), p, written)) for p in local_files(root, entries, exclude)]


def _known_sha(path: Path, rel: str, written: Written | None) -> str:
    if written and rel in written:
        sha, key = written[rel]
        try:
            if stat_key(os.lstat(path)) == key:
                return sha
        except OSError:
            pass
    return sha256_file(path)


def parse_manifest(data: bytes) -> list[tuple[str, str]]:
    """NUL-terminated `<64 hex>  ./path` (or ` *./path`) records → sorted [(path, sha)]."""
    out = []
    for rec in data.split(b"\0"):
        if not rec:
            continue
        text = rec.decode("utf-8", "surrogateescape")
        sha, path = text[:64], text[66:]
        if len(sha) != 64 or text[64:66] not in ("  ", " *") or any(c not in "0123456789abcdef" for c in sha):
            raise OverbrainerError("the target's manifest has an unexpected record")
        if path.startswith("./"):
            path = path[2:]
        out.append((path, sha))
    return sorted(out)


def verify(local_dir: str | os.PathLike[str], manifest: list[tuple[str, str]], entries: Iterable[str],
           exclude: Iterable[str] = (), written: Written | None = None) -> None:
    """Every file under `entries` locally must match `manifest` exactly (VerifyError otherwise).
    `written`: the hashes a download took as it wrote the files (see local_manifest)."""
    entries = list(entries)
    want = dict(manifest)
    have = dict(local_manifest(local_dir, entries, exclude, written))
    problems = []
    for path in sorted(set(want) | set(have)):
        if path not in have:
            problems.append(f'"{path}" is missing locally')
        elif path not in want:
            problems.append(f'"{path}" is not on the target')
        elif have[path] != want[path]:
            problems.append(f'"{path}" differs from the target (SHA-256 mismatch)')
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise VerifyError(f"verify failed: {problems[0]}{more}")
