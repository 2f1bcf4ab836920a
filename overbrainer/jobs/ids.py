"""Run IDs: `<slug>_<YYYYMMDD-HHMMSS>` (UTC), `_2`…`_99` on collision; legacy IDs still load. A side
job's ID is `<kind>_<YYYYMMDD-HHMMSS>` the same way.

Every ID is validated before it touches a path: only ASCII letters, digits, `-` and `_`.
"""

from __future__ import annotations

import datetime as _dt
import errno
import os
import re
from pathlib import Path
from typing import Callable, Iterator

from overbrainer.errors import OverbrainerError

MAX_SUFFIX = 99
SLUG_MAX = 40
_VALID = re.compile(r"[A-Za-z0-9_-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def slug(project_name: str) -> str:
    """Project name lowercased, runs of non-alphanumerics become one `_`, cut to 40, else `run`."""
    lowered = "".join(c.lower() if c.isascii() else "_" for c in project_name)
    text = re.sub(r"[^a-z0-9]+", "_", lowered)
    text = text.strip("_")[:SLUG_MAX].strip("_")
    return text or "run"


def timestamp(now: _dt.datetime | None = None) -> str:
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return now.astimezone(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")


def base_id(project_name: str, now: _dt.datetime | None = None) -> str:
    return f"{slug(project_name)}_{timestamp(now)}"


def side_id(kind: str, now: _dt.datetime | None = None) -> str:
    """The ID of a run's side job of kind `kind` (`export_…`, `compare_…`)."""
    return f"{validate(kind)}_{timestamp(now)}"


def candidates(base: str) -> Iterator[str]:
    """`base`, `base_2` … `base_99`."""
    yield base
    for n in range(2, MAX_SUFFIX + 1):
        yield f"{base}_{n}"


def is_valid(run_id: str) -> bool:
    return isinstance(run_id, str) and bool(_VALID.fullmatch(run_id))


def validate(run_id: str) -> str:
    """The ID itself, or OverbrainerError `<id> is not a valid run ID`."""
    if not is_valid(run_id):
        shown = _CONTROL.sub("?", str(run_id))[:80]
        raise OverbrainerError(f"{shown or '(empty)'} is not a valid run ID")
    return run_id


def claim_new(
    runs_dir: Path,
    base: str,
    claim: Callable[[str], bool] | None = None,
) -> tuple[str, Path]:
    """Create `runs/<id>` with an exclusive mkdir, trying `base`, `base_2` … `base_99`.

    `claim(run_id) -> bool` then claims the directory on the target; when it is taken, the local
    directory is released (rmdir, only if empty) and the next suffix is tried.
    """
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    for run_id in candidates(validate(base)):
        path = runs_dir / run_id
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        except OSError as e:
            raise OverbrainerError(f"cannot create {path}: {e.strerror}") from e
        if claim is None:
            return run_id, path
        try:
            taken = not claim(run_id)
        except BaseException:
            _release(path)
            raise
        if not taken:
            return run_id, path
        _release(path)
    raise OverbrainerError(
        f"cannot create a run directory in {runs_dir}: runs {base} to {base}_{MAX_SUFFIX} all exist"
    )


def _release(path: Path) -> None:
    try:
        os.rmdir(path)
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
            raise
