"""scripts/bench_startup.sh: the `--help` part (the config part needs `init` and `config check`)."""

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_startup.sh"


def test_bench_startup_prints_the_ratio_of_help_to_a_bare_interpreter():
    r = subprocess.run(["bash", str(SCRIPT), "--help-only", "-n", "3"], capture_output=True, text=True,
                       timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable,
                                         "OVERBRAINER": f"{sys.executable} -m overbrainer"})
    assert r.returncode in (0, 1), r.stderr
    lines = r.stdout.splitlines()
    assert re.fullmatch(r"python3 -c pass: [\d.]+ ms \(median of 3\)", lines[0])
    m = re.fullmatch(r"overbrainer --help: [\d.]+ ms, ([\d.]+)x", lines[1])
    assert m, r.stdout
    ratio = float(m.group(1))
    assert (r.returncode == 0) == (ratio < 3)
    assert ratio < 6, "far above the 3x target"


def test_bench_startup_rejects_unknown_arguments():
    r = subprocess.run(["bash", str(SCRIPT), "--nope"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown argument --nope" in r.stderr
