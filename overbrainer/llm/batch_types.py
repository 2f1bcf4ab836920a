"""What the two batch APIs share (docs/batch.md): which providers have one, their size limits,
how a submission is split to fit them, the `custom_id` of an item, what a batch's status and
an item's outcome are, whichever API said it, and how a results file is read (downloaded to a
temporary file, then parsed a line at a time: never whole in memory).

OpenAI (dialect `openai`): the Files API (`purpose = "batch"`) and the Batch API, at most 50,000
requests and 200 MB per input file. Anthropic (protocol `anthropic`): Message Batches, at most
100,000 requests or 256 MB per batch. Both bill half the online price (llm/prices.BATCH_SHARE,
unless the database or the configuration gives a batch price).
"""

from __future__ import annotations

import io
import json
import re
import tempfile
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Iterator

import xxhash

from overbrainer.llm.dialects import ANTHROPIC_BATCH as ANTHROPIC
from overbrainer.llm.dialects import OPENAI_BATCH as OPENAI
from overbrainer.llm.dialects import batch_api as batch_api  # which providers have a batch API

__all__ = ["ANTHROPIC", "OPENAI", "batch_api"]  # re-exported beside this module's own names
from overbrainer.llm.errors import AnswerLost, LlmError, invalid
from overbrainer.llm.types import ChatResponse

@dataclass(frozen=True)
class Limits:
    requests: int
    bytes: int
    envelope: int = 0  # bytes the container adds beyond its requests (each also gets a separator)


LIMITS = {
    OPENAI: Limits(50_000, 200 * 1024 * 1024),
    ANTHROPIC: Limits(100_000, 256 * 1024 * 1024, envelope=64),
}
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z")


TAG = 10  # characters of a submission's tag


def tag_of(sub_id: str) -> str:
    """A submission's tag, the prefix of each of its custom_ids: `b` and 9 hex digits of a digest
    of its (random) id. Only the batch this submission sent carries it, so a batch of the same
    items sent by another project, another model or an earlier submission never passes for it."""
    return "b" + xxhash.xxh3_64_hexdigest(sub_id.encode("utf-8"))[:TAG - 1]


def custom_id(item_id: str, tag: str = "") -> str:
    """The item's custom_id: `<tag>-<item id>` when that fits `^[a-zA-Z0-9_-]{1,64}$` (a question
    ID, 32 hex digits, always does), else `<tag>-x<a stable digest of the ID>` (the journal keeps
    the mapping). Without a tag (a submission recorded before tags): the ID itself, or `x<digest>`."""
    prefix = f"{tag}-" if tag else ""
    if CUSTOM_ID.match(prefix + item_id):
        return prefix + item_id
    return prefix + "x" + xxhash.xxh3_128_hexdigest(item_id.encode("utf-8"))


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
    queue_full: bool = False  # OpenAI's `token_limit_exceeded`: the model's batch queue was full
    queue_limit: int | None = None  # the queue's limit (enqueued input tokens) its message states


@dataclass
class Outcome:
    """One request's result: its answer (parsed by the online parser), or why it has none
    (`error`: an errored request, or one the batch never ran: expired or cancelled)."""

    custom_id: str
    response: ChatResponse | None = None
    error: str | None = None


def result_lines(lines: Iterable[bytes]) -> Iterator[tuple[str, dict]]:
    """(custom_id, line) of each line of a results file (JSONL), read one line at a time from
    `lines` (an open file, any iterator of lines); a line that is not a JSON object with a
    string custom_id is invalid (LlmError)."""
    for text in lines:
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            raise invalid("a batch result line that is not JSON") from None
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            raise invalid("a batch result line without custom_id")
        yield line["custom_id"], line


def created(doc: Any, read: Callable[[Any], "BatchStatus"], what: str) -> "BatchStatus":
    """The batch a create's 2xx answer describes; AnswerLost when it cannot be read (the batch
    exists, but which it is the answer does not say: it is settled as a lost answer is)."""
    try:
        return read(doc)
    except LlmError as e:
        raise AnswerLost(what, e) from e


def answered(client, custom: str, doc: Any) -> Outcome:
    """A request's answer, read by the online parser (an answer it refuses is an error)."""
    try:
        return Outcome(custom, client.parse_chat(doc))
    except LlmError as e:
        return Outcome(custom, error=str(e))


def download(client, path: str) -> IO[bytes]:
    """A results file (`GET path`) in a temporary file (deleted once closed), at its start: the
    body goes to disk as it arrives (a retry starts it again), so memory stays flat whatever
    its size (up to llm/http.FILE_CAP)."""
    f = tempfile.TemporaryFile()
    try:
        client.call("GET", path, into=f)
        f.seek(0)
    except BaseException:
        f.close()
        raise
    return f


class Results:
    """A batch's results files, downloaded (`download`) and read as often as needed, one line
    at a time: `lines()` every (custom_id, line), `outcomes()` each read by `read`. Close it
    (or use it in a `with`) to delete the files."""

    def __init__(self, client, paths: list[str], read: Callable[[str, dict], Outcome]):
        self.files: list[IO[bytes]] = []
        self.read = read
        try:
            for path in paths:
                self.files.append(download(client, path))
        except BaseException:
            self.close()
            raise

    def lines(self) -> Iterator[tuple[str, dict]]:
        for f in self.files:
            f.seek(0)
            yield from result_lines(f)

    def outcomes(self) -> Iterator[Outcome]:
        for custom, line in self.lines():
            yield self.read(custom, line)

    def close(self) -> None:
        for f in self.files:
            f.close()

    def __enter__(self) -> "Results":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Enough(Exception):
    """A reader that has what it needs ends a download (FirstLine)."""


class FirstLine(io.BytesIO):
    """A download's sink that keeps its first line only, then ends the download (Enough)."""

    def write(self, chunk) -> int:  # type: ignore[override]
        n = super().write(chunk)
        if b"\n" in chunk and b"\n" in self.getvalue().lstrip():
            raise Enough()
        return n


def first_custom_id(client, path: str) -> str | None:
    """The custom_id of a results file's first line (None: an empty file), without downloading
    the rest of it."""
    sink = FirstLine()
    try:
        client.call("GET", path, into=sink)
    except Enough:
        pass
    head = sink.getvalue().lstrip().split(b"\n", 1)[0]
    return next((custom for custom, _ in result_lines([head])), None)
