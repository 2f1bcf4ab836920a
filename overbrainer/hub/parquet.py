"""The train/eval split as Parquet for `push --dataset`: one file per split, written from the
streaming reader (dataset/jsonl.iter_records) in row groups of at most `ROWS` examples or `CHARS`
characters of text, so memory holds one row group whatever the split's size.

Columns: the example's own fields in their on-disk order, `id`, `topic`, `subtopic`, `messages`
(a list of {role, content, reasoning_content}; null where the JSONL line has no reasoning) and
`meta` ({model, input_tokens, output_tokens, finish_reason, reasoning_kind, excluded}). pyarrow
is imported only here (the `parquet` extra); the file is written beside its place and renamed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overbrainer.dataset.jsonl import iter_records
from overbrainer.dataset.records import Example
from overbrainer.errors import ConfigError

ROWS = 1000
CHARS = 32 << 20
PARQUET_HINT = "pip install 'overbrainer[parquet]'"


@dataclass
class SplitFile:
    """What one written split holds."""

    rows: int = 0
    size: int = 0  # bytes of the Parquet file
    topics: dict[str, int] = field(default_factory=dict)  # topic -> examples
    reasoning: bool = False  # some assistant turn carries reasoning_content


def pyarrow() -> tuple[Any, Any]:
    """(pyarrow, pyarrow.parquet); a ConfigError (exit 2) with the install line when missing."""
    try:
        # lazy: pyarrow (optional, heavy) only when `push --dataset` writes the Parquet files
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(f"push --dataset writes Parquet and needs pyarrow: {PARQUET_HINT}") from None
    return pa, pq


def schema(pa: Any) -> Any:
    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("reasoning_content", pa.string())])
    meta = pa.struct([("model", pa.string()), ("input_tokens", pa.int64()), ("output_tokens", pa.int64()),
                      ("finish_reason", pa.string()), ("reasoning_kind", pa.string()), ("excluded", pa.string())])
    return pa.schema([("id", pa.string()), ("topic", pa.string()), ("subtopic", pa.string()),
                      ("messages", pa.list_(message)), ("meta", meta)])


def write_split(source: Path, dest: Path, *, rows: int = ROWS, chars: int = CHARS) -> SplitFile:
    """`source` (train.jsonl or eval.jsonl) as the Parquet file `dest`, one row group per `rows`
    examples or `chars` characters of messages, whichever comes first."""
    pa, pq = pyarrow()
    sch = schema(pa)
    out = SplitFile()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    batch: list[dict] = []
    size = 0
    with pq.ParquetWriter(str(tmp), sch, compression="snappy") as writer:
        for ex in iter_records(source, Example):
            batch.append(ex.to_dict())
            out.rows += 1
            out.topics[ex.topic] = out.topics.get(ex.topic, 0) + 1
            for m in ex.messages:
                size += len(m.content) + len(m.reasoning_content or "")
                out.reasoning = out.reasoning or bool(m.reasoning_content)
            if len(batch) >= rows or size >= chars:
                writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=sch))
                batch, size = [], 0
        if batch or out.rows == 0:
            writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=sch))
    os.replace(tmp, dest)
    out.size = dest.stat().st_size
    return out
