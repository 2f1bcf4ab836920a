"""The tool's own waits are multiples of support/timescale.FACTOR, which only the tests change
(tests/fixtures/timescale.py): in their own process, and in a command they start through a
sitecustomize. The package reads no setting for it."""

import subprocess
import sys

import pytest

from overbrainer.config.envmap import overlay
from overbrainer.runpod.waits import Timing
from overbrainer.support import timescale
from overbrainer.support.timescale import scaled
from tests.fixtures.cli import clean_env
from tests.fixtures.timescale import scale, scaled_env


def test_the_factor_multiplies_the_tools_waits(monkeypatch):
    assert timescale.FACTOR == 1.0 and scaled(10) == 10
    scale(monkeypatch, 0.01)
    assert scaled(10) == pytest.approx(0.1)
    assert Timing.default().poll == pytest.approx(0.05) and Timing.default().watchdog_interval == pytest.approx(0.6)


def test_a_command_the_tests_start_gets_the_factor_and_no_variable_carries_it():
    probe = "import overbrainer.support.timescale as t, os; print(t.FACTOR, sorted(k for k in os.environ if k.startswith('OVERBRAINER_')))"
    got = subprocess.run([sys.executable, "-c", probe], env=clean_env(scaled_env(0.05)), capture_output=True,
                         text=True, timeout=60, check=True)
    assert got.stdout.split("\n")[0] == "0.05 []"
    plain = subprocess.run([sys.executable, "-c", probe], env=clean_env(), capture_output=True, text=True,
                           timeout=60, check=True)
    assert plain.stdout.split("\n")[0] == "1.0 []"


def test_the_former_testing_variables_are_configuration_keys_like_any_other():
    """OVERBRAINER_TIME_SCALE, OVERBRAINER_LLAMA_CPP_URL and OVERBRAINER_TEST_* were read outside
    the configuration, for the tests alone; now nothing is: each names a key, here unknown ones."""
    problems: list[str] = []
    got = overlay({"OVERBRAINER_TIME_SCALE": "0.01", "OVERBRAINER_TEST_CACHE": "/tmp/x",
                   "OVERBRAINER_LLAMA_CPP_URL": "http://127.0.0.1:1/a"}, problems)
    assert problems == [] and sorted(got) == ["llama_cpp_url", "test_cache", "time_scale"]


def test_the_factor_and_a_missing_extra_combine_in_one_command(tmp_path):
    """Python runs one sitecustomize; each fixture's runs the next (tests/fixtures/site.py), and
    each goes in front of the PYTHONPATH the command already has, whichever comes last."""
    from tests.fixtures.missing import without

    probe = ("import overbrainer.support.timescale as t\ntry:\n    import yaml\nexcept ModuleNotFoundError:\n"
             "    yaml = None\nprint(t.FACTOR, yaml is None)")
    for env in (without(tmp_path, "yaml", env=scaled_env(0.05)), scaled_env(0.05, env=without(tmp_path, "yaml"))):
        got = subprocess.run([sys.executable, "-c", probe], env=clean_env(env), capture_output=True, text=True,
                             timeout=60)
        assert got.stdout.split("\n")[0] == "0.05 True", got.stderr
