"""The extras (setup.cfg): a command or a setting whose extra is not installed stops before it does
anything, with one line saying how to install it (exit 2); `config check` lists what the
configuration needs and lacks. The packages are made missing by tests/fixtures/missing.py.
(`push`: test_cli_push.py; `[hub] after_training`: test_cli_push_after_training.py; `run` from
the core install alone: test_readme_quickstart.py.)"""

from __future__ import annotations

import configparser
import json
import subprocess
import sys
from pathlib import Path

from tests.fixtures.cli import clean_env
from tests.fixtures.missing import EXTRAS, without, without_extras


def test_a_missing_package_cannot_be_imported_or_found(tmp_path):
    """The fixture refuses what an absent package refuses: `import` and `find_spec` alike."""
    probe = ("import importlib.util\ntry:\n    import textual\nexcept ModuleNotFoundError as e:\n    print(e.name)\n"
             "print(importlib.util.find_spec('json') is not None)\n"
             "try:\n    importlib.util.find_spec('rich.text')\nexcept ModuleNotFoundError:\n    print('refused')\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                       env=clean_env(without(tmp_path, "textual", "rich")))
    assert r.stdout.split() == ["textual", "True", "refused"], r.stderr


def test_tui_without_its_extra_says_how_to_install_it(tmp_path, cli):
    r = cli(["-C", tmp_path, "tui"], env=without_extras(tmp_path, "tui"))
    assert (r.returncode, r.stderr) == (2, "error: overbrainer tui needs the tui extra: pip install 'overbrainer[tui]'\n")
    assert r.stdout == ""


def test_metrics_without_its_extra_stop_a_locking_command_before_it_writes(project, cli, tmp_path):
    project.write(topics=1)
    env = {**project.env, "OVERBRAINER_METRICS__TEXTFILE": "demo.prom", **without_extras(tmp_path, "metrics")}
    r = cli(["-C", project.dir, "split"], env=env)
    line = "[metrics] needs the metrics extra: pip install 'overbrainer[metrics]'"
    assert (r.returncode, r.stderr) == (2, f"error: {line}\n")
    assert not (project.dir / "demo.prom").exists() and not (project.data / "train.jsonl").exists()
    r = cli(["-C", project.dir, "config", "check"], env=env)
    assert r.returncode == 2 and r.stderr == f"error: {line}\n"
    assert "metrics.textfile = demo.prom" in r.stdout  # the configuration is shown first


def test_config_check_lists_every_extra_the_configuration_lacks(project, cli, tmp_path):
    project.write(topics=1, training=True)
    with open(project.dir / "overbrainer.toml", "a", encoding="utf-8") as f:
        f.write('\n[hub]\nrepo = "alice/child"\nafter_training = true\n')
    env = {**project.env, "OVERBRAINER_METRICS__LISTEN": "127.0.0.1:0"}
    assert cli(["-C", project.dir, "config", "check"], env=env).returncode == 0  # the test extra has them all
    r = cli(["-C", project.dir, "--json", "config", "check"], env={**env, **without_extras(tmp_path)})
    assert r.returncode == 2
    problems = json.loads(r.stdout.splitlines()[-1])["problems"]
    assert problems == ["[metrics] needs the metrics extra: pip install 'overbrainer[metrics]'",
                        "[hub] after_training needs the hub extra: pip install 'overbrainer[hub]'"]


def test_every_extra_is_declared_with_the_packages_it_brings():
    """The extras this suite makes missing are setup.cfg's (bar `all`, `test`, `dev`), and `all` is
    every one of them."""
    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    declared = set(cfg["options.extras_require"]) - {"all", "test", "dev"}
    assert declared == set(EXTRAS)
    assert "overbrainer[" + ",".join(sorted(EXTRAS)) + "]" in cfg["options.extras_require"]["all"]
