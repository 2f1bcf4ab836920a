"""scripts/bench_startup.sh runs and reports (on this interpreter, without building a venv)."""

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_startup.sh"


def test_bench_startup_reports_medians_against_the_click_floor(tmp_path):
    """The report's shape and its verdict (the speed itself is the script's business, not a test's)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SCRIPT.parents[1])}
    r = subprocess.run(["bash", str(SCRIPT), "--python", sys.executable, "-n", "1"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode in (0, 1), r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"interpreter: {sys.executable}") and lines[1].startswith("medians of 1 alternated rounds")
    names = [re.match(r"  (.+?)\s+wall +[\d.]+ ms +[\d.]+x floor   CPU +[\d.]+ ms +[\d.]+x floor$", line).group(1) for line in lines[2:6]]
    assert names == ["python -c pass", "python -c 'import click'", "overbrainer --help", "overbrainer config check"]
    missed = [line for line in lines if line.startswith("MISSED ")]
    assert (r.returncode == 1) == bool(missed)
    assert lines[-1] == ("all targets met" if not missed else f"{len(missed)} target(s) missed")


def test_bench_startup_rejects_unknown_arguments():
    r = subprocess.run(["bash", str(SCRIPT), "--nope"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown argument --nope" in r.stderr
