"""The Axolotl metrics/snapshot plugin (docs/runs.md#metrics-plugin), driven with plain objects: no torch."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from overbrainer.train.job import PLUGIN_FILE
from overbrainer.train.metrics import MetricsSummary, parse_record


@pytest.fixture
def plugin(monkeypatch):
    """A fresh copy of the shipped plugin module (as Axolotl would import it)."""
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    spec = importlib.util.spec_from_file_location("overbrainer_metrics_under_test", PLUGIN_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def state(step=0, max_steps=10, epoch=0.0, rank0=True):
    return SimpleNamespace(global_step=step, max_steps=max_steps, epoch=epoch, is_world_process_zero=rank0)


def control():
    return SimpleNamespace(should_save=False, should_training_stop=False)


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_metrics_lines_of_a_training(plugin, tmp_path):
    path = tmp_path / "deep" / "metrics.jsonl"  # the folder is created
    clock = Clock()
    cb = plugin.MetricsCallback(str(path), clock=clock)
    args = SimpleNamespace(output_dir=str(tmp_path / "output"))
    cb.on_train_begin(args, state(), control())
    clock.t += 1
    cb.on_log(args, state(1, epoch=0.1), control(),
              logs={"loss": 1.5, "learning_rate": 2e-4, "grad_norm": float("nan"), "other": 3})
    clock.t += 1
    cb.on_log(args, state(2, epoch=0.2), control(), logs={"eval_loss": float("inf")})
    cb.on_train_end(args, state(2), control())
    got = lines(path)
    assert got == [
        {"event": "begin", "time": 1000.0, "max_steps": 10},
        {"event": "log", "time": 1001.0, "step": 1, "epoch": 0.1, "max_steps": 10, "loss": 1.5,
         "learning_rate": 2e-4, "grad_norm": None},
        {"event": "log", "time": 1002.0, "step": 2, "epoch": 0.2, "max_steps": 10, "eval_loss": None},
        {"event": "end", "time": 1002.0, "step": 2},
    ]
    # The client reads what the plugin writes.
    summary = MetricsSummary().feed_all(path.read_text().splitlines())
    assert (summary.lines, summary.malformed, summary.step) == (4, 0, 2)


def test_tensor_like_values_are_read_with_item(plugin, tmp_path):
    path = tmp_path / "m.jsonl"
    cb = plugin.MetricsCallback(str(path))
    cb.on_log(None, state(3), control(), logs={"grad_norm": SimpleNamespace(item=lambda: 0.5), "loss": "bad"})
    rec = lines(path)[0]
    assert rec["grad_norm"] == 0.5 and rec["loss"] is None


def test_only_rank_zero_writes(plugin, tmp_path, monkeypatch):
    path = tmp_path / "m.jsonl"
    cb = plugin.MetricsCallback(str(path))
    cb.on_train_begin(None, state(rank0=False), control())
    cb.on_log(None, state(1, rank0=False), control(), logs={"loss": 1.0})
    assert not path.exists()
    # Without a trainer state, the launcher's RANK decides.
    monkeypatch.setenv("RANK", "1")
    cb.on_train_end(None, SimpleNamespace(global_step=1), control())
    assert not path.exists()
    monkeypatch.setenv("RANK", "0")
    cb.on_train_end(None, SimpleNamespace(global_step=1), control())
    assert lines(path) == [{"event": "end", "time": lines(path)[0]["time"], "step": 1}]


def test_write_failures_never_raise(plugin, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cb = plugin.MetricsCallback(str(blocker / "metrics.jsonl"))  # a folder that cannot exist
    cb.on_train_begin(None, state(), control())
    cb.on_log(None, state(1), control(), logs={"loss": 1.0})
    cb.on_log(None, None, control(), logs=None)
    cb.on_prediction_step(None, state(), control(), eval_dataloader=object())
    cb.on_train_end(None, object(), control())
    assert capsys.readouterr().err.count("cannot write metrics") == 1  # warned once


def test_eval_lines_are_throttled_and_reset_by_on_evaluate(plugin, tmp_path):
    path = tmp_path / "m.jsonl"
    clock = Clock()
    cb = plugin.MetricsCallback(str(path), clock=clock)
    loader = [0] * 30
    for _ in range(5):  # steps 1-5 within 2 s: only the first is written
        cb.on_prediction_step(None, state(), control(), eval_dataloader=loader)
        clock.t += 0.3
    clock.t += 1.0  # 2.5 s since the first line
    cb.on_prediction_step(None, state(), control(), eval_dataloader=loader)
    cb.on_evaluate(None, state(), control())
    cb.on_prediction_step(None, state(), control(), eval_dataloader=iter([]))  # no length
    got = [(r["step"], r["total"]) for r in lines(path)]
    assert got == [(1, 30), (6, 30), (1, None)]
    assert all(r["event"] == "eval" for r in lines(path))


def test_eval_lines_reach_the_total(plugin, tmp_path):
    """The last batch of an evaluation is always written, so its progress ends at total/total;
    without a length, the batch the throttle held back is written before the evaluation's results."""
    path = tmp_path / "m.jsonl"
    clock = Clock()
    cb = plugin.MetricsCallback(str(path), clock=clock)
    for _ in range(4):  # all within 2 s
        cb.on_prediction_step(None, state(), control(), eval_dataloader=[0] * 4)
        clock.t += 0.1
    cb.on_log(None, state(5), control(), logs={"eval_loss": 0.5})
    cb.on_evaluate(None, state(5), control())
    for _ in range(3):
        cb.on_prediction_step(None, state(), control(), eval_dataloader=iter([]))
        clock.t += 0.1
    cb.on_log(None, state(5), control(), logs={"eval_loss": 0.4, "eval_runtime": 1.0})
    cb.on_evaluate(None, state(5), control())
    cb.on_log(None, state(6), control(), logs={"loss": 1.0})
    got = [(r["event"], r.get("step"), r.get("total"), r.get("eval_loss")) for r in lines(path)]
    assert got == [("eval", 1, 4, None), ("eval", 4, 4, None), ("log", 5, None, 0.5),
                   ("eval", 1, None, None), ("eval", 3, None, None), ("log", 5, None, 0.4),
                   ("log", 6, None, None)]


def snapshot_cb(plugin, tmp_path):
    request = tmp_path / "snapshot.request"
    cb = plugin.SnapshotCallback(str(request), clock=Clock(5.0))
    args = SimpleNamespace(output_dir=str(tmp_path / "output"))
    return cb, request, args


def test_snapshot_request_saves_stops_and_writes_proof(plugin, tmp_path):
    cb, request, args = snapshot_cb(plugin, tmp_path)
    ctl = control()
    cb.on_step_end(args, state(3), ctl)
    assert (ctl.should_save, ctl.should_training_stop) == (False, False)
    cb.on_save(args, state(3), ctl)  # a normal save: no proof
    assert not (tmp_path / "snapshot.json").exists()
    request.write_text("deadline\n")
    cb.on_step_end(args, state(4), ctl)
    assert (ctl.should_save, ctl.should_training_stop) == (True, True)
    cb.on_save(args, state(4), ctl)
    proof = json.loads((tmp_path / "snapshot.json").read_text())
    assert proof == {"checkpoint": "output/checkpoint-4", "step": 4, "time": 5.0, "reason": "deadline"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snapshot.json", "snapshot.request"]


def test_unknown_reason_becomes_requested(plugin, tmp_path):
    cb, request, args = snapshot_cb(plugin, tmp_path)
    request.write_text("please stop $(rm -rf /)")
    cb.on_step_end(args, state(2), control())
    cb.on_save(args, state(2), control())
    assert json.loads((tmp_path / "snapshot.json").read_text())["reason"] == "requested"


def test_request_at_the_last_step_changes_nothing(plugin, tmp_path):
    cb, request, args = snapshot_cb(plugin, tmp_path)
    request.write_text("requested")
    ctl = control()
    cb.on_step_end(args, state(10, max_steps=10), ctl)
    cb.on_save(args, state(10, max_steps=10), ctl)
    assert (ctl.should_save, ctl.should_training_stop) == (False, False)
    assert not (tmp_path / "snapshot.json").exists()


def test_other_ranks_stop_on_the_broadcast_flag_but_write_nothing(plugin, tmp_path, monkeypatch):
    calls = []

    class Tensor:
        def __init__(self, values, device=None):
            self.values = values

        def item(self):
            return self.values[0]

    def broadcast(tensor, src):
        calls.append((tensor.values[0], src))
        tensor.values = [1]  # rank 0 saw the request

    dist = SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                           get_backend=lambda: "gloo", broadcast=broadcast)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(distributed=dist, tensor=Tensor))
    cb, request, args = snapshot_cb(plugin, tmp_path)
    ctl = control()
    cb.on_step_end(args, state(2, rank0=False), ctl)  # this rank does not look at the file
    assert calls == [(0, 0)]
    assert (ctl.should_save, ctl.should_training_stop) == (True, True)
    cb.on_save(args, state(2, rank0=False), ctl)
    assert not (tmp_path / "snapshot.json").exists()


def test_broadcast_failure_keeps_the_local_flag(plugin, tmp_path, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("nccl down")

    dist = SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                           get_backend=lambda: "gloo", broadcast=broken)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(distributed=dist, tensor=lambda v, device=None: v))
    cb, request, args = snapshot_cb(plugin, tmp_path)
    request.write_text("cost")
    ctl = control()
    cb.on_step_end(args, state(1), ctl)
    assert ctl.should_training_stop is True and cb.reason == "cost"


def test_unwritable_proof_never_raises(plugin, tmp_path, capsys):
    cb, request, args = snapshot_cb(plugin, tmp_path)
    request.write_text("requested")
    cb.on_step_end(args, state(1), control())
    (tmp_path / "snapshot.json.tmp").mkdir()  # the temp file cannot be opened, even by root
    cb.on_save(args, state(1), control())
    assert "cannot write snapshot.json" in capsys.readouterr().err
    assert not (tmp_path / "snapshot.json").exists() and cb.written is False


def test_plugin_hands_out_the_callbacks_the_env_asks_for(plugin, tmp_path, monkeypatch):
    monkeypatch.delenv("OVERBRAINER_METRICS", raising=False)
    monkeypatch.delenv("OVERBRAINER_SNAPSHOT", raising=False)
    p = plugin.OverbrainerMetricsPlugin()
    assert p.add_callbacks_pre_trainer(cfg=None, model=None) == []
    monkeypatch.setenv("OVERBRAINER_METRICS", str(tmp_path / "m.jsonl"))
    assert [type(c).__name__ for c in p.add_callbacks_pre_trainer(None, None)] == ["MetricsCallback"]
    monkeypatch.setenv("OVERBRAINER_SNAPSHOT", str(tmp_path / "snapshot.request"))
    assert [type(c).__name__ for c in p.add_callbacks_pre_trainer(None, None)] == ["MetricsCallback", "SnapshotCallback"]
    # The stand-in base class answers every trainer event.
    cb = p.add_callbacks_pre_trainer(None, None)[0]
    assert cb.on_epoch_begin(None, state(), control()) is None


STUBS = {
    "axolotl/__init__.py": "",
    "axolotl/integrations/__init__.py": "",
    "axolotl/integrations/base.py": "class BasePlugin:\n    def add_callbacks_post_trainer(self, cfg, trainer):\n        return ['base']\n",
    # Like the real one: every event a no-op method.
    "transformers/__init__.py": (
        "class TrainerCallback:\n    pass\n"
        "for _e in ('on_train_begin', 'on_train_end', 'on_log', 'on_step_end', 'on_save', 'on_evaluate',\n"
        "           'on_prediction_step', 'on_epoch_begin'):\n"
        "    setattr(TrainerCallback, _e, lambda self, args, state, control, **kw: None)\n"
    ),
}

DRIVER = """
import json, os
from types import SimpleNamespace as N
import overbrainer_metrics as m
from axolotl.integrations.base import BasePlugin
from transformers import TrainerCallback
p = m.OverbrainerMetricsPlugin()
cbs = p.add_callbacks_pre_trainer(None, None)
assert isinstance(p, BasePlugin) and all(isinstance(c, TrainerCallback) for c in cbs)
st = N(global_step=1, max_steps=4, epoch=0.25, is_world_process_zero=True)
for c in cbs:
    c.on_log(None, st, N(), logs={"loss": 2.0})
print(json.dumps([type(c).__name__ for c in cbs]))
"""


def test_plugin_loads_under_python_with_axolotl_and_transformers_stubs(tmp_path):
    stubs = tmp_path / "stubs"
    for rel, text in STUBS.items():
        (stubs / rel).parent.mkdir(parents=True, exist_ok=True)
        (stubs / rel).write_text(text)
    metrics = tmp_path / "metrics.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OVERBRAINER_")}
    env.update(PYTHONPATH=f"{PLUGIN_FILE.parent}{os.pathsep}{stubs}", OVERBRAINER_METRICS=str(metrics),
               OVERBRAINER_SNAPSHOT=str(tmp_path / "snapshot.request"))
    out = subprocess.run([sys.executable, "-c", DRIVER], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["MetricsCallback", "SnapshotCallback"]
    rec = parse_record(metrics.read_text().strip())
    assert rec["loss"] == 2.0 and math.isclose(rec["epoch"], 0.25)


def test_a_cpu_run_of_several_processes_loads_its_model_on_the_cpu(plugin):
    device_map = {"": 1}  # what Axolotl 0.19 gives each process of a multi-process run
    assert plugin.cpu_device_map(device_map, accelerator=lambda: False) is True
    assert device_map == {"": "cpu"}  # in place: Axolotl's loader holds this very dict
    on_gpu = {"": 1}
    assert plugin.cpu_device_map(on_gpu, accelerator=lambda: True) is False and on_gpu == {"": 1}
    for unchanged in ("auto", None, {"": "cpu"}, {"": True}):
        assert plugin.cpu_device_map(unchanged, accelerator=lambda: False) is False
    broken = SimpleNamespace()  # no device_map attribute: reported, never raised
    plugin.OverbrainerMetricsPlugin().pre_model_load(broken)


def test_a_cpu_run_of_several_processes_trains_as_one_distributed_run(plugin):
    env = {"WORLD_SIZE": "2"}
    assert plugin.cpu_distributed(env) is True and env["ACCELERATE_USE_CPU"] == "true"
    for unchanged in ({"WORLD_SIZE": "1"}, {}, {"WORLD_SIZE": "x"}, {"WORLD_SIZE": "2", "ACCELERATE_USE_CPU": "false"}):
        before = dict(unchanged)
        assert plugin.cpu_distributed(unchanged) is False and unchanged == before
