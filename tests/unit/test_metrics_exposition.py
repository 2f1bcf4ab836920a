"""The metric families as Prometheus reads them, the Runpod spend from pod.json, the textfile."""

from __future__ import annotations

import json
import logging
import os

from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from overbrainer import __version__
from overbrainer.config.model import Metrics
from overbrainer.dataset.accounting.stages import StageStats
from overbrainer.front import events as ev
from overbrainer.metrics.exporter import Exporter
from overbrainer.metrics.families import TallyCollector
from overbrainer.runpod.ledger import runpod_spend
from overbrainer.metrics.tally import Tally
from overbrainer.support.usage import Usage

CREATED = 1767268806


def samples(text: str, parse=text_string_to_metric_families) -> dict:
    """{(sample name, ((label, value), ...)): value} of an exposition."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in parse(text) for s in f.samples}


def pod_json(run_id: str, state: str, **fields) -> dict:
    return {"version": 1, "run_id": run_id, "state": state, "keep": False, "attempts": [], "gpu_count": 1,
            "stray_pods": [], **fields}


def write_pods(runs):
    pods = {
        "demo_live": pod_json("demo_live", "running", pod_id="p1", cost_per_hour=0.44, created_unix=CREATED),
        "demo_gone": pod_json("demo_gone", "deleted", pod_id="p2", cost_per_hour=0.5, created_unix=CREATED,
                              deleted_by="client", estimated_spend=0.64),
        "demo_new": pod_json("demo_new", "creating"),  # no pod yet: no spend known
    }
    for run_id, doc in pods.items():
        (runs / run_id).mkdir(parents=True)
        (runs / run_id / "pod.json").write_text(json.dumps(doc))
    (runs / "demo_bad").mkdir()
    (runs / "demo_bad" / "pod.json").write_text("{not json")
    (runs / "demo_plain").mkdir()  # a local run: no pod.json at all


def test_runpod_spend_is_the_final_estimate_or_rate_times_uptime(tmp_path):
    runs = tmp_path / "runs"
    assert runpod_spend(runs) == {}
    write_pods(runs)
    assert runpod_spend(runs, now=CREATED + 1800) == {"demo_live": 0.22, "demo_gone": 0.64}


def registry_of(tally: Tally, spend=dict) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TallyCollector(tally, "Demo Project", __version__, spend))
    return registry


def test_every_family_in_both_formats(tmp_path):
    tally = Tally()
    for e in [ev.StageModel("answers", "deepseek/deepseek-r1"), ev.StageStarted("answers", 2),
              ev.ItemDone("answers", "q1", Usage(10, 30), 0.25), ev.ItemFailed("answers", "q2", "HTTP 500", True),
              ev.RunWatched("demo_1"), ev.Metric("demo_1", 1.0, 3, max_steps=10, loss=1.5, learning_rate=2e-4)]:
        tally.apply(e)
    write_pods(tmp_path / "runs")
    registry = registry_of(tally, lambda: runpod_spend(tmp_path / "runs", now=CREATED + 3600))
    project = ("project", "Demo Project")
    for text, parse in ((generate_latest(registry).decode(), text_string_to_metric_families),
                        (generate_openmetrics(registry).decode(), parse_openmetrics)):
        got = samples(text, parse)
        assert got[("overbrainer_stage_items_total", (project, ("result", "done"), ("stage", "answers")))] == 1
        assert got[("overbrainer_stage_items_total", (project, ("result", "failed"), ("stage", "split")))] == 0
        assert got[("overbrainer_tokens_total", (("direction", "in"), ("model", "deepseek/deepseek-r1"), project,
                                                 ("stage", "answers")))] == 10
        assert got[("overbrainer_cost_usd_total", (("model", "deepseek/deepseek-r1"), project,
                                                   ("stage", "answers")))] == 0.25
        assert got[("overbrainer_stage_running", (project, ("stage", "answers")))] == 1
        assert got[("overbrainer_item_retries_total", (project, ("stage", "answers")))] == 1
        run = (project, ("run_id", "demo_1"))
        assert got[("overbrainer_train_step", run)] == 3 and got[("overbrainer_train_max_steps", run)] == 10
        assert got[("overbrainer_train_loss", run)] == 1.5 and got[("overbrainer_learning_rate", run)] == 2e-4
        assert ("overbrainer_eval_loss", run) not in got  # never reported: no series
        assert got[("overbrainer_train_phase", (("phase", "training"), project, ("run_id", "demo_1")))] == 1
        assert got[("overbrainer_train_phase", (("phase", "merging"), project, ("run_id", "demo_1")))] == 0
        assert got[("overbrainer_runpod_spend_usd", (project, ("run_id", "demo_live")))] == 0.44
        assert got[("overbrainer_runpod_spend_usd", (project, ("run_id", "demo_gone")))] == 0.64
        assert not [k for k in got if k[0] == "overbrainer_runpod_spend_usd" and "demo_new" in str(k)]
        assert got[("overbrainer_build_info", (project, ("version", __version__)))] == 1
    # A removed run vanishes at the next scrape: the spend is read afresh each time.
    (tmp_path / "runs" / "demo_gone" / "pod.json").unlink()
    assert "demo_gone" not in generate_latest(registry).decode()


def exporter(tmp_path, textfile="metrics/demo.prom") -> Exporter:
    return Exporter(tmp_path, "demo", Metrics(textfile=textfile)).start()


def test_the_textfile_is_replaced_whole_and_an_old_one_survives_a_failed_write(tmp_path):
    exp = exporter(tmp_path)
    exp.write_textfile()
    path = tmp_path / "metrics" / "demo.prom"
    first = path.read_text()
    inode = path.stat().st_ino
    exp.tally.apply(ev.StageFinished("split", StageStats(done=3)))
    exp.write_textfile()
    assert path.stat().st_ino != inode  # a new file renamed over the old one, never rewritten in place
    assert samples(path.read_text())[("overbrainer_stage_items_total",
                                      (("project", "demo"), ("result", "done"), ("stage", "split")))] == 3
    assert os.listdir(path.parent) == ["demo.prom"]  # no temp file left behind

    class Broken:
        def collect(self):
            raise RuntimeError("a collector bug")

    exp.registry.register(Broken())
    exp.write_textfile()  # warns (the command goes on)
    assert path.read_text() != first and "split" in path.read_text()  # the last good file stays
    assert os.listdir(path.parent) == ["demo.prom"]


def test_a_textfile_that_cannot_be_written_warns_once(tmp_path, caplog):
    (tmp_path / "blocked").write_text("a file where a folder should be")
    exp = exporter(tmp_path, "blocked/demo.prom")
    with caplog.at_level(logging.DEBUG, logger="overbrainer.metrics"):
        exp.write_textfile()
        exp.write_textfile()
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "metrics: cannot write" in warned[0].getMessage()
    assert str(tmp_path / "blocked" / "demo.prom") in warned[0].getMessage()


def test_the_exporter_starts_from_history(tmp_path):
    history = tmp_path / ".overbrainer" / "history.jsonl"
    history.parent.mkdir()
    history.write_text(json.dumps({
        "stage": "answers", "started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T00:01:00Z",
        "status": "ok", "provider": "fake", "model": "/home/alice/q.gguf", "done": 4, "skipped": 0, "failed": 1,
        "excluded": 0, "input_tokens": 40, "output_tokens": 90, "cost": None}) + "\n")
    got = samples(exporter(tmp_path).render(None)[0].decode())
    labels = (("direction", "out"), ("model", "q.gguf"), ("project", "demo"), ("stage", "answers"))
    assert got[("overbrainer_tokens_total", labels)] == 90
    assert got[("overbrainer_stage_items_total", (("project", "demo"), ("result", "failed"), ("stage", "answers")))] == 1
    assert "alice" not in exporter(tmp_path).render(None)[0].decode()
