"""`batches ls` and `batches cancel` (docs/batch.md#commands): the journal of submissions, each
open one with what its provider says of it now; a cancel asks the provider and records it (the
items that come back without an answer are then sent again by the next run, not counted as a
failure)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from overbrainer.dataset.batch_journal import LOST, SUBMITTING, Journal, Submission
from overbrainer.errors import UsageError
from overbrainer.llm.errors import LlmError
from overbrainer.pipeline.answers_batch import batches_for
from overbrainer.pipeline.context import StageContext

if TYPE_CHECKING:
    from overbrainer.front.session import Session


def _line(sub: Submission) -> str:
    where = sub.batch_id or "no batch yet"
    extra = f", {len(sub.unresolved)} without an answer" if sub.unresolved else ""
    cost = f", cost ${sub.cost:.4f}" if sub.cost else ""
    cancel = ", cancel requested" if sub.cancel_requested else ""
    return (f"{sub.id}  {sub.stage}  {sub.state:<10}  {sub.status or '-'}  {len(sub.items)} request(s)  "
            f"{sub.provider}/{sub.model}  {where}  since {sub.since()}{extra}{cost}{cancel}")


def _data(sub: Submission) -> dict[str, Any]:
    return {"id": sub.id, "stage": sub.stage, "state": sub.state, "status": sub.status, "api": sub.api,
            "provider": sub.provider, "model": sub.model, "batch_id": sub.batch_id, "file_id": sub.file_id,
            "requests": len(sub.items), "since": sub.since(), "round": sub.round, "unresolved": len(sub.unresolved),
            "reserved_usd": sub.reserved_usd, "cost": sub.cost, "cancel_requested": sub.cancel_requested}


def ls_flow(session: "Session") -> None:
    """Every submission, oldest first; the open ones' status asked of the provider (shown only:
    a reader takes no lock, so it writes nothing)."""
    with StageContext(session.project_dir, session.config) as ctx:  # its end closes the provider's connections
        subs = Journal(ctx.paths.batches).all()
        api = batches_for(ctx.client("parent")) if any(s.open and s.batch_id for s in subs) else None
        for sub in subs:
            if api is not None and sub.open and sub.batch_id:
                try:
                    sub.status = api.status(sub).status  # shown, not written: `ls` takes no lock
                except LlmError as e:
                    sub.status = f"cannot ask the provider ({e})"
    text = "\n".join(_line(s) for s in subs) or "no batch submissions"
    session.report(text, {"submissions": [_data(s) for s in subs]})


def cancel_flow(session: "Session", sub_id: str | None, every: bool) -> None:
    """Cancel one open submission (or every one) on the provider, and record it."""
    if (sub_id is None) == (not every):
        raise UsageError("name one submission (see `overbrainer batches ls`) or give --all")
    with StageContext(session.project_dir, session.config) as ctx:  # its end closes the provider's connections
        journal = Journal(ctx.paths.batches)
        subs = [s for s in journal.all() if s.open and (every or s.id == sub_id)]
        if sub_id is not None and not subs:
            raise UsageError(f"no open batch submission `{sub_id}` (see `overbrainer batches ls`)")
        done = []
        for sub in subs:
            sub.cancel_requested = True
            if sub.batch_id is None and sub.state == SUBMITTING:
                sub.state, sub.status = LOST, "cancelled before the provider was known to have it"
            else:
                sub.status = batches_for(ctx.client("parent")).cancel(sub).status
            journal.write(sub)
            done.append(sub)
    text = "\n".join(f"cancelled {s.id} ({s.batch_id or 'no batch'}): {s.status}" for s in done) \
        or "no open batch submission to cancel"
    session.report(text, {"cancelled": [_data(s) for s in done]})
