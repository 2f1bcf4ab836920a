"""A stage at concurrency 64 under a 1 GB address-space limit (`ulimit -v`): glibc's per-thread
malloc arenas and 8 MB thread stacks reserve about 1.5 GB, so without support/address_space.py
the workers fail to start ("can't start new thread"); with it the stage runs as without a limit."""

from __future__ import annotations

import resource
import subprocess
import sys

from tests.fixtures.cli import clean_env

LIMIT = 1 << 30


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def test_answers_at_concurrency_64_run_under_a_1_gb_ulimit_v(project, fake_provider):
    project.write(topics=2, subtopics=4, questions=10, pipeline={"concurrency": 64})
    for stage in ("subtopics", "questions", "answers"):
        r = subprocess.run([sys.executable, "-m", "overbrainer", "-C", str(project.dir), stage],
                           env=clean_env(project.env), capture_output=True, text=True, timeout=120,
                           preexec_fn=_limited)
        assert r.returncode == 0, r.stderr
        assert "can't start new thread" not in r.stderr
    assert len(project.records("answers")) == 80
