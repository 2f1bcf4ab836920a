"""`compare_flow`: plan → the child answers on the run's target (compare/job.py) → judge →
statistics → report. `--rejudge` judges a compare whose child answers (`child_answers.jsonl`) are
already in its directory, without starting a job.
"""

from __future__ import annotations

import logging
from pathlib import Path

from overbrainer.compare import plan as planning
from overbrainer.compare import report, stats
from overbrainer.compare.answers import read_answers
from overbrainer.compare.job import run_compare_job, server_log
from overbrainer.compare.judge import TEMPLATE, Judge, read_verdicts
from overbrainer.config.templates import load_templates
from overbrainer.dataset.jsonl import Appender
from overbrainer.dataset.stages import StageStats
from overbrainer.errors import Interrupted, OverbrainerError, UsageError
from overbrainer.export.gate import check_run
from overbrainer.export.job import export_part
from overbrainer.front.events import ItemDone, ItemFailed, StageFinished, StageStarted
from overbrainer.jobs.side_job import side_target
from overbrainer.llm.client import connect
from overbrainer.llm.http import LlmSession
from overbrainer.support import fmt
from overbrainer.support.processor import FATAL, Processor, Work
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

STAGE = "judge"


def compare_flow(session, config, *, run_id: str | None = None, limit: int | None = None,
                 rejudge: str | None = None, both_orders: bool = False,
                 min_win_or_tie: float | None = None, target: str | None = None, keep: bool = False) -> dict:
    """Judge one compare and write its reports; returns compare.json's content. Raises
    OverbrainerError (exit 1) when `min_win_or_tie` is above the interval's lower bound."""
    project = Path(session.project_dir)
    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    if min_win_or_tie is not None and not 0 <= min_win_or_tie <= 1:
        raise UsageError("--min-win-or-tie must be between 0 and 1 (a rate, e.g. 0.6)")
    if rejudge is None:
        return new_compare(session, config, project, run_id, limit, both_orders=both_orders,
                           min_win_or_tie=min_win_or_tie, target=target, keep=keep)
    if target is not None or keep:
        raise UsageError("--target and --keep-pod only apply to a new compare (--rejudge starts no job)")
    if limit is not None:
        raise UsageError("--limit only applies to a new compare (--rejudge judges the questions of its setup.json)")
    compare_dir = planning.find_compare(project, rejudge, run_id)
    setup = planning.load_setup(compare_dir)
    answers = read_answers(compare_dir)
    if answers is None:
        raise OverbrainerError(f"compare {setup['compare']} has no answers of the child: "
                               f"run `overbrainer compare --run {setup['run']}` again")
    return judge_and_report(session, config, compare_dir, setup, answers, both_orders=both_orders,
                            min_win_or_tie=min_win_or_tie)


def new_compare(session, config, project: Path, run_id: str | None, limit: int | None, *,
                both_orders: bool, min_win_or_tie: float | None, target: str | None = None,
                keep: bool = False) -> dict:
    """Plan, run the job on its target (exporting first when the run has no GGUF), then judge
    and report."""
    gguf, export = child_of(project, config, run_id, target)
    setup = planning.make_setup(project, config, gguf, "", limit)
    log.info("compare: %d questions for the child of run %s", len(setup["questions"]), gguf.run)
    compare_dir, setup = run_compare_job(session, config, gguf, setup, target=target, keep=keep, export=export)
    answers = read_answers(compare_dir)
    if answers is None:  # run_compare_job checked it: only a file removed meanwhile
        raise OverbrainerError(f"compare {setup['compare']} has no answers of the child")
    check_answered(setup, answers)
    check_answered(setup, answers)
    return judge_and_report(session, config, compare_dir, setup, answers, both_orders=both_orders,
                            min_win_or_tie=min_win_or_tie)


def child_of(project: Path, config, run_id: str | None, target: str | None):
    """(the GGUF to serve, None), or for a run with no GGUF yet (planning.NoGguf) the GGUF its
    export will make and that export (export.job.ExportPart), run first in the compare's job."""
    try:
        return planning.pick_run(project, run_id), None
    except planning.NoGguf as e:
        rid = e.run_id or planning.newest_exportable(project)
        if rid is None:
            raise OverbrainerError("no run has a GGUF, and no run succeeded: train one first") from None
    try:
        source = check_run(planning.runs_dir(project), rid)
    except OverbrainerError as e:
        raise OverbrainerError(f"run {rid} has no GGUF, and cannot be exported first: {e}") from None
    _, where = side_target(config, source.record, "compare", target)
    part = export_part(config, source, config.export.quantize, where)
    log.info("compare: run %s has no GGUF yet: the compare's job exports it first (%s)", rid, part.quantize)
    return planning.Gguf(rid, part.gguf_rel, None, part.quantize, None, ""), part


def check_answered(setup: dict, answers: dict[str, dict]) -> None:
    """A compare where the child answered no question fails (the first error, the server log);
    one where it could not answer some says how many."""
    asked = [q["id"] for q in setup["questions"]]
    failed = [i for i in asked if (answers.get(i) or {"error": "no answer"}).get("error") is not None]
    if not failed:
        return
    where = server_log(setup["run"], setup["compare"])
    if len(failed) == len(asked):
        first = (answers.get(failed[0]) or {}).get("error") or "no answer"
        raise OverbrainerError(f"compare {setup['compare']} failed: the child answered no question of "
                               f"{len(asked)} (the first error: {first}); its server log is {where}")
    log.warning("compare %s: the child could not answer %d of %d questions (counted as losses); its "
                "server log is %s", setup["compare"], len(failed), len(asked), where)


def judge_and_report(session, config, compare_dir: Path, setup: dict, answers: dict[str, dict], *,
                     both_orders: bool, min_win_or_tie: float | None) -> dict:
    front = session.front
    guard = front.open_bus()
    interrupt = front.interrupt()
    llm = LlmSession()
    try:
        provider, role = config.provider_for("judge")
        client = connect(provider, role, config.pipeline, llm=llm, stop=interrupt.event)
        templates = load_templates(session.project_dir, [TEMPLATE])
        judge = Judge(client, templates, compare_dir, setup, answers, both_orders=both_orders)
        done = run_judge(judge, guard.bus, interrupt.event, int(config.pipeline.concurrency or 1),
                         grace=config.pipeline.stop_grace_secs, abandon=interrupt.abandon)
    finally:
        llm.close()
        interrupt.restore()
        guard.close()
    verdicts, flips, pairs = judge.final(done)
    judged = {v["id"] for v in verdicts}
    child = [a for i, a in answers.items() if i in judged]
    summary = stats.summarize([v["verdict"] for v in verdicts], child, flips=flips, pairs=pairs)
    prices = config.compare
    costs = stats.costs([(q.get("parent_input_tokens"), q.get("parent_output_tokens")) for q in setup["questions"]],
                        summary["mean_seconds"], price_in=prices.parent_price_in,
                        price_out=prices.parent_price_out, child_per_hour=prices.child_price_per_hour)
    doc = report.build(setup, answers, verdicts, summary, costs, judge=judge.label,
                       judge_is_parent=config.roles.judge is None, verdicts_file=judge.path.name,
                       hardware=report.read_hardware(compare_dir), created=fmt.stamp())
    _, md_path = report.write(compare_dir, doc)
    shown = _shown(md_path, session.project_dir)
    session.report(shown, {"compare": setup["compare"], "run": setup["run"], "report": shown,
                           "summary": summary, "costs": costs})
    if min_win_or_tie is not None:
        failed = stats.gate(summary, min_win_or_tie)
        if failed:
            raise OverbrainerError(failed)
    return doc


def _shown(path: Path, project_dir) -> str:
    try:
        return str(Path(path).relative_to(Path(project_dir)))
    except ValueError:
        return str(path)


def run_judge(judge: Judge, bus, stop, concurrency: int, *, grace: float = 0.0, abandon=None) -> dict:
    """Ask for every missing verdict, `concurrency` in flight (support/processor.py), appending
    each line as it comes. Returns every verdict line of the file. Ctrl-C and a failing request
    keep what was written, what had already arrived, and what the requests in flight bring back
    within `grace` seconds (`abandon`: a second Ctrl-C, which does not wait)."""
    done = read_verdicts(judge.path)
    tasks, errors = judge.pending(done)
    if not tasks and not errors:
        return done
    tally = _JudgeTally(bus)
    tally.publish(StageStarted(STAGE, len(tasks) + len(errors)))
    proc = Processor(tally, concurrency=concurrency, interrupt=stop, classify=lambda e: FATAL, name=STAGE,
                     grace=grace, abandon=abandon)

    def ask(task):
        return judge.ask(task, on_retry=lambda m: tally.publish(ItemFailed(STAGE, task.id, m, True)),
                         admit=proc.admit)

    with Appender(judge.path) as out:
        def keep(line: dict, usage, cost: float | None) -> None:
            out.append(line)
            done[(line["id"], line["child_first"])] = line
            tally.add(line["id"], usage, cost)

        for line in errors:
            keep(line, None, None)
        ending = proc.run(Work(tasks, ask, lambda task, value: keep(*value), ident=lambda task: task.id))
    tally.publish(StageFinished(STAGE, StageStats(done=len(done), usage=tally.usage, cost=tally.cost)))
    resume = f"resume with `overbrainer compare --rejudge {judge.setup['compare']}`"
    if ending.error is not None:
        raise OverbrainerError(f"judge {judge.label}: {ending.error}; the verdicts so far are kept in "
                               f"{judge.path.name}; {resume}")
    if ending.interrupted:
        raise Interrupted(f"interrupted: the verdicts so far are kept; {resume}")
    return done


class _JudgeTally:
    """The judge's events and its tokens and cost; every failure stops the judge (the processor's
    `item_stopped` is the one that did)."""

    def __init__(self, bus):
        self.bus = bus
        self.usage = Usage(0, 0)
        self.cost: float | None = None

    def publish(self, event) -> None:
        if self.bus is not None:
            self.bus.publish(event)

    def add(self, item_id: str, usage, cost: float | None) -> None:
        if usage is not None:
            self.usage = self.usage + usage
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
        self.publish(ItemDone(STAGE, item_id, usage, cost))

    def item_failed(self, item_id: str, message: str) -> None:
        self.publish(ItemFailed(STAGE, item_id, message, False))

    def item_stopped(self, item_id: str, error: BaseException) -> None:
        self.publish(ItemFailed(STAGE, item_id, str(error), False))
