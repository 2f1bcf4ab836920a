"""What the two batch APIs share (docs/batch.md): which providers have one, their size limits,
how a submission is split to fit them, the `custom_id` of an item, and what a batch's status and
an item's outcome are, whichever API said it.

OpenAI (dialect `openai`): the Files API (`purpose = "batch"`) and the Batch API, at most 50,000
requests and 200 MB per input file. Anthropic (protocol `anthropic`): Message Batches, at most
100,000 requests or 256 MB per batch. Both bill half the online price.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

import xxhash

from overbrainer.llm.dialects import ANTHROPIC_BATCH as ANTHROPIC
from overbrainer.llm.dialects import OPENAI_BATCH as OPENAI
from overbrainer.llm.dialects import batch_api as batch_api  # which providers have a batch API

__all__ = ["ANTHROPIC", "OPENAI", "batch_api"]  # re-exported beside this module's own names
from overbrainer.llm.errors import LlmError, invalid
from overbrainer.llm.types import ChatResponse

DISCOUNT = 0.5  # a batch request costs this share of the listed (online) price


@dataclass(frozen=True)
class Limits:
    requests: int
    bytes: int
    envelope: int = 0  # bytes the container adds beyond its requests (each also gets a separator)


LIMITS = {
    OPENAI: Limits(50_000, 200 * 1024 * 1024),
    ANTHROPIC: Limits(100_000, 256 * 1024 * 1024, envelope=64),
}
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def custom_id(item_id: str) -> str:
    """The item's custom_id: its ID when it fits `^[a-zA-Z0-9_-]{1,64}$` (a question ID always
    does), else a stable digest of it (the journal keeps the mapping)."""
    if CUSTOM_ID.match(item_id):
        return item_id
    return "x" + xxhash.xxh3_128_hexdigest(item_id.encode("utf-8"))


def split(sizes: list[int], limits: Limits) -> list[tuple[int, int]]:
    """Consecutive (start, end) ranges of requests whose encoded `sizes` (bytes each) fit one
    file or batch: at most `limits.requests` requests and `limits.bytes` bytes (a separator a
    request, plus the envelope). A request larger than the limit alone is a range of its own
    (the provider refuses it: that item fails)."""
    out: list[tuple[int, int]] = []
    start, used = 0, limits.envelope
    for i, size in enumerate(sizes):
        grown = used + size + 1
        if i > start and (i - start >= limits.requests or grown > limits.bytes):
            out.append((start, i))
            start, grown = i, limits.envelope + size + 1
        used = grown
    if start < len(sizes):
        out.append((start, len(sizes)))
    return out


@dataclass
class BatchStatus:
    """A batch as the provider shows it: `ended` once no request will run any more (completed,
    failed, expired, cancelled; Anthropic's `ended`); `status` in the provider's words."""

    batch_id: str
    status: str
    ended: bool
    counts: dict = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    reason: str | None = None  # why a batch failed as a whole (OpenAI's validation errors)


@dataclass
class Outcome:
    """One request's result: its answer (parsed by the online parser), or why it has none
    (`error`: an errored request, or one the batch never ran: expired or cancelled)."""

    custom_id: str
    response: ChatResponse | None = None
    error: str | None = None


def result_lines(raw: bytes) -> Iterator[tuple[str, dict]]:
    """(custom_id, line) of each line of a results file (JSONL); a line without one is invalid."""
    for text in raw.splitlines():
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            raise invalid("a batch result line that is not JSON") from None
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            raise invalid("a batch result line without custom_id")
        yield line["custom_id"], line


def answered(client, custom: str, doc: Any) -> Outcome:
    """A request's answer, read by the online parser (an answer it refuses is an error)."""
    try:
        return Outcome(custom, client.parse_chat(doc))
    except LlmError as e:
        return Outcome(custom, error=str(e))
