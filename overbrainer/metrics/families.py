"""The metric families (docs/metrics.md) built from a `Tally` snapshot at each scrape or write.

Every series carries `project` (the `[project] name`), so the textfiles of several projects
can sit in one node_exporter directory. Labels hold stage names, results, model names (a path
cut to its last part), run IDs, phases and the version: never a prompt, a path or a secret.
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from overbrainer.metrics.tally import PHASES, Snapshot, Tally

PREFIX = "overbrainer_"
TRAIN_GAUGES = (  # (family, RunGauges attribute, help)
    ("train_step", "step", "The last training step the run reported"),
    ("train_max_steps", "max_steps", "The run's total number of training steps"),
    ("train_loss", "loss", "The run's last training loss"),
    ("eval_loss", "eval_loss", "The run's last evaluation loss"),
    ("learning_rate", "learning_rate", "The run's last learning rate"),
)


def families(snap: Snapshot, project: str, version: str, spend: dict[str, float]) -> list[Metric]:
    """The families of one snapshot; `spend` is the Runpod spend per run ID (USD)."""
    def family(kind, name: str, doc: str, labels: list[str]):
        return kind(PREFIX + name, doc, labels=["project", *labels])

    items = family(CounterMetricFamily, "stage_items", "Items each stage handled, by result", ["stage", "result"])
    for (stage, result), n in sorted(snap.counts.items.items()):
        items.add_metric([project, stage, result], n)
    tokens = family(CounterMetricFamily, "tokens", "Tokens sent (in) and received (out), retried requests included",
                    ["stage", "model", "direction"])
    for (stage, model, direction), n in sorted(snap.counts.tokens.items()):
        tokens.add_metric([project, stage, model, direction], n)
    cost = family(CounterMetricFamily, "cost_usd", "What the requests cost (USD): the provider's bill, else the "
                  "listed prices", ["stage", "model"])
    for (stage, model), usd in sorted(snap.counts.cost.items()):
        cost.add_metric([project, stage, model], usd)
    running = family(GaugeMetricFamily, "stage_running", "1 while the stage runs in this command", ["stage"])
    retries = family(CounterMetricFamily, "item_retries", "Requests retried in this command", ["stage"])
    for stage, n in snap.running.items():
        running.add_metric([project, stage], n)
        retries.add_metric([project, stage], snap.retries.get(stage, 0))
    out = [items, tokens, cost, running, retries, *_training(snap, project, family)]
    pods = family(GaugeMetricFamily, "runpod_spend_usd", "What each run's Runpod pod has cost so far (USD, "
                  "estimated from its rate and uptime)", ["run_id"])
    for run_id, usd in sorted(spend.items()):
        pods.add_metric([project, run_id], usd)
    info = family(GaugeMetricFamily, "build_info", "The overbrainer version (always 1)", ["version"])
    info.add_metric([project, version], 1)
    return [*out, pods, info]


def _training(snap: Snapshot, project: str, family) -> Iterator[Metric]:
    for name, attr, doc in TRAIN_GAUGES:
        gauge = family(GaugeMetricFamily, name, doc, ["run_id"])
        for run_id, run in sorted(snap.runs.items()):
            value = getattr(run, attr)
            if value is not None:
                gauge.add_metric([project, run_id], value)
        yield gauge
    phase = family(GaugeMetricFamily, "train_phase", "1 for what a followed run is doing now, 0 for the rest",
                   ["run_id", "phase"])
    for run_id, run in sorted(snap.runs.items()):
        now = run.phase
        if now is not None:
            for name in PHASES:
                phase.add_metric([project, run_id, name], 1 if name == now else 0)
    yield phase


class TallyCollector(Collector):
    """A prometheus_client collector: the tally's families, the Runpod spend recomputed each time."""

    def __init__(self, tally: Tally, project: str, version: str, spend: Callable[[], dict[str, float]]):
        self.tally = tally
        self.project = project
        self.version = version
        self.spend = spend

    def collect(self) -> Iterator[Metric]:
        yield from families(self.tally.snapshot(), self.project, self.version, self.spend())
