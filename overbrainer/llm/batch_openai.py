"""OpenAI's Batch API (dialect `openai`): the requests go up as one JSONL file (Files API,
`purpose = "batch"`, its filename carrying the submission id), the batch is created on it with
`endpoint = "/v1/chat/completions"`, `completion_window = "24h"` and `metadata =
{"overbrainer_submission": <id>}`, then polled; its output and error files hold the answers.

After a crash the file is found by its filename (`GET /files?purpose=batch`) and the batch by its
metadata (`GET /batches`), so neither is sent twice (docs/batch.md)."""

from __future__ import annotations

import json
import re
import secrets
from typing import Any, Iterator

from overbrainer.llm.batch_types import LIMITS, OPENAI, BatchStatus, Outcome, Results, answered, created
from overbrainer.llm.errors import invalid

ENDPOINT = "/v1/chat/completions"
WINDOW = "24h"
META_KEY = "overbrainer_submission"
ENDED = ("completed", "failed", "expired", "cancelled")
SLACK = 300.0  # seconds of clock skew allowed when looking for what a crashed command sent
PAGE = 100
# A batch refused because the model's batch queue is full (the input tokens of its batches in
# progress): `Enqueued token limit reached for <model> in organization <org>. Limit: 90,000
# enqueued tokens. Please try submitting your batch again later.`
QUEUE_FULL = "token_limit_exceeded"
_QUEUE_LIMIT = re.compile(r"Limit:\s*([\d,]+)\s+enqueued tokens", re.I)


def filename(sub_id: str) -> str:
    return f"overbrainer-{sub_id}.jsonl"


class OpenAIBatches:
    api = OPENAI
    limits = LIMITS[OPENAI]

    def __init__(self, client: Any) -> None:  # an llm.client.LlmClient
        self.client = client  # llm/client.LlmClient of the stage's role

    def encode(self, custom_id: str, body: dict) -> bytes:
        """One line of the input file (without its newline)."""
        line = {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}
        return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode()

    # --- sending --------------------------------------------------------------------------

    def upload(self, sub_id: str, lines: list[bytes]) -> str:
        """The input file's id once uploaded (multipart: `purpose`, `file`)."""
        boundary = "overbrainer-" + secrets.token_hex(12)
        head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename(sub_id)}\"\r\n"
                "Content-Type: application/jsonl\r\n\r\n").encode()
        data = head + b"\n".join(lines) + b"\n" + f"\r\n--{boundary}--\r\n".encode()
        doc = self.client.call("POST", "/files", raw=(data, f"multipart/form-data; boundary={boundary}"))
        return _id(doc)

    def create(self, sub_id: str, file_id: str) -> BatchStatus:
        """`POST /batches`: never retried blindly (AnswerLost when it may have been applied:
        `find_batch` settles it by its metadata)."""
        body = {"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": WINDOW,
                "metadata": {META_KEY: sub_id}}
        return created(self.client.call("POST", "/batches", body=body, creates=True), status_of, "POST /batches")

    def send(self, sub, lines: list[bytes] | None, record) -> None:
        """Upload and create what `sub` lacks (looking first for what an earlier command sent,
        when `lines` is None: a recovery); `record(sub)` after each id arrives."""
        if sub.file_id is None:
            sub.file_id = self.find_file(sub) if lines is None else None
            if sub.file_id is None:
                if lines is None:
                    return  # never uploaded: nothing was sent
                sub.file_id = self.upload(sub.id, lines)
            record(sub)
        found = self.find_batch(sub) if lines is None else None
        status = found or self.create(sub.id, sub.file_id)
        sub.batch_id, sub.status = status.batch_id, status.status
        record(sub)

    def settle(self, sub) -> BatchStatus | None:
        """Right after its create got no answer (AnswerLost): the batch, when the provider has
        it, found by its metadata as after a crash; None when it is not listed (yet): `sub` stays
        `submitting` and the next look settles it (`send(sub, None, …)`)."""
        return self.find_batch(sub)

    # --- finding what a crashed command sent ------------------------------------------------

    def find_file(self, sub) -> str | None:
        name, after = filename(sub.id), None
        while True:
            query = f"/files?purpose=batch&limit={PAGE}&order=desc" + (f"&after={after}" if after else "")
            doc = self.client.call("GET", query)
            data = doc.get("data") if isinstance(doc, dict) else None
            for f in data or []:
                if isinstance(f, dict) and f.get("filename") == name:
                    return _id(f)
            if not data or not doc.get("has_more") or _older(data[-1], sub.created_at):
                return None
            after = data[-1].get("id")

    def find_batch(self, sub) -> BatchStatus | None:
        for doc in self._batches(sub.created_at):
            metadata = doc.get("metadata")
            if isinstance(metadata, dict) and metadata.get(META_KEY) == sub.id:
                return status_of(doc)
        return None

    def _batches(self, since: float) -> Iterator[dict]:
        after = None
        while True:
            doc = self.client.call("GET", f"/batches?limit={PAGE}" + (f"&after={after}" if after else ""))
            data = doc.get("data") if isinstance(doc, dict) else None
            yield from (b for b in data or [] if isinstance(b, dict))
            if not data or not doc.get("has_more") or _older(data[-1], since):
                return
            after = data[-1].get("id")

    # --- polling, results, cancel -------------------------------------------------------------

    def status(self, sub) -> BatchStatus:
        return status_of(self.client.call("GET", f"/batches/{sub.batch_id}"))

    def cancel(self, sub) -> BatchStatus:
        return status_of(self.client.call("POST", f"/batches/{sub.batch_id}/cancel"))

    def results(self, sub, status: BatchStatus) -> Results:
        """The batch's output and error files, downloaded, read a line at a time (close it)."""
        paths = [f"/files/{f}/content" for f in (status.output_file_id, status.error_file_id) if f is not None]
        return Results(self.client, paths, self._read)

    def _read(self, custom: str, line: dict) -> Outcome:
        response, error = line.get("response"), line.get("error")
        if isinstance(response, dict) and response.get("status_code") == 200:
            return answered(self.client, custom, response.get("body"))
        if isinstance(response, dict):
            return Outcome(custom, error=f"HTTP {response.get('status_code')}: {_message(response.get('body'))}")
        return Outcome(custom, error=_message({"error": error}))


def status_of(doc: Any) -> BatchStatus:
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        raise invalid("not a batch object")
    status = str(doc.get("status"))
    found = doc.get("request_counts")
    counts: dict = found if isinstance(found, dict) else {}
    errors = doc.get("errors").get("data") if isinstance(doc.get("errors"), dict) else None
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else None
    reason = str(first.get("message") or first.get("code")) if first else None
    full = first is not None and first.get("code") == QUEUE_FULL
    stated = _QUEUE_LIMIT.search(str(first.get("message") or "")) if full and first is not None else None
    return BatchStatus(doc["id"], status, status in ENDED, counts, doc.get("output_file_id"), doc.get("error_file_id"),
                       reason, full, int(stated.group(1).replace(",", "")) if stated else None)


def _id(doc: Any) -> str:
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        raise invalid("no id in the answer")
    return doc["id"]


def _older(doc: Any, since: float) -> bool:
    created = doc.get("created_at") if isinstance(doc, dict) else None
    return isinstance(created, (int, float)) and created < since - SLACK


def _message(body: Any) -> str:
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        return str(err.get("message") or err.get("code") or "error")
    return str(err or body or "no answer")
