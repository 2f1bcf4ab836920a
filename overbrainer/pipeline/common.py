"""Shared stage plumbing: run a stage body under the history recorder, its requests through the
one request processor (support/processor.py), read the data files, and a stage's output file
(with the `--force` rewrite held back until the provider answered).

The history recorder around a stage (`StageRecorder`, on dataset.accounting.history's
HistoryRecorder): `begin` when the stage starts, one line when it ends, whatever happens: `ok`
with the stage's stats when nothing failed; `failed` when items failed or a fatal error stopped
it (counts from the stage's own tally, which every worker updates as it goes); `interrupted` on
Ctrl-C. A failure to write the history only logs a warning.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from overbrainer.dataset.accounting.history import HistoryRecorder
from overbrainer.dataset.accounting.stages import StageStats
from overbrainer.dataset import state as dataset_state
from overbrainer.dataset.figures import Figures
from overbrainer.dataset.jsonl import Appender, iter_records, read_records, rewriting
from overbrainer.dataset.records import Rejected
from overbrainer.errors import Interrupted
from overbrainer.llm.client import LlmClient
from overbrainer.llm.errors import LlmError
from overbrainer.llm.spend import Spend
from overbrainer.llm.types import ChatRequest, ChatResponse
from overbrainer.pipeline.context import INTERRUPTED, StageContext
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.support.processor import FATAL, ITEM, RAISE, Processor, Tally, Work

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
    try:
        with StageRecorder(ctx.project_dir).recording(run, box):
            result = body(run)
            box.append(result)
    except Interrupted as e:
        # Recorded as interrupted; the caller still prints how far the stage got.
        return result_of(run, run.stats(), e, interrupted=True)
    return result


def result_of(run: StageRun, stats: StageStats, error: BaseException | None = None, *,
              interrupted: bool = False) -> StageResult:
    return StageResult(run.name, stats, error=error, total=run.total, written=run.written,
                       handled=run.handled, interrupted=interrupted, abandoned=run.abandoned,
                       stalled=list(run.stalled), held=run.held, held_at=run.held_at, refused=run.refused)


def finish(run: StageRun, error: BaseException | None = None) -> StageResult:
    return result_of(run, run.finished(error), error)


def force_rewrite(path: Path, cls: type[Any], topics: set[str]) -> None:
    """`--force`: drop the selected topics' records from a stage's output, atomically, streaming
    the file into its rewrite (a line in memory, not the file). Unchanged when none goes."""
    removed = 0
    with rewriting(path) as out:
        for record in iter_records(path, cls):
            if record.topic in topics:
                removed += 1
            else:
                out.append(record)
        if not removed:
            out.cancel()
    if removed:
        log.info("--force: removed %d record(s) of %s from %s", removed, ", ".join(sorted(topics)), path.name)


class Output:
    """A stage's output file (JSONL), opened on first use.

    With `--force` (`forced` = the selected topics), the stage works as if those topics' records
    were gone, but the file loses them only once the provider has answered a request (`confirm()`,
    also done by the first `append`). A stage that fails before that (configuration, secrets, a
    provider that refuses the key or cannot be reached) leaves the file byte for byte as it was.
    Thread-safe.
    """

    def __init__(self, path: Path, cls: type[Any], forced: set[str] | None = None):
        self.path = path
        self._cls = cls
        self._forced = set(forced) if forced else None
        self._appender: Appender | None = None
        self._lock = threading.Lock()

    def records(self) -> Iterator[Any]:
        """The records the stage starts from (the forced topics' left out), one at a time."""
        forced = self._forced
        for record in iter_records(self.path, self._cls):
            if forced is None or record.topic not in forced:
                yield record

    def confirm(self) -> Appender:
        """The provider answered: apply `--force` now (once), and open the file for appending
        (its appender)."""
        with self._lock:
            if self._appender is not None:
                return self._appender
            if self._forced is not None:
                force_rewrite(self.path, self._cls, self._forced)
            self._appender = Appender(self.path)
            return self._appender

    def append(self, record: Any) -> None:
        self.confirm().append(record)

    def append_all(self, records: list[Any]) -> None:
        """A batch of records in one write (dataset/jsonl.Appender.append_all)."""
        self.confirm().append_all(records)

    def close(self) -> None:
        with self._lock:
            if self._appender is not None:
                self._appender.close()

    def __enter__(self) -> "Output":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stage_figures(ctx: StageContext, force: bool) -> Figures | None:
    """The dataset's figures as a stage starts (dataset/state.py: saved ones, or a scan), or
    None with `--force`, whose rewrite makes them stale."""
    return None if force else dataset_state.current(ctx.paths)


@contextlib.contextmanager
def keeping_figures(ctx: StageContext, run: StageRun, figures: Figures | None) -> Iterator[None]:
    """Around a stage's writing: once it is over (its files closed), the figures it kept up to
    date as it appended are saved for the next command, or forgotten when they may no longer be
    exact (`figures` None: a `--force` or `--retry-excluded` stage; an unexpected error). A stage
    that appended nothing leaves the saved figures alone (a `--force` rewrite alone makes them
    stale: they no longer match the file)."""
    try:
        yield
    except Interrupted:
        _keep(ctx, run, figures)
        raise
    except BaseException:
        if run.written:
            dataset_state.forget(ctx.paths)
        raise
    _keep(ctx, run, figures)


def _keep(ctx: StageContext, run: StageRun, figures: Figures | None) -> None:
    if not run.written:
        return
    if figures is not None and figures.exact:
        dataset_state.save(ctx.paths, figures)
    else:
        dataset_state.forget(ctx.paths)


def rejected_of(ctx: StageContext, kind: str) -> list[Rejected]:
    return [r for r in read_records(ctx.paths.rejected, Rejected) if r.kind == kind]


def classify(e: BaseException) -> str:
    """How a stage takes a worker's exception: a fatal provider error stops it (FATAL), any other
    provider error fails only its item (ITEM); anything else is not the provider's (RAISE)."""
    if not isinstance(e, LlmError):
        return RAISE
    return FATAL if e.fatal else ITEM


def processor(ctx: StageContext, run: StageRun, tally: Tally | None = None) -> Processor:
    """The stage's request processor (support/processor.py): `[pipeline] concurrency` in
    flight, the user's interrupt (a second one abandons the requests in flight), the provider's
    errors classified by `classify`, `[pipeline] stop_grace_secs` for the requests in flight on
    a stop, and the command's spend cap. The failed items go to `tally` (default: `run`)."""
    return Processor(run if tally is None else tally, concurrency=ctx.pipeline.concurrency, interrupt=ctx.stop_event,
                     classify=classify, name=run.name, grace=ctx.pipeline.stop_grace_secs,
                     abandon=ctx.abandon_event, budget=ctx.budget)


def ask(proc: Processor, client: LlmClient, request: ChatRequest,
        on_retry: Callable[[str], None] | None = None) -> tuple[ChatResponse, Spend]:
    """One chat under the stage's processor: admitted (its upper bound held under the spend
    cap, computed only when there is one), sent, and settled with what it cost. Returns the
    response and its `llm.spend.Spend`."""
    held = proc.admit(lambda: client.bound(request))
    try:
        response = client.chat(request, on_retry=on_retry)
    except BaseException:
        proc.settle(held, None)
        raise
    spent = client.spend(response)
    proc.settle(held, spent.cost)
    return response, spent


def process(run: StageRun, proc: Processor, work: Work[Any]) -> StageResult:
    """Run the stage's work to its end: its result, stopped by a fatal error when one came;
    raises Interrupted (after keeping every result that arrived) on the user's interrupt."""
    ending = proc.run(work)
    run.abandoned = ending.abandoned
    if ending.error is not None:
        return finish(run, ending.error)
    if ending.interrupted:
        raise Interrupted(INTERRUPTED)
    return finish(run)


class StageRecorder:
    """`with StageRecorder(dir).recording(run, box) as run: ...; box.append(result)`."""

    def __init__(self, project_dir: Path):
        self.project_dir = Path(project_dir)

    @contextlib.contextmanager
    def recording(self, run: StageRun, result_box: list[StageResult]) -> Iterator[StageRun]:
        recorder = HistoryRecorder(self.project_dir)
        recorder.begin(run.name, run.provider if run.model is not None else None, run.model)
        try:
            yield run
        except Interrupted:
            recorder.finish("interrupted", run.stats())
            raise
        except BaseException:
            recorder.finish("failed", run.stats())
            raise
        result = result_box[0] if result_box else None
        stats = result.stats if result is not None else run.stats()
        failed = stats.failed > 0 or (result is not None and result.error is not None)
        split = None
        if result is not None and result.split is not None:
            s = result.split
            split = {"train": s.train, "eval": s.eval, "orphaned": s.orphaned,
                     "kept_output_tokens": s.kept_output_tokens}
            if s.contaminated:
                split["contaminated"] = s.contaminated
        recorder.finish("failed" if failed else "ok", stats, split=split)
