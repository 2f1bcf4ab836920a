"""Textual (and the TUI) are imported only by `overbrainer tui`: every other command starts as
before (scripts/bench_startup.sh measures it)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.fixtures.cli import clean_env

PROBE = """
import sys
from overbrainer.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write("\\nLOADED " + str(sorted(m for m in sys.modules
                                          if m.split(".")[0] in ("textual", "rich") or m.startswith("overbrainer.tui"))))
"""


@pytest.mark.parametrize("args", [["--help"], ["tui", "--help"], ["config", "check"]])
def test_no_other_command_imports_textual(args, project):
    r = subprocess.run([sys.executable, "-c", PROBE, "-C", str(project.dir), *args], capture_output=True,
                       text=True, env=clean_env(project.env), timeout=60)
    assert r.stderr.strip().splitlines()[-1] == "LOADED []", r.stderr
    assert ("Usage:" in r.stdout) if "--help" in args else ("project.name = demo" in r.stdout)
