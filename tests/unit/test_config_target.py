"""One lookup of a target by name (`Config.target`), used by every place that reads one: a missing
target is a configuration error (exit 2) that names it and lists the targets there are. Before,
`record_target` (the target a run ran on) failed with exit 1 and the others with exit 2."""

from __future__ import annotations

import pytest

from overbrainer.config.model import Config, LocalTarget, Project, Role, Roles, RunpodTarget, Training
from overbrainer.errors import EXIT_USAGE, ConfigError
from overbrainer.jobs.run_record import RunRecord
from overbrainer.jobs.side_job import side_target
from overbrainer.jobs.targets import pick_target, record_target

LISTED = "(targets: `here`, `gpu`)"


def _config(**kw) -> Config:
    role = Role("llm", "m")
    targets = {"here": LocalTarget("here", "local"), "gpu": RunpodTarget("gpu", "runpod")}
    return Config(Project("p"), Roles(role, role), targets=targets,
                  training=Training("here", "base/model", "lora"), **kw)


def _run(target: str) -> RunRecord:
    return RunRecord(id="run_20260101-000000", target=target, created="2026-01-01T00:00:00Z", remote_dir="")


def _exit_of(call) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        call()
    assert e.value.exit_code == EXIT_USAGE == 2
    return e.value


def test_config_target_finds_one_and_names_a_missing_one_with_those_there_are():
    config = _config()
    assert config.target("gpu") is config.targets["gpu"]
    e = _exit_of(lambda: config.target("nope"))
    assert str(e) == f"unknown target `nope`: add [targets.nope] to overbrainer.toml {LISTED}"
    e = _exit_of(lambda: config.target("gone", run_id="run_1"))
    assert str(e) == f"target `gone` of run run_1 is no longer in overbrainer.toml {LISTED}"
    e = _exit_of(lambda: Config(Project("p"), Roles(Role("l", "m"), Role("l", "m"))).target("x"))
    assert str(e).endswith("(targets: none)")


def test_pick_target_exits_2_for_an_unknown_target_option_or_training_target():
    assert pick_target(_config()) == ("here", _config().targets["here"])
    assert str(_exit_of(lambda: pick_target(_config(), "nope"))).startswith("unknown target `nope`: ")
    moved = _config()
    moved.training = Training("elsewhere", "base/model", "lora")
    assert str(_exit_of(lambda: pick_target(moved))).startswith("unknown target `elsewhere`: ")


def test_record_target_exits_2_when_the_runs_target_left_the_configuration():
    assert record_target(_config(), _run("gpu")).kind == "runpod"
    e = _exit_of(lambda: record_target(_config(), _run("gone")))
    assert str(e) == f"target `gone` of run run_20260101-000000 is no longer in overbrainer.toml {LISTED}"


def test_side_target_exits_2_for_a_missing_target_of_any_origin():
    config = _config()
    assert side_target(config, _run("here"), "export") == ("here", config.targets["here"])
    assert side_target(config, _run("here"), "compare", "gpu")[0] == "gpu"
    e = _exit_of(lambda: side_target(config, _run("gone"), "export"))
    assert str(e).startswith("target `gone` of run run_20260101-000000 is no longer in overbrainer.toml")
    e = _exit_of(lambda: side_target(config, _run("here"), "compare", "nope"))
    assert str(e).startswith("unknown target `nope`: add [targets.nope]")
