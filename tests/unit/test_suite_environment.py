"""The suite stands apart from the caller's shell (its variables, and a SIGHUP ignored by `nohup`):
a developer who followed the Quick start still
has `OVERBRAINER_PROVIDERS__LLM__BASE_URL` (and maybe VAULT_* or HF_* variables) exported when
running the tests, and no test may see them (tests/conftest.py scrubs them once, before any test)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.fixtures.cli import clean_env, loopback_direct, scrub_environ

ROOT = Path(__file__).resolve().parents[2]

# What a caller's shell may hold: the Quick start's provider URL, a Vault, a Hub token.
CALLERS = {"OVERBRAINER_PROVIDERS__LLM__BASE_URL": "http://127.0.0.1:8080/v1",
           "OVERBRAINER_PIPELINE__CONCURRENCY": "0",
           "VAULT_ADDR": "http://127.0.0.1:1", "VAULT_TOKEN": "caller-token",
           "HF_TOKEN": "hf_caller", "HF_HUB_OFFLINE": "1"}

PROJECT = """
[project]
name = "demo"

[[topics]]
name = "ownership"
subtopics = 1
questions_per_subtopic = 1

[providers.local]
protocol = "openai"

[roles]
generator = { provider = "local", model = "m1" }
parent = { provider = "local", model = "m2" }
"""


def test_no_variable_of_the_caller_reaches_the_tests(tmp_path):
    from overbrainer.config.load import load_config

    leaked = [k for k in os.environ if k.startswith(("OVERBRAINER_", "VAULT_", "HF_"))]
    assert leaked == []
    # What failed before: a configuration loaded from os.environ picked up the caller's
    # provider URL (`missing field providers.llm.protocol`).
    (tmp_path / "overbrainer.toml").write_text(PROJECT)
    config = load_config(tmp_path)
    assert sorted(config.providers) == ["local"] and config.pipeline.concurrency == 8


def test_sighup_is_at_its_default_action():
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL


def _pytest(*args: str, test: str = "test_no_variable_of_the_caller_reaches_the_tests",
            preexec=None) -> subprocess.CompletedProcess:
    env = {**os.environ, **CALLERS, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           *args, f"{Path(__file__).relative_to(ROOT)}::{test}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, preexec_fn=preexec)


def test_a_session_started_from_a_shell_with_such_variables_passes():
    done = _pytest()
    assert done.returncode == 0, done.stdout + done.stderr
    # The same test without the suite's conftest sees them, and fails as the suite used to.
    bare = _pytest("--noconftest")
    assert bare.returncode == 1
    assert "OVERBRAINER_PROVIDERS__LLM__BASE_URL" in bare.stdout


def test_a_session_started_under_nohup_sends_real_hangups():
    """`nohup pytest` starts the suite with SIGHUP ignored; the commands the tests start would
    inherit that, and every test of a SIGHUP's exit code 129 would fail."""
    def ignore_hangup():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    done = _pytest(test="test_sighup_is_at_its_default_action", preexec=ignore_hangup)
    assert done.returncode == 0, done.stdout + done.stderr
    bare = _pytest("--noconftest", test="test_sighup_is_at_its_default_action", preexec=ignore_hangup)
    assert bare.returncode == 1


def test_a_callers_proxy_never_carries_requests_to_the_fakes(monkeypatch):
    from overbrainer.support.http import session

    environ = {"HTTPS_PROXY": "http://proxy.invalid:3128", "no_proxy": "corp.example"}
    loopback_direct(environ)
    loopback_direct(environ)  # idempotent
    assert environ["no_proxy"] == "corp.example,127.0.0.1,localhost,::1"
    assert environ["NO_PROXY"] == "127.0.0.1,localhost,::1"
    # This process (tests/conftest.py did the same): a proxy set now spares the fakes.
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert session("http://127.0.0.1:9/v1").proxies == {}
    assert session("http://example.org/v1").proxies.get("http") == "http://proxy.invalid:3128"


def test_scrub_removes_every_overbrainer_variable_and_clean_env_drops_hf(monkeypatch):
    environ = {**CALLERS, "OVERBRAINER_TEST_CACHE": "/tmp/cache", "XDG_CACHE_HOME": "/tmp/cache", "PATH": "/bin"}
    assert sorted(scrub_environ(environ)) == sorted([*CALLERS, "OVERBRAINER_TEST_CACHE"])
    assert environ == {"XDG_CACHE_HOME": "/tmp/cache", "PATH": "/bin"}
    monkeypatch.setenv("HF_HOME", "/somewhere")
    monkeypatch.setenv("NO_COLOR", "1")
    env = clean_env({"HF_TOKEN": "given by the test"})
    assert "HF_HOME" not in env and "NO_COLOR" not in env and env["HF_TOKEN"] == "given by the test"
