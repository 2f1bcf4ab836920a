"""The benchmark files of `pipeline.decontaminate`, read one record at a time.

A file ending in `.parquet` is read with pyarrow (an optional dependency: `pip install
'overbrainer[parquet]'`), by record batches; any other file is JSONL, one JSON object a line
(blank lines skipped). The texts of a record are the string values of its configured `fields`,
or, when none are configured, every string in it (in nested lists and objects too, e.g. the
choices of a multiple-choice item). Anything wrong with a file (missing, unreadable, not
JSONL, pyarrow missing) is a ConfigError (exit 2) naming the key and the path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

from overbrainer.errors import ConfigError

from .decontam import Screen

KEY = "pipeline.decontaminate"
PARQUET_HINT = "pip install 'overbrainer[parquet]'"


def labels(benchmarks: Iterable[Any]) -> list[str]:
    """The name each benchmark is counted under: its file name, or its configured path when two
    configured files have the same name."""
    paths = [b.path for b in benchmarks]
    names = [os.path.basename(p) for p in paths]
    return [n if names.count(n) == 1 else p for n, p in zip(names, paths)]


def is_parquet(path: str) -> bool:
    return path.lower().endswith(".parquet")


def _problem(bench: Any, why: str) -> ConfigError:
    return ConfigError(f"{KEY}: {bench.path}: {why}")


def problems(root: str | os.PathLike, benchmarks: Iterable[Any]) -> list[str]:
    """One problem per benchmark that cannot be read (missing, not a readable file, a Parquet
    file without pyarrow); `config check` lists them."""
    found = []
    for bench in benchmarks:
        try:
            _readable(Path(root), bench)
        except ConfigError as e:
            found.append(e.message)
    return found


def check(root: str | os.PathLike, benchmarks: Iterable[Any]) -> None:
    """ConfigError for the first benchmark that cannot be read, before anything is read or paid for."""
    for bench in benchmarks:
        _readable(Path(root), bench)


def _readable(root: Path, bench: Any) -> None:
    path = root / bench.path
    if not path.is_file():
        raise _problem(bench, "no such file" if not path.exists() else "not a file")
    if not os.access(path, os.R_OK):
        raise _problem(bench, "not readable")
    if is_parquet(bench.path):
        _pyarrow(bench)


def _pyarrow(bench: Any) -> Any:
    try:
        # lazy: pyarrow (optional, heavy) only when a Parquet benchmark is configured
        import pyarrow.parquet as pq
    except ImportError:
        raise _problem(bench, f"reading Parquet needs pyarrow: {PARQUET_HINT}") from None
    return pq


def strings(value: Any) -> Iterator[str]:
    """Every string in `value` (a string, or nested in lists and objects), in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings(v)


def record_texts(record: Any, fields: Iterable[str]) -> Iterator[str]:
    fields = tuple(fields)
    if not fields:
        yield from strings(record)
    elif isinstance(record, dict):
        for f in fields:
            yield from strings(record.get(f))


def _jsonl(path: Path, bench: Any) -> Iterator[Any]:
    try:
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if raw.strip():
                    try:
                        yield json.loads(raw.decode("utf-8"))
                    except (UnicodeDecodeError, ValueError):
                        raise _problem(bench, f"line {lineno} is not a JSON record") from None
    except OSError as e:
        raise _problem(bench, f"cannot read it ({e.strerror})") from None


def _parquet(path: Path, bench: Any) -> Iterator[Any]:
    pq = _pyarrow(bench)
    try:
        reader = pq.ParquetFile(path)
        columns = [c for c in bench.fields if c in reader.schema_arrow.names] if bench.fields else None
        for batch in reader.iter_batches(batch_size=256, columns=columns):
            yield from batch.to_pylist()
    except OSError as e:
        raise _problem(bench, f"cannot read it ({e.strerror or e})") from None
    except Exception as e:  # noqa: BLE001 - pyarrow's own errors (ArrowInvalid: not Parquet, ...)
        raise _problem(bench, f"not a readable Parquet file ({type(e).__name__})") from None


def texts(root: Path, bench: Any) -> Iterator[str]:
    """The texts of every record of one benchmark, one record at a time."""
    path = Path(root) / bench.path
    records = _parquet(path, bench) if is_parquet(bench.path) else _jsonl(path, bench)
    for record in records:
        yield from record_texts(record, bench.fields)


def screen(root: Path, benchmarks: Iterable[Any], n: int) -> Screen:
    """A Screen with one source per benchmark, labelled as `labels` says."""
    benchmarks = list(benchmarks)
    check(root, benchmarks)
    result = Screen(n)
    for label, bench in zip(labels(benchmarks), benchmarks):
        result.add_source(label, texts(root, bench))
    return result
