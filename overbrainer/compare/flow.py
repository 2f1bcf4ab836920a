"""`compare_flow`: plan → the child answers on the run's target (compare/job.py) → judge →
statistics → report. `--rejudge` judges a compare whose child answers (`child_answers.jsonl`) are
already in its directory, without starting a job.
"""

from __future__ import annotations

import logging
from pathlib import Path

from overbrainer.compare import plan as planning
from overbrainer.compare.answers import read_answers
from overbrainer.compare.judge import TEMPLATE, Judge, read_verdicts
from overbrainer.errors import Interrupted, OverbrainerError, UsageError

log = logging.getLogger(__name__)

STAGE = "judge"


def compare_flow(session, config, *, run_id: str | None = None, limit: int | None = None,
                 rejudge: str | None = None, both_orders: bool = False,
                 min_win_or_tie: float | None = None) -> dict:
    """Judge one compare and write its reports; returns compare.json's content. Raises
    OverbrainerError (exit 1) when `min_win_or_tie` is above the interval's lower bound."""
    project = Path(session.project_dir)
    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    if min_win_or_tie is not None and not 0 <= min_win_or_tie <= 1:
        raise UsageError("--min-win-or-tie must be between 0 and 1 (a rate, e.g. 0.6)")
    if rejudge is None:
        return new_compare(session, config, project, run_id, limit, both_orders=both_orders,
                           min_win_or_tie=min_win_or_tie)
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
                both_orders: bool, min_win_or_tie: float | None) -> dict:
    """Plan, run the job on the run's target, then judge and report."""
    from overbrainer.compare.job import run_compare_job

    gguf = planning.pick_run(project, run_id)
    setup = planning.make_setup(project, config, gguf, "", limit)
    log.info("compare: %d questions for the child of run %s", len(setup["questions"]), gguf.run)
    compare_dir, setup = run_compare_job(session, config, gguf, setup)
    answers = read_answers(compare_dir)
    if answers is None:  # run_compare_job checked it: only a file removed meanwhile
        raise OverbrainerError(f"compare {setup['compare']} has no answers of the child")
    return judge_and_report(session, config, compare_dir, setup, answers, both_orders=both_orders,
                            min_win_or_tie=min_win_or_tie)


def judge_and_report(session, config, compare_dir: Path, setup: dict, answers: dict[str, dict], *,
                     both_orders: bool, min_win_or_tie: float | None) -> dict:
    from overbrainer.compare import report, stats
    from overbrainer.config.templates import load_templates
    from overbrainer.llm.client import connect
    from overbrainer.runs.ids import rfc3339

    front = session.front
    guard = front.open_bus()
    interrupt = front.interrupt()
    try:
        provider, role = config.provider_for("judge")
        client = connect(provider, role, config.pipeline, stop=interrupt.event)
        templates = load_templates(session.project_dir, [TEMPLATE])
        judge = Judge(client, templates, compare_dir, setup, answers, both_orders=both_orders)
        done = run_judge(judge, guard.bus, interrupt.event, int(config.pipeline.concurrency or 1))
    finally:
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
                       hardware=report.read_hardware(compare_dir), created=rfc3339())
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


def run_judge(judge: Judge, bus, stop, concurrency: int) -> dict:
    """Ask for every missing verdict, `concurrency` in flight, appending each line as it comes.
    Returns every verdict line of the file. Ctrl-C and a failing request keep what was written."""
    from overbrainer.dataset.jsonl import Appender
    from overbrainer.dataset.stages import StageStats
    from overbrainer.front.events import ItemDone, ItemFailed, StageFinished, StageStarted
    from overbrainer.support.usage import Usage
    from overbrainer.support.workqueue import WorkQueue

    done = read_verdicts(judge.path)
    tasks, errors = judge.pending(done)
    compare_id = judge.setup["compare"]
    resume = f"resume with `overbrainer compare --rejudge {compare_id}`"

    def publish(event) -> None:
        if bus is not None:
            bus.publish(event)

    if not tasks and not errors:
        return done
    publish(StageStarted(STAGE, len(tasks) + len(errors)))
    total, cost = Usage(0, 0), None
    fatal: BaseException | None = None

    def ask(task):
        return judge.ask(task, on_retry=lambda m: publish(ItemFailed(STAGE, task.id, m, True)), stop=stop)

    with Appender(judge.path) as out:
        for line in errors:
            out.append(line)
            done[(line["id"], line["child_first"])] = line
            publish(ItemDone(STAGE, line["id"]))
        work = WorkQueue(ask, tasks, concurrency, interrupt=stop, name=STAGE)

        def save(outcome) -> None:
            nonlocal total, cost, fatal
            if outcome.error is not None:
                if not isinstance(outcome.error, Interrupted) and fatal is None:
                    fatal = outcome.error
                    publish(ItemFailed(STAGE, outcome.item.id, str(outcome.error), False))
                    work.stop()
                return
            line, usage, spent = outcome.value
            out.append(line)
            done[(line["id"], line["child_first"])] = line
            total = total + usage
            if spent is not None:
                cost = (cost or 0.0) + spent
            publish(ItemDone(STAGE, line["id"], usage, spent))

        for outcome in work.results():
            save(outcome)
            if fatal is not None:
                break
        for outcome in work.drain():  # answers already received were paid for: keep them
            save(outcome)
    publish(StageFinished(STAGE, StageStats(done=len(done), usage=total, cost=cost)))
    if work.interrupted:
        raise Interrupted(f"interrupted: the verdicts so far are kept; {resume}")
    if fatal is not None:
        raise OverbrainerError(f"judge {judge.label}: {fatal}; the verdicts so far are kept in "
                               f"{judge.path.name}; {resume}")
    return done
