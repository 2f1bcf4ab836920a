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
from overbrainer.compare.job import run_compare_job
from overbrainer.compare.serve import server_log
from overbrainer.compare.judge import TEMPLATE, Judge, read_verdicts
from overbrainer.dataset.jsonl import Appender
from overbrainer.errors import Interrupted, ItemsFailed, OverbrainerError, UsageError
from overbrainer.export.gate import check_run
from overbrainer.export.job import export_part
from overbrainer.front.session import Session
from overbrainer.jobs.run_record import RunPlace
from overbrainer.jobs.side_job import side_target
from overbrainer.pipeline.common import processor
from overbrainer.pipeline.run_flow import stage_context
from overbrainer.pipeline.stage import StageRun, counted, some
from overbrainer.support import fmt
from overbrainer.support.processor import Work
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

STAGE = "judge"


def compare_flow(session: Session, *, run_id: str | None = None, limit: int | None = None,
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
        return new_compare(session, run_id, limit, both_orders=both_orders,
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
    return judge_and_report(session, compare_dir, setup, answers, both_orders=both_orders,
                            min_win_or_tie=min_win_or_tie)


def new_compare(session: Session, run_id: str | None, limit: int | None, *,
                both_orders: bool, min_win_or_tie: float | None, target: str | None = None,
                keep: bool = False) -> dict:
    """Plan, run the job on its target (exporting first when the run has no GGUF), then judge
    and report."""
    project, config = session.project_dir, session.config
    gguf, export = child_of(project, config, run_id, target)
    setup = planning.make_setup(project, config, gguf, "", limit)
    log.info("compare: %d questions for the child of run %s", len(setup["questions"]), gguf.run)
    compare_dir, setup = run_compare_job(session, gguf, setup, target=target, keep=keep, export=export)
    answers = read_answers(compare_dir)
    if answers is None:  # run_compare_job checked it: only a file removed meanwhile
        raise OverbrainerError(f"compare {setup['compare']} has no answers of the child")
    check_answered(setup, answers)
    check_answered(setup, answers)
    return judge_and_report(session, compare_dir, setup, answers, both_orders=both_orders,
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
        source = check_run(RunPlace(planning.runs_dir(project), rid))
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


def judge_and_report(session: Session, compare_dir: Path, setup: dict, answers: dict[str, dict], *,
                     both_orders: bool, min_win_or_tie: float | None) -> dict:
    config = session.config
    with stage_context(session) as ctx:  # the judge's channels are closed with it
        client = ctx.connect(STAGE)
        judge = Judge(client, ctx.templates(TEMPLATE), compare_dir, setup, answers, both_orders=both_orders)
        done = run_judge(judge, ctx)
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


def run_judge(judge: Judge, ctx) -> dict:
    """Ask for every missing verdict on the stage's processor (pipeline/common.processor:
    `[pipeline] concurrency` in flight, the spend cap, the stop's grace), appending each line as
    it comes. Returns every verdict line of the file. A request that fails after its retries
    fails its question only (no line: a rerun asks it again; ItemsFailed, exit 1, once the others
    are judged); a fatal error (credits, a refused key, the provider unreachable), the spend cap
    and Ctrl-C stop the judge, keeping what was written and what the requests in flight bring back
    within `[pipeline] stop_grace_secs`."""
    done = read_verdicts(judge.path)
    tasks, errors = judge.pending(done)
    if not tasks and not errors:
        return done
    run = _JudgeRun(ctx.bus)
    run.started(len(tasks) + len(errors))
    proc = processor(ctx, run)

    def send(task):
        return judge.ask(task, proc, spend=run.spend, on_retry=lambda m: run.retrying(task.id, m))

    with Appender(judge.path) as out:
        def keep(line: dict, usage, cost: float | None) -> None:
            out.append(line)
            done[(line["id"], line["child_first"])] = line
            run.item_done(line["id"], usage or Usage(), cost)

        for line in errors:
            keep(line, None, None)
        ending = proc.run(Work(tasks, send, lambda task, value: keep(*value), ident=lambda task: task.id))
    run.abandoned = ending.abandoned
    run.finished()
    resume = f"resume with `overbrainer compare --rejudge {judge.setup['compare']}`"
    if ending.error is not None:
        raise OverbrainerError(f"judge {judge.label}: {ending.error}; the verdicts so far are kept in "
                               f"{judge.path.name}; {resume}")
    if ending.interrupted:
        raise Interrupted(f"interrupted: the verdicts so far are kept; {resume}")
    if run.failed_ids:
        raise ItemsFailed(f"judge {judge.label}: {counted(len(run.failed_ids), 'verdict', 'verdicts')} of "
                          f"{run.total} failed ({some(run.failed_ids)}); the others are kept in "
                          f"{judge.path.name}; {resume}")
    return done


class _JudgeRun(StageRun):
    """The judge's tally: a stage's, naming the questions whose verdict failed."""

    def __init__(self, bus):
        super().__init__(STAGE, bus)
        self.failed_ids: list[str] = []

    def item_failed(self, item_id: str, message: str, stops: bool = False) -> None:
        self.failed_ids.append(item_id)
        super().item_failed(item_id, message, stops)
