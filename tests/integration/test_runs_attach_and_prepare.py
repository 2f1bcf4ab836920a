"""Review fixes in the run flows, in-process with a real LocalExecutor whose workdir is not the
project's runs/ (so it stands in for an SSH target: files really travel)."""

from __future__ import annotations

import shutil
import threading

import pytest

from overbrainer.errors import Interrupted
from overbrainer.exec.local import LocalExecutor
from overbrainer.front.session import Session
from overbrainer.runs.retrieve import collect, finish, is_retrieved
from tests.integration.test_runs_retrieve import followed, started
from tests.integration.test_runs_support import make_project
from tests.fixtures.timescale import scale


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    scale(monkeypatch, 0.025)


def test_attach_brings_back_the_output_of_a_succeeded_run_when_it_is_missing_here(tmp_path):
    ex, record, place = started(tmp_path)
    result, _ = followed(ex, record)
    finish(ex, record, place, result.status, result.summary.lines)
    saved = place.load()
    assert saved.state == "succeeded" and is_retrieved(saved, place.dir)
    shutil.rmtree(place.dir / "output")  # e.g. removed to free space, or lost with a disk
    assert not is_retrieved(saved, place.dir)  # so `train attach` downloads it again
    collect(ex, saved, place)
    assert (place.dir / "output" / "adapter_model.safetensors").read_text() == "adapter\n"
    assert is_retrieved(place.load(), place.dir)


class _CtrlCAfterClaim(LocalExecutor):
    """A target reached elsewhere (its workdir is not runs/); Ctrl-C comes once the run is claimed."""

    def __init__(self, workdir, ctrl_c: threading.Event):
        super().__init__(workdir)
        self.ctrl_c = ctrl_c

    def claim(self, dir, owner):
        ours = super().claim(dir, owner)
        self.ctrl_c.set()
        return ours


def test_ctrl_c_while_preparing_leaves_nothing_on_the_target(tmp_path, fake_axolotl, monkeypatch):
    from overbrainer.config.load import load_config
    from overbrainer.front.bus import EventBus
    from overbrainer.front.frontend import Embedded
    from overbrainer.jobs import lease
    from overbrainer.runs import flow

    p = make_project(tmp_path, fake_axolotl)
    remote = tmp_path / "remote"
    ctrl_c = threading.Event()
    monkeypatch.setattr(lease, "open_executor", lambda *a, **k: _CtrlCAfterClaim(remote, ctrl_c))
    reports = []
    app = Session(p.dir, Embedded(EventBus(), ctrl_c, threading.Event(), reports.append))
    with pytest.raises(Interrupted) as e:
        flow.train_flow(app.with_config(load_config(p.dir)))
    assert str(e.value) == "interrupted before the run started"
    assert p.run_ids() == []
    assert list(remote.iterdir()) == []  # no claimed run directory left on the target
