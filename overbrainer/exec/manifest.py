"""SHA-256 manifests of files on this machine, and verify: do downloaded files match the target's?

A manifest is a sorted list of (relative path, sha256) of the regular files under some entries
(like `find -prune … -type f`), with basename globs excluded. An extraction (exec.transfer)
records what it wrote in a `Written` map, so verify need not read those files again while their
stat key is unchanged.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from pathlib import Path
from typing import Iterable

from overbrainer.errors import OverbrainerError

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


def sha256_file(path: str | os.PathLike) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def local_files(root: str | os.PathLike, entries: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
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


def local_manifest(root: str | os.PathLike, entries: Iterable[str], exclude: Iterable[str] = (),
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


def verify(local_dir: str | os.PathLike, manifest: list[tuple[str, str]], entries: Iterable[str],
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
