"""Runpod benchmark: what a run's pod costs beyond its job, and how hard following it hits the API.

Against the fake Runpod of the tests (tests/fixtures/runpod_server.py, real pods: the package's
bootstrap, sshd and watchdog run in a namespace) with a 1 s boot, and the fake axolotl, it runs
`overbrainer --json train` on a runpod target twice. BENCH_POD_TIME_SCALE (default 0.01) scales
the tool's own waits (tests/fixtures/timescale.py); the boot is the fake's and is not scaled.

1. A short job (the fake axolotl sleeps 2 s then trains): the phases from the `--json` events on
   stderr, stamped as they arrive (create = POST /pods → created, reach + verdict → ready,
   upload → job running, job → exited, retrieve → deleting, delete → the confirming 404), and
   the billed overhead = seconds from POST /pods to the confirmed delete minus the job's own
   seconds. Target: ≤ boot + 10 s.
2. A long job (BENCH_POD_JOB_SECS, default 60): the API calls per minute while the job runs,
   from the fake's call log (account key, and the pod-scoped key of the watchdog). Target: ≤ 6.

3. With `--side`, instead: the side jobs of a run trained on Runpod (SmolLM2-135M as its full
   fine-tune, the real llama.cpp of the test extra; both from the suite's cache, `python3 -m
   tests.fixtures.llama` fills it): `export RUN` (F16) on a new pod, then `compare` (one question)
   on another pod, then a `compare` of the same run without its GGUF, which exports first in the
   same pod. The same phases and billed overhead (no target: the job's own time is llama.cpp's),
   and the bytes sent (the upload lines).

4. With `--cluster`, instead: a 2-node Instant Cluster against one pod, each running the same
   short job (the fake axolotl, `ok`) through `overbrainer --json train`, alternately, 3 times
   each: the seconds from the command's start to its first training step (the first `step`
   event: provisioning, every member reached, the run sent to each, the job started on each).
   Prints the medians and their ratio, the baseline being the single pod measured in the same
   run. Target: ≤ 1.2.

Prints the numbers and exits 1 when a target is missed. Needs root (the fake's pods).
Usage: PYTHONPATH=. python3 scripts/bench_pod.py [--side | --cluster]
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
from tests.fixtures.timescale import scaled_env  # noqa: E402
from tests.integration.test_runpod_train import PodProject  # noqa: E402

BOOT = 1.0
TIME_SCALE = float(os.environ.get("BENCH_POD_TIME_SCALE", "0.01"))
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
    p.env.update(scaled_env(TIME_SCALE))
    code, events = run_stamped(p, "train")
    if code != 0:
        raise SystemExit(f"bench_pod: `overbrainer train` exited {code}")
    return p, events


def phases(fake: FakeRunpod, events) -> dict[str, float]:
    [_] = fake.calls_to("POST", "/pods")
    return phases_of(fake, events, 0)


def side_project(root: Path, fake: FakeRunpod, provider_url: str):
    """A project whose run was trained on the fake's target `gpu` (its results home, no GGUF)."""
    from tests.fixtures.llama import cache_dir, prepare_hf, prepare_llama_cpp
    from tests.fixtures.project import Project
    from tests.integration.test_runpod_side_jobs import pod_run

    project = Project(root / "proj", provider_url).write()
    fake.pods.image_paths = sorted({str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix, cache_dir())
                                    if str(Path(p).resolve()).startswith("/root/")})
    run_dir = pod_run(project, fake, prepare_hf(), prepare_llama_cpp(), questions=1)
    project.env.update(scaled_env(TIME_SCALE))
    return project, run_dir


def run_side(project, *args: str) -> tuple[list[tuple[float, dict]], list[str]]:
    """`overbrainer --json ARGS` in `project`: its stamped events and its upload lines."""
    import subprocess

    argv = [sys.executable, "-m", "overbrainer", "--json", "-C", str(project.dir), *args]
    proc = subprocess.Popen(argv, env=clean_env(project.env, project.dir.parent / "home"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    events: list[tuple[float, dict]] = []
    for line in proc.stderr:
        try:
            events.append((time.monotonic(), json.loads(line)))
        except ValueError:
            pass
    if proc.wait(timeout=900) != 0:
        raise SystemExit(f"bench_pod: `overbrainer {' '.join(args)}` exited {proc.returncode}: {events[-1:]}")
    sent = [str(ev.get("message")) for _, ev in events if "sending" in str(ev.get("message")) or
            "sent " in str(ev.get("message")) or "uploading" in str(ev.get("message"))]
    return events, sent


def side_main(tmp: Path) -> bool:
    from tests.fixtures.provider import FakeProvider
    from tests.integration.test_cli_compare_job import judge

    (tmp / "proj-home").mkdir(parents=True, exist_ok=True)
    provider = FakeProvider().start()
    provider.responder = judge
    fake = FakeRunpod(tmp / "fake").start()
    try:
        fake.pods.boot_delay = BOOT
        project, run_dir = side_project(tmp, fake, provider.url)
        for label, args in (("export (F16)", ("export", run_dir.name)),
                            ("compare, GGUF sent", ("compare", "--run", run_dir.name)),
                            ("compare, exports first", ("compare", "--run", run_dir.name))):
            if label == "compare, exports first":
                for f in (run_dir / "output" / "gguf").iterdir():
                    f.unlink()
            before = len(fake.calls_to("POST", "/pods"))
            events, sent = run_side(project, *args)
            got = phases_of(fake, events, before)
            print(f"{label}: " + ", ".join(f"{n} {got[n]:.1f} s" for n in PHASES)
                  + f"; POST → deleted {got['total']:.1f} s, billed overhead {got['overhead']:.1f} s")
            for line in sent:
                print(f"    {line}")
    finally:
        left = fake.stop()
        provider.stop()
    if left:
        print(f"bench_pod: pod processes survived: {left}")
    return not left


def phases_of(fake: FakeRunpod, events, before: int) -> dict[str, float]:
    """`phases` for the pod created after the first `before` creates."""
    post = fake.calls_to("POST", "/pods")[before]
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


MAX_CLUSTER_RATIO = 1.2


def to_first_step(root: Path, fake: FakeRunpod, nodes: int) -> float:
    """Seconds from `train`'s start to its first step on a target of `nodes` pods."""
    axolotl = FakeAxolotl(root / "axolotl")
    p = PodProject(root, axolotl, fake, gpu_types='["NVIDIA A100 80GB PCIe"]', nodes=str(nodes))
    p.env["OVERBRAINER_TIME_SCALE"] = os.environ.get("OVERBRAINER_TIME_SCALE", "0.01")
    started = time.monotonic()
    code, events = run_stamped(p, "train")
    if code != 0:
        raise SystemExit(f"bench_pod: `overbrainer train` on {nodes} pod(s) exited {code}")
    return next(at for at, ev in events if ev.get("step") == 1) - started


def cluster_main(tmp: Path) -> bool:
    fake = FakeRunpod(tmp / "fake").start()
    times: dict[int, list[float]] = {1: [], 2: []}
    try:
        fake.pods.boot_delay = BOOT
        for i in range(3):
            for nodes in (1, 2):
                times[nodes].append(to_first_step(tmp / f"n{nodes}-{i}", fake, nodes))
    finally:
        left = fake.stop()
    pod, cluster = sorted(times[1])[1], sorted(times[2])[1]
    ratio = cluster / pod
    print(f"start → first step: one pod {pod:.2f} s, a 2-node cluster {cluster:.2f} s (medians of 3; "
          f"pod {', '.join(f'{t:.2f}' for t in times[1])}; cluster {', '.join(f'{t:.2f}' for t in times[2])})")
    print(f"ratio {ratio:.2f} (target ≤ {MAX_CLUSTER_RATIO})" + ("  MISSED" if ratio > MAX_CLUSTER_RATIO else ""))
    if left:
        print(f"bench_pod: pod processes survived: {left}")
    return ratio <= MAX_CLUSTER_RATIO and not left


def main() -> int:
    os.makedirs("/run/sshd", exist_ok=True)
    for flag, mode in (("--cluster", cluster_main), ("--side", side_main)):
        if flag in sys.argv[1:]:
            tmp = Path(tempfile.mkdtemp(prefix="bench_pod-"))
            try:
                return 0 if mode(tmp) else 1
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
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
