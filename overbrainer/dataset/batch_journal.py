"""The journal of batch submissions (docs/batch.md#the-journal): `.overbrainer/batches/<id>.json`,
one small JSON file a submission, each rewritten atomically (support/atomic.py).

A submission is written `submitting` BEFORE anything is sent (its items, the time, the cost
reserved), then gets the provider's file id and batch id as each arrives (`submitted` once the
batch exists), then `collected` once its results are in answers.jsonl (`unresolved`: its items
that came back without an answer, with why in `errors`). What a crash at each point leaves, and
how the next command finds the batch instead of sending it again: docs/batch.md.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from overbrainer.support.atomic import atomic_write_text

log = logging.getLogger(__name__)

SUBMITTING = "submitting"  # recorded, maybe sent: the provider may or may not have it
SUBMITTED = "submitted"  # the provider has the batch (`batch_id`)
COLLECTED = "collected"  # its results are in the data files
LOST = "lost"  # the batch is gone on the provider, or could not be told apart from another
OPEN = (SUBMITTING, SUBMITTED)
STATES = (SUBMITTING, SUBMITTED, COLLECTED, LOST)


@dataclass
class Submission:
    id: str
    stage: str
    api: str  # llm/batch_types: openai | anthropic
    provider: str
    model: str
    created_at: float  # unix time, taken before the send
    items: list[str]
    state: str = SUBMITTING
    round: int = 0  # 1: a resubmission of items that came back without an answer
    custom_ids: dict[str, str] = field(default_factory=dict)  # custom_id -> item id, where not `<tag>-<id>`
    tag: str = ""  # each custom_id's prefix (llm/batch_types.tag_of); "": recorded before tags
    reserved_usd: float | None = None  # the submission's upper bound at the batch price
    file_id: str | None = None  # OpenAI: the uploaded input file
    batch_id: str | None = None
    status: str | None = None  # the provider's last word on the batch
    cancel_requested: bool = False  # `batches cancel`: its unanswered items are not a failure
    unresolved: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # item id -> why it has no answer
    cost: float | None = None  # what its collected answers cost, at the batch price
    input_tokens: int | None = None  # its requests' input tokens, estimated: what it holds of the batch queue
    queue_full: bool = False  # the provider refused it whole: the model's batch queue was full (not a failure)

    @property
    def open(self) -> bool:
        return self.state in OPEN

    def item_of(self, custom: str) -> str | None:
        """The item a result's custom_id stands for; None when this submission never sent it (a
        tagged submission's custom_ids all start with `<tag>-`)."""
        mapped = self.custom_ids.get(custom)
        if mapped is not None:
            return mapped
        if not self.tag:
            return custom
        prefix = self.tag + "-"
        return custom[len(prefix):] if custom.startswith(prefix) else None

    def since(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created_at))


def new_id(now: float | None = None) -> str:
    """A local submission id: its UTC time and 6 random hex digits, `s20261204T183000-1a2b3c`."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"s{stamp}-{secrets.token_hex(3)}"


class Journal:
    """The submissions of one project (`folder`: ProjectPaths.batches)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def write(self, sub: Submission) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.folder / f"{sub.id}.json", json.dumps(asdict(sub), separators=(",", ":")) + "\n")

    def all(self, stage: str | None = None) -> list[Submission]:
        """Every submission (of `stage`), oldest first; an unreadable file is skipped with a warning."""
        if not self.folder.is_dir():
            return []
        out = []
        for path in sorted(self.folder.glob("s*.json")):
            try:
                doc = json.loads(path.read_text())
                known = {f.name for f in fields(Submission)}  # a newer version's extra fields are kept out
                out.append(Submission(**{k: v for k, v in doc.items() if k in known}))
            except (OSError, ValueError, TypeError) as e:
                log.warning("batch journal: cannot read %s (%s); skipped", path, e)
        out.sort(key=lambda s: (s.created_at, s.id))
        return [s for s in out if stage is None or s.stage == stage]

    def get(self, sub_id: str) -> Submission | None:
        return next((s for s in self.all() if s.id == sub_id), None)


def in_flight(subs: list[Submission]) -> set[str]:
    """Items of the open submissions: never submitted again while they are open."""
    return {i for s in subs if s.open for i in s.items}


def failures(subs: list[Submission]) -> Counter:
    """How many times each item came back without an answer (a cancel asked for by
    `batches cancel`, or a batch refused whole because the queue was full, does not count)."""
    count: Counter = Counter()
    for s in subs:
        if s.state == COLLECTED and not s.cancel_requested and not s.queue_full:
            count.update(s.unresolved)
    return count
