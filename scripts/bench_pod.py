"""Runpod benchmark: what a run's pod costs beyond its job, and how hard following it hits the API.

Against the fake Runpod of the tests (tests/fixtures/runpod_server.py, real pods: the package's
bootstrap, sshd and watchdog run in a namespace) with a 1 s boot, and the fake axolotl, it runs
`overbrainer --json train` on a runpod target twice. OVERBRAINER_TIME_SCALE (default 0.01) scales
the tool's own waits; the boot is the fake's and is not scaled.

1. A short job (the fake axolotl sleeps 2 s then trains): the phases from the `--json` events on
   stderr, stamped as they arrive (create = POST /pods → created, reach + verdict → ready,
   upload → job running, job → exited, retrieve → deleting, delete → the confirming 404), and
   the billed overhead = seconds from POST /pods to the confirmed delete minus the job's own
   seconds. Target: ≤ boot + 10 s.
2. A long job (BENCH_POD_JOB_SECS, default 60): the API calls per minute while the job runs,
   from the fake's call log (account key, and the pod-scoped key of the watchdog). Target: ≤ 6.

Prints the numbers and exits 1 when a target is missed. Needs root (the fake's pods).
Usage: PYTHONPATH=. python3 scripts/bench_pod.py
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures.axolotl import FakeAxolotl  # noqa: E402
from tests.fixtures.cli import clean_env  # noqa: E402
from tests.fixtures.runpod_server import FakeRunpod  # noqa: E402
from tests.integration.test_runpod_train import PodProject  # noqa: E402

BOOT = 1.0
MAX_OVERHEAD = BOOT + 10.0
MAX_CALLS_PER_MINUTE = 6.0
PHASES = ("create", "reach + verdict", "upload", "job", "retrieve", "delete")


def run_stamped(p: PodProject, *args: str) -> tuple[int, list[tuple[float, dict]]]:
    """`overbrainer --json ARGS`: its exit code and its stderr events, each with the monotonic
    time it arrived."""
    import subprocess

    proc = subprocess.Popen(p.args("--json", *args), env=clean_env(p.env, p.home), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    events: list[tuple[float, dict]] = []

    def read() -> None:
        for line in proc.stderr:
            try:
                events.append((time.monotonic(), json.loads(line)))
            except ValueError:
                pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code = proc.wait(timeout=600)
    reader.join(timeout=10)
    return code, events


def first(events, **match) -> float:
    for at, ev in events:
        if all(ev.get(k) == v for k, v in match.items()):
            return at
    raise SystemExit(f"bench_pod: no event {match} in the run's output")


def train(root: Path, fake: FakeRunpod, delay: float) -> tuple[PodProject, list[tuple[float, dict]]]:
    axolotl = FakeAxolotl(root / "axolotl")
    axolotl.set_mode("ok", delay=delay)
    p = PodProject(root, axolotl, fake)
    p.env["OVERBRAINER_TIME_SCALE"] = os.environ.get("OVERBRAINER_TIME_SCALE", "0.01")
    code, events = run_stamped(p, "train")
    if code != 0:
        raise SystemExit(f"bench_pod: `overbrainer train` exited {code}")
    return p, events


def phases(fake: FakeRunpod, events) -> dict[str, float]:
    [post] = fake.calls_to("POST", "/pods")
    pod_id = next(ev["pod_id"] for _, ev in events if ev.get("phase") == "created")
    [delete] = [c for c in fake.calls_to("DELETE", f"/pods/{pod_id}") if c.key == "account"]
    confirm = next(c.at for c in fake.calls_to("GET", f"/pods/{pod_id}") if c.at >= delete.at and c.status == 404)
    marks = [post.at, first(events, phase="created"), first(events, phase="ready"),
             first(events, event="job_status", status="running"), first(events, event="job_status", status="exited"),
             first(events, phase="deleting"), confirm]
    out = {name: marks[i + 1] - marks[i] for i, name in enumerate(PHASES)}
    out["total"] = confirm - post.at
    out["overhead"] = out["total"] - out["job"]
    return out


def main() -> int:
    os.makedirs("/run/sshd", exist_ok=True)
    job_secs = float(os.environ.get("BENCH_POD_JOB_SECS", "60"))
    tmp = Path(tempfile.mkdtemp(prefix="bench_pod-"))
    ok = True
    try:
        fake = FakeRunpod(tmp / "fake").start()
        try:
            fake.pods.boot_delay = BOOT
            _, events = train(tmp / "short", fake, 2.0)
            got = phases(fake, events)
            for name in PHASES:
                print(f"{name:16s} {got[name]:7.2f} s")
            print(f"{'POST → deleted':16s} {got['total']:7.2f} s")
            miss = got["overhead"] > MAX_OVERHEAD
            ok &= not miss
            print(f"billed overhead  {got['overhead']:7.2f} s (target ≤ {MAX_OVERHEAD:.0f} s with a {BOOT:.0f} s boot)"
                  + ("  MISSED" if miss else ""))
        finally:
            left = fake.stop()
        fake = FakeRunpod(tmp / "fake2").start()
        try:
            fake.pods.boot_delay = BOOT
            _, events = train(tmp / "long", fake, job_secs)
            start = first(events, event="job_status", status="running")
            end = first(events, event="job_status", status="exited")
            account = fake.calls_per_minute(start, end, key="account")
            pod = fake.calls_per_minute(start, end, key="pod")
            miss = account + pod > MAX_CALLS_PER_MINUTE
            ok &= not miss
            print(f"following a {end - start:.0f} s job: {account:.1f} API calls/min with the account key, "
                  f"{pod:.1f} with the pod's key (target ≤ {MAX_CALLS_PER_MINUTE:.0f} in all)"
                  + ("  MISSED" if miss else ""))
        finally:
            left += fake.stop()
        if left:
            print(f"bench_pod: pod processes survived: {left}")
            ok = False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
