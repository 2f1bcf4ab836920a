"""Stage `split`: rewrite data/train.jsonl and data/eval.jsonl with every topic's
usable answers. No provider, no Vault, no templates."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from overbrainer.config.model import Pipeline
from overbrainer.dataset.quality import benchmarks as benchmark_files
from overbrainer.dataset import state as dataset_state
from overbrainer.dataset.split import ORPHANED_WARNING, SplitResult, run_split
from overbrainer.dataset.accounting.stages import StageStats
from overbrainer.errors import OverbrainerError
from overbrainer.front.events import StageFinished, StageStarted
from overbrainer.pipeline.common import execute
from overbrainer.pipeline.context import StageContext
from overbrainer.pipeline.gate import gate_settings
from overbrainer.pipeline.stage import SplitCounts, StageResult, StageRun
from overbrainer.support.usage import Usage
from overbrainer.support.fmt import plural

log = logging.getLogger(__name__)

STAGE = "split"


def run_split_stage(ctx: StageContext, topic: str | None = None) -> StageResult:
    """`topic` (--topic) only restricts what is counted and printed."""
    if topic is not None:
        ctx.select_topics(topic)  # `unknown topic` before the stage starts
    return execute(ctx, STAGE, None, lambda run: _body(ctx, run, topic))


def _body(ctx: StageContext, run: StageRun, topic: str | None) -> StageResult:
    result = _split(ctx, topic)
    run.publish(StageStarted(STAGE, result.total))
    counts = SplitCounts(result.train_count, result.eval_count, result.orphaned, dict(result.excluded),
                         contaminated_by_source=dict(result.contaminated), gated_by_reason=dict(result.gated),
                         kept_output_tokens=result.kept_output_tokens)
    stats = StageStats(done=counts.train + counts.eval, skipped=counts.orphaned, failed=0,
                       excluded=counts.excluded + counts.gated, usage=Usage(), cost=None)
    run.publish(StageFinished(STAGE, stats))
    error = _nothing_to_train(result)
    if topic is None:
        return StageResult(STAGE, stats, split=counts, error=error)
    return TopicSplit(STAGE, stats, split=counts, error=error, topic=topic,
                      written_train=result.written_train, written_eval=result.written_eval)


def _split(ctx: StageContext, topic: str | None) -> SplitResult:
    """Split, or, when the inputs, the settings and the files written are those of the last
    split (dataset/state.py), only its counts again: nothing to read or write."""
    pipeline = ctx.pipeline
    benchmark_files.check(ctx.paths.root, pipeline.decontaminate)
    gate = gate_settings(ctx.config, ctx.project_dir)
    key = dataset_state.split_key(ctx.paths, ctx.config.topics, pipeline.eval_ratio, pipeline.seed,
                                  decontamination(pipeline), gate)
    if topic is None:
        result = dataset_state.unchanged_split(ctx.paths, key)
        if result is not None:
            log.info("split: the answers, questions and settings are those of the last split: "
                     "train.jsonl and eval.jsonl are up to date")
            if result.all_orphaned:
                log.warning(ORPHANED_WARNING, result.orphaned_usable)
            return result
    screen = benchmark_files.screen(ctx.paths.root, pipeline.decontaminate, pipeline.decontaminate_ngram)
    eval_ngram = pipeline.decontaminate_ngram if pipeline.decontaminate_eval else None
    result = run_split(ctx.paths, ctx.config.topics, pipeline.eval_ratio, pipeline.seed, counted=topic,
                       benchmarks=screen, eval_ngram=eval_ngram, gate=gate)
    if topic is None:
        dataset_state.save_split(ctx.paths, key, result)
    return result


def decontamination(pipeline: Pipeline) -> dict[str, Any]:
    """The decontamination settings, as the split key and the model card keep them."""
    return {"ngram": pipeline.decontaminate_ngram, "eval": pipeline.decontaminate_eval,
            "benchmarks": [[b.path, list(b.fields)] for b in pipeline.decontaminate]}


@dataclass
class TopicSplit(StageResult):
    """`split --topic`: the counts of one topic, and what the files now hold (every topic)."""

    topic: str = ""
    written_train: int = 0
    written_eval: int = 0

    def text(self) -> str:
        counts = super().text().removeprefix(f"{STAGE}: ")
        return (f"{STAGE}: topic {self.topic}: {counts}; wrote {plural(self.written_train, 'train example')} and "
                f"{plural(self.written_eval, 'eval example')} of all topics to data/train.jsonl and data/eval.jsonl")

    def data(self) -> dict[str, Any]:
        return dict(super().data(), topic=self.topic, written={"train": self.written_train, "eval": self.written_eval})


def _nothing_to_train(result: SplitResult) -> OverbrainerError | None:
    """Exit 1 when data/train.jsonl was written empty, saying why."""
    if result.written_train:
        return None
    if result.orphaned_usable and not result.usable:
        why = (f"all {result.orphaned_usable} usable answer(s) are orphaned (their topic or question is gone "
               f"from the configuration)")
    elif result.excluded and not result.usable:
        reasons = ", ".join(f"{reason} {n}" for reason, n in result.excluded.items())
        why = f"every answer was excluded ({reasons})"
        if "no_raw_reasoning" in result.excluded:
            why += ": the parent does not return its reasoning; set roles.parent.reasoning = false"
        else:
            why += ": see `overbrainer dataset stats`"
    elif result.gated and not result.usable:
        reasons = ", ".join(f"{reason} {n}" for reason, n in result.gated.items())
        why = f"the gate dropped every usable answer ({reasons}): see data/gate.jsonl and [gate]"
    elif result.contaminated and not result.written_train:
        why = ("every answer left for train overlaps the eval split or a benchmark "
               f"({', '.join(f'{k} {n}' for k, n in result.contaminated.items())})")
    elif not result.usable:
        why = "there is no answer yet: run `overbrainer answers` first"
    else:
        why = f"{result.usable} usable answer(s) all went to eval: lower pipeline.eval_ratio or answer more questions"
    return OverbrainerError(f"split wrote 0 train examples: {why}")
