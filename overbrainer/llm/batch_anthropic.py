"""Anthropic's Message Batches (protocol `anthropic`): `POST /messages/batches` with
`requests = [{custom_id, params}]`, polled until `processing_status` is `ended`, its results
read as JSONL from `/messages/batches/{id}/results`.

A batch carries no metadata: after a crash it is found in the list (`GET /messages/batches`)
among those created since the journal's time, with as many requests as the submission; it is
adopted only when exactly one fits, and its results' custom_ids are checked (docs/batch.md)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Iterator

from overbrainer.llm.batch_types import ANTHROPIC, LIMITS, BatchStatus, Outcome, answered, result_lines
from overbrainer.llm.errors import invalid

PATH = "/messages/batches"
SLACK = 300.0  # seconds of clock skew allowed when looking for what a crashed command sent
PAGE = 100
COUNTS = ("processing", "succeeded", "errored", "canceled", "expired")


class Ambiguous(Exception):
    """More than one batch fits a submission a crashed command may have sent."""


class AnthropicBatches:
    api = ANTHROPIC
    limits = LIMITS[ANTHROPIC]

    def __init__(self, client):
        self.client = client

    def encode(self, custom_id: str, body: dict) -> bytes:
        """One request of the batch, as it is sent."""
        return json.dumps({"custom_id": custom_id, "params": body}, ensure_ascii=False,
                          separators=(",", ":")).encode()

    def send(self, sub, lines: list[bytes] | None, record, taken: set[str] | frozenset[str] = frozenset()) -> None:
        """Create `sub`'s batch; `lines` None: a recovery, which only looks for what a crashed
        command sent (one batch created since then with as many requests, not `taken` by another
        submission), and records it; Ambiguous when several fit."""
        if lines is None:
            found = self.find(sub, taken)
            if found is None:
                return
            status = found
        else:
            data = b'{"requests":[' + b",".join(lines) + b"]}"
            status = status_of(self.client.call("POST", PATH, raw=(data, "application/json")))
        sub.batch_id, sub.status = status.batch_id, status.status
        record(sub)

    def find(self, sub, taken: set[str] | frozenset[str]) -> BatchStatus | None:
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
                break
            after = data[-1].get("id")
        if len(fits) > 1:
            fits = [f for f in fits if not f.ended or self._ours(sub, f)]
        if len(fits) > 1:
            raise Ambiguous(", ".join(f.batch_id for f in fits))
        return fits[0] if fits else None

    def _ours(self, sub, status: BatchStatus) -> bool:
        """Whether an ended batch's results are those of `sub`'s requests (its custom_ids)."""
        mine = {c for c in sub.custom_ids} | {i for i in sub.items if i not in sub.custom_ids.values()}
        raw = self.client.call("GET", f"{PATH}/{status.batch_id}/results", decode=False)
        return {custom for custom, _ in result_lines(raw)} == mine

    def status(self, sub) -> BatchStatus:
        return status_of(self.client.call("GET", f"{PATH}/{sub.batch_id}"))

    def cancel(self, sub) -> BatchStatus:
        return status_of(self.client.call("POST", f"{PATH}/{sub.batch_id}/cancel"))

    def outcomes(self, sub, status: BatchStatus) -> Iterator[Outcome]:
        raw = self.client.call("GET", f"{PATH}/{sub.batch_id}/results", decode=False)
        for custom, line in result_lines(raw):
            yield self._outcome(custom, line.get("result"))

    def _outcome(self, custom: str, result: Any) -> Outcome:
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
