"""Stage `split` (spec §4.5): rewrite data/train.jsonl and data/eval.jsonl with every topic's
usable answers. No provider, no Vault, no templates."""

from __future__ import annotations

import logging

from overbrainer.pipeline.common import execute
from overbrainer.pipeline.context import StageContext
from overbrainer.pipeline.stage import SplitCounts, StageResult, StageRun

log = logging.getLogger(__name__)

STAGE = "split"


def run_split_stage(ctx: StageContext, topic: str | None = None) -> StageResult:
    """`topic` (--topic) only restricts what is counted and printed."""
    if topic is not None:
        ctx.select_topics(topic)  # `unknown topic` before the stage starts
    return execute(ctx, STAGE, None, lambda run: _body(ctx, run, topic))


def _body(ctx: StageContext, run: StageRun, topic: str | None) -> StageResult:
    from overbrainer.dataset.split import run_split
    from overbrainer.front.events import StageStarted
    from overbrainer.support.usage import Usage

    pipeline = ctx.pipeline
    result = run_split(ctx.paths, ctx.config.topics, pipeline.eval_ratio, pipeline.seed, counted=topic)
    run.publish(StageStarted(STAGE, result.total))
    counts = SplitCounts(result.train_count, result.eval_count, result.orphaned, dict(result.excluded))
    from overbrainer.front.events import StageFinished, StageStats

    stats = StageStats(done=counts.train + counts.eval, skipped=counts.orphaned, failed=0,
                       excluded=counts.excluded, usage=Usage(), cost=None)
    run.publish(StageFinished(STAGE, stats))
    return StageResult(STAGE, stats, split=counts)
