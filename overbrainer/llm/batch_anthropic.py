"""Anthropic's Message Batches (protocol `anthropic`): `POST /messages/batches` with
`requests = [{custom_id, params}]`, polled until `processing_status` is `ended`, its results
read as JSONL from `/messages/batches/{id}/results`.

A batch carries no metadata: after a crash it is looked for in the list (`GET /messages/batches`)
among those created since the journal's time, not held by another submission, with as many
requests; of those, only the one whose results carry the submission's custom_ids (each starts
with the submission's own tag: batch_types.tag_of) is adopted, so a batch can be adopted only
once it has ended (docs/batch.md#what-a-crash-at-each-point-leaves)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from overbrainer.llm.batch_types import (
    ANTHROPIC,
    LIMITS,
    BatchStatus,
    Outcome,
    Results,
    answered,
    created,
    first_custom_id,
)
from overbrainer.llm.errors import invalid

PATH = "/messages/batches"
SLACK = 300.0  # seconds of clock skew allowed when looking for what a crashed command sent
PAGE = 100
COUNTS = ("processing", "succeeded", "errored", "canceled", "expired")


class Ambiguous(Exception):
    """Which batch a crashed command sent cannot be told (yet): one that may be it is still in
    progress (its results, which tell, come once it ends), or several carry its custom_ids."""


class AnthropicBatches:
    api = ANTHROPIC
    limits = LIMITS[ANTHROPIC]

    def __init__(self, client: Any) -> None:  # an llm.client.LlmClient
        self.client = client

    def encode(self, custom_id: str, body: dict) -> bytes:
        """One request of the batch, as it is sent."""
        return json.dumps({"custom_id": custom_id, "params": body}, ensure_ascii=False,
                          separators=(",", ":")).encode()

    def send(self, sub, lines: list[bytes] | None, record, taken: set[str] | frozenset[str] = frozenset()) -> None:
        """Create `sub`'s batch; `lines` None: a recovery, which only looks for what a crashed
        command sent (`find`) and records it when found."""
        if lines is None:
            found = self.find(sub, taken)
            if found is None:
                return
            status = found
        else:
            data = b'{"requests":[' + b",".join(lines) + b"]}"  # never retried blindly: AnswerLost
            status = created(self.client.call("POST", PATH, raw=(data, "application/json"), creates=True), status_of,
                             f"POST {PATH}")
        sub.batch_id, sub.status = status.batch_id, status.status
        record(sub)

    def settle(self, sub) -> BatchStatus | None:
        """Right after its create got no answer (AnswerLost): None, always. A Message Batch has no
        metadata, and the proof that one is `sub`'s (its results' custom_ids) comes only once it
        has ended: `sub` stays `submitting`, its items held, and a later look adopts the batch on
        that proof (`find`), or marks it `lost` when no candidate is left."""
        return None

    def find(self, sub, taken: set[str] | frozenset[str]) -> BatchStatus | None:
        """The batch a crashed command sent for `sub`: of the candidates (`_candidates`), the
        ended one whose results are `sub`'s (`_ours`); None when no candidate is left, which
        means the provider never got it. Ambiguous while a candidate is still in progress and
        none has proved to be it (its results are not there yet: nothing is adopted on a guess),
        or when several prove to be it."""
        fits = self._candidates(sub, taken)
        ours = [f for f in fits if f.ended and self._ours(sub, f)]
        if len(ours) > 1:
            raise Ambiguous(f"batches {', '.join(f.batch_id for f in ours)} all carry its custom_ids")
        if ours:
            return ours[0]
        running = [f.batch_id for f in fits if not f.ended]
        if running:
            raise Ambiguous(f"batch(es) {', '.join(running)} still in progress could be the one it sent; their "
                            "results tell once they end")
        return None

    def _candidates(self, sub, taken: set[str] | frozenset[str]) -> list[BatchStatus]:
        """The batches created since `sub` was recorded (less SLACK), held by no other
        submission (`taken`), with as many requests as it has."""
        fits, after = [], None
        while True:
            doc = self.client.call("GET", f"{PATH}?limit={PAGE}" + (f"&after_id={after}" if after else ""))
            data = [b for b in (doc.get("data") or []) if isinstance(b, dict)] if isinstance(doc, dict) else []
            for b in data:
                created = _time(b.get("created_at"))
                if created is None or created < sub.created_at - SLACK or b.get("id") in taken:
                    continue
                if sum(_count(b, k) for k in COUNTS) == len(sub.items):
                    fits.append(status_of(b))
            if not data or not doc.get("has_more") or (_time(data[-1].get("created_at")) or 0) < sub.created_at - SLACK:
                return fits
            after = data[-1].get("id")

    def _ours(self, sub, status: BatchStatus) -> bool:
        """Whether an ended batch's results are `sub`'s requests. A tagged submission's: its
        first result's custom_id carries the tag, which no other batch does (its first line only
        is read; the collect checks every line). One recorded before tags: its results' custom_ids
        are exactly its own (the whole file read, a line at a time)."""
        path = f"{PATH}/{status.batch_id}/results"
        if sub.tag:
            first = first_custom_id(self.client, path)
            return first is not None and sub.item_of(first) in set(sub.items)
        mine = set(sub.custom_ids) | {i for i in sub.items if i not in sub.custom_ids.values()}
        seen = set()
        with Results(self.client, [path], self._read) as results:
            for custom, _ in results.lines():
                if custom not in mine:
                    return False
                seen.add(custom)
        return seen == mine

    def status(self, sub) -> BatchStatus:
        return status_of(self.client.call("GET", f"{PATH}/{sub.batch_id}"))

    def cancel(self, sub) -> BatchStatus:
        return status_of(self.client.call("POST", f"{PATH}/{sub.batch_id}/cancel"))

    def results(self, sub, status: BatchStatus) -> Results:
        """The batch's results file, downloaded, read a line at a time (close it)."""
        return Results(self.client, [f"{PATH}/{sub.batch_id}/results"], self._read)

    def _read(self, custom: str, line: dict) -> Outcome:
        result = line.get("result")
        kind = result.get("type") if isinstance(result, dict) else None
        if kind == "succeeded":
            return answered(self.client, custom, result.get("message"))
        if kind == "errored":
            err = result.get("error")
            inner = err.get("error") if isinstance(err, dict) else None
            message = inner.get("message") if isinstance(inner, dict) else None
            return Outcome(custom, error=f"errored: {message or 'no message'}")
        return Outcome(custom, error=str(kind or "no result"))


def status_of(doc: Any) -> BatchStatus:
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        raise invalid("not a message batch object")
    status = str(doc.get("processing_status"))
    counts = {k: _count(doc, k) for k in COUNTS}
    return BatchStatus(doc["id"], status, status == "ended", counts)


def _count(doc: dict, key: str) -> int:
    counts = doc.get("request_counts")
    value = counts.get(key) if isinstance(counts, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _time(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
