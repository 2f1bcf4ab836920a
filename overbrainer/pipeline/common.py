"""Shared stage plumbing: run a stage body under the history recorder, read the data files,
and the `--force` rewrite."""

from __future__ import annotations

import logging
from typing import Callable

from overbrainer.pipeline.context import StageContext
from overbrainer.pipeline.recorder import StageRecorder
from overbrainer.pipeline.stage import StageResult, StageRun

log = logging.getLogger(__name__)


def execute(ctx: StageContext, name: str, role: str | None,
            body: Callable[[StageRun], StageResult]) -> StageResult:
    """Run `body(run)` as one stage: history line at the end whatever happens."""
    run = StageRun(name, ctx.bus)
    if role is not None:
        r = ctx.role(role)
        if r is not None:
            run.uses(r.provider, r.model)
    box: list[StageResult] = []
    with StageRecorder(ctx.project_dir).recording(run, box):
        result = body(run)
        box.append(result)
    return result


def finish(run: StageRun, error: BaseException | None = None) -> StageResult:
    return StageResult(run.name, run.finished(), error=error)


def read(path, cls) -> list:
    from overbrainer.dataset.jsonl import read_records

    return read_records(path, cls)


def force_rewrite(path, cls, topics: set[str]) -> None:
    """`--force`: drop the selected topics' records from a stage's output, atomically."""
    from overbrainer.dataset.jsonl import rewrite

    records = read(path, cls)
    kept = [r for r in records if r.topic not in topics]
    if len(kept) != len(records) or path.exists():
        rewrite(path, kept)
        log.info("--force: removed %d record(s) of %s from %s", len(records) - len(kept),
                 ", ".join(sorted(topics)), path.name)


def rejected_of(ctx: StageContext, kind: str) -> list:
    from overbrainer.dataset.records import Rejected

    return [r for r in read(ctx.paths.rejected, Rejected) if r.kind == kind]


def error_text(e: BaseException) -> str:
    return str(e) or type(e).__name__


FATAL = "fatal"
ITEM = "item"


def item_error(run: StageRun, item_id: str, e: BaseException) -> str:
    """Classify a worker's exception: FATAL (stop the stage; not counted as a failed item),
    ITEM (counted, final ItemFailed published). Interrupts and non-provider errors are raised."""
    from overbrainer.errors import Interrupted
    from overbrainer.llm.errors import LlmError
    from overbrainer.pipeline.context import INTERRUPTED

    if isinstance(e, Interrupted):
        raise Interrupted(INTERRUPTED) from e
    if not isinstance(e, LlmError):
        raise e
    if e.fatal:
        log.debug("%s: %s: %s; the stage stops", run.name, item_id, error_text(e))
        return FATAL
    run.item_failed(item_id, error_text(e))  # the front end logs it (ERROR)
    return ITEM
