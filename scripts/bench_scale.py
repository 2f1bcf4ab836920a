#!/usr/bin/env python3
"""Scale benchmark: the whole `overbrainer run` (subtopics → questions → answers → split; no
[training] section) at 5k and 50k answers, then a rerun with nothing to do.

The fake provider (tests/fixtures/provider.py) runs in a separate process, so its CPU does not
count; it answers with 10 ms latency and realistic, deterministic replies
(tests/fixtures/provider_text.py: distinct questions of 60-160 characters, answers of 1-2 KB with
~0.5 KB of reasoning; the same prompt always gets the same reply). overbrainer runs as cron runs
it: `python -m overbrainer -C PROJECT run`, stdout and stderr to files, `[pipeline] concurrency
= 64`, the parent's reasoning on.

Shape: 10 topics x S subtopics x 10 questions per subtopic, S = answers / 100 (5k: 50 subtopics
per topic, 50k: 500, 500k: 5000). The same shape at every size, scaled in subtopics.

Per size: wall, CPU (user + sys of the overbrainer process and its children, from os.wait4) and
CPU per answer, peak RSS (ru_maxrss) of the run; the same of the rerun (the second `run`, nothing
to do). Then each size over the smallest, against the targets of issue 26 (given for 50k over
5k): peak RSS <= 1.3x and <= 200 MB (at sizes up to 50k), rerun wall <= 2x. Exits 1 when a target
is missed (or a run fails, or does not make every answer).

--big: 500k answers, once unlimited and once under a 1 GB memory limit, in two fresh projects;
the data files of the two are compared: subtopics, questions and answers as multisets of lines
(their order is completion order), train.jsonl and eval.jsonl byte for byte. Targets: the
limited run completes, and its files equal the unlimited run's. How memory is limited
(--limit-mode):
- `cgroup`: a cgroup v2 group of its own (/sys/fs/cgroup/overbrainer-bench-PID) with memory.max =
  1 GB and no swap, the child moved into it before exec: the kernel's own limit, what a container
  or systemd's MemoryMax enforces. Needs root and the v2 `memory` controller;
- `rss`: the child's resident memory (VmRSS) read every 50 ms, the child killed above 1 GB, and its
  kernel-kept peak (ru_maxrss) checked after the run: the same bound, enforced from outside;
- `as`: RLIMIT_AS (`ulimit -v`) set before exec. Address space, not memory: every thread's stack
  and each malloc arena's 64 MB reservation count; overbrainer fits its threads under such a limit
  (support/address_space.py: 1 MB stacks, 2 arenas, only when a limit is set), so this is the
  strictest of the three;
- `auto` (default): `as`, the `ulimit -v` a minimal server or a cron job's shell sets. The output
  says which was used.

Usage: python3 scripts/bench_scale.py [--sizes 5000,50000] [--big] [--limit-mode auto|cgroup|rss|as]
       [--big-size 500000] [--latency 0.01] [--concurrency 64] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixtures.provider_process import ProviderProcess  # noqa: E402

TOPICS, QUESTIONS = 10, 10  # the shape: TOPICS x (n / 100) subtopics x QUESTIONS
RSS_RATIO, RSS_MAX_MB, RERUN_RATIO = 1.3, 200.0, 2.0
RSS_MAX_UP_TO = 50_000  # the 200 MB target holds up to this size
BIG, LIMIT_BYTES = 500_000, 1 << 30

# Realistic, deterministic replies; hundreds of thousands of requests: the fake keeps none.
SETUP = """
from tests.fixtures.provider_text import realistic
fake.responder = realistic
fake.record = False
"""


def make_project(root: Path, answers: int, concurrency: int) -> Path:
    subtopics = answers // (TOPICS * QUESTIONS)
    root.mkdir(parents=True)
    topics = "".join(f"""
[[topics]]
name = "topic{t:02d}"
description = "Systems topic number {t}"
subtopics = {subtopics}
questions_per_subtopic = {QUESTIONS}
""" for t in range(TOPICS))
    (root / "overbrainer.toml").write_text(f"""[project]
name = "scale"
{topics}
[providers.fake]
protocol = "openai"

[roles]
generator = {{ provider = "fake", model = "gen" }}
parent = {{ provider = "fake", model = "parent", reasoning = true }}

[pipeline]
concurrency = {concurrency}
max_retries = 2
""")
    return root


def child_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OVERBRAINER_", "VAULT_", "HF_"))}
    env.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", OVERBRAINER_PROVIDERS__FAKE__BASE_URL=url,
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    return env


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_available() -> bool:
    """Root, and the cgroup v2 `memory` controller enabled for the root's children."""
    try:
        return os.geteuid() == 0 and "memory" in (CGROUP_ROOT / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


class Limit:
    """A memory limit on one child (see the module docstring's --limit-mode): `preexec` runs in the
    child before exec, `watch(pid)` after it started, `close()` once it was waited for;
    `note` says what happened (a kill, the cgroup's OOM kills)."""

    def __init__(self, mode: str | None, limit: int = LIMIT_BYTES):
        self.mode, self.limit, self.note = mode, limit, ""
        self._done, self._group = threading.Event(), None
        if mode == "cgroup":
            if not cgroup_available():
                raise SystemExit(f"--limit-mode cgroup: needs root and cgroup v2 with the memory controller "
                                 f"enabled in {CGROUP_ROOT / 'cgroup.subtree_control'}")
            self._group = CGROUP_ROOT / f"overbrainer-bench-{os.getpid()}"
            self._group.mkdir()
            (self._group / "memory.max").write_text(str(limit))
            if (self._group / "memory.swap.max").exists():
                (self._group / "memory.swap.max").write_text("0")

    def preexec(self) -> None:
        if self.mode == "as":
            resource.setrlimit(resource.RLIMIT_AS, (self.limit, self.limit))
        elif self.mode == "cgroup":
            (self._group / "cgroup.procs").write_text(str(os.getpid()))

    def watch(self, pid: int) -> None:
        if self.mode == "rss":
            threading.Thread(target=self._watch, args=(pid,), daemon=True).start()

    def _watch(self, pid: int) -> None:
        while not self._done.wait(0.05):
            rss = _rss_kb(pid)
            if rss * 1024 > self.limit:
                os.kill(pid, 9)
                self.note = f"killed at {rss / 1024:.0f} MB resident"
                return

    def close(self) -> None:
        self._done.set()
        if self._group is not None:
            events = (self._group / "memory.events").read_text().split()
            kills = events[events.index("oom_kill") + 1] if "oom_kill" in events else "?"
            self.note = f"cgroup memory.max {self.limit >> 20} MB, {kills} OOM kill(s)"
            self._group.rmdir()
            self._group = None


def run_overbrainer(project: Path, url: str, log: str, limit: Limit | None = None) -> dict:
    """One `overbrainer -C project run`: wall, CPU (user + sys), peak RSS (MB), exit code."""
    out = open(project.parent / f"{project.name}.{log}.stdout", "w")
    err = open(project.parent / f"{project.name}.{log}.stderr", "w")
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project), "run"],
                            env=child_env(url), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                            preexec_fn=limit.preexec if limit else None)
    if limit:
        limit.watch(proc.pid)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if limit:
        limit.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.close()
    err.close()
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024,
            "rc": proc.returncode, "stderr": err.name, "stdout": out.name}


def count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


def _failed(run: dict, what: str) -> str | None:
    if run["rc"] == 0:
        return None
    tail = Path(run["stderr"]).read_text(errors="replace").splitlines()[-5:]
    return f"{what} exited {run['rc']}: " + " | ".join(tail)


def measure(tmp: Path, server: ProviderProcess, n: int, concurrency: int) -> dict:
    project = make_project(tmp / f"p{n}", n, concurrency)
    first = run_overbrainer(project, server.url, "run")
    rerun = run_overbrainer(project, server.url, "rerun") if first["rc"] == 0 else None
    answers = project / "data" / "answers.jsonl"
    made = count_lines(answers) if answers.exists() else 0
    error = _failed(first, "run") or (rerun and _failed(rerun, "rerun"))
    if error is None and made != n:
        error = f"{made} answers written, not {n}"
    return {"n": n, "run": first, "rerun": rerun, "answers": made, "error": error, "project": project}


def _mark(ok: bool) -> str:
    return "OK" if ok else "MISSED"


def report_size(m: dict) -> None:
    r, rr = m["run"], m["rerun"]
    subtopics = m["n"] // (TOPICS * QUESTIONS)
    print(f"{m['n']:>7} answers ({TOPICS} topics x {subtopics} subtopics x {QUESTIONS} questions): "
          f"{m['answers']} written")
    print(f"    run   : wall {r['wall']:8.2f} s, CPU {r['cpu']:8.2f} s ({1000 * r['cpu'] / max(1, m['n']):.3f} "
          f"ms/answer), peak RSS {r['rss']:7.1f} MB")
    if rr is not None:
        print(f"    rerun : wall {rr['wall']:8.2f} s, CPU {rr['cpu']:8.2f} s, peak RSS {rr['rss']:7.1f} MB")
    if m["error"]:
        print(f"    FAILED: {m['error']}")


def compare_sizes(results: list[dict]) -> bool:
    """Each size over the smallest, against the targets; True when all are met."""
    ok = True
    base = results[0]
    for m in results:
        if m["n"] <= RSS_MAX_UP_TO:
            good = m["run"]["rss"] <= RSS_MAX_MB
            ok &= good
            print(f"peak RSS at {m['n']}: {m['run']['rss']:.1f} MB (target <= {RSS_MAX_MB:.0f} MB)  {_mark(good)}")
    for m in results[1:]:
        rss = m["run"]["rss"] / base["run"]["rss"]
        rerun = m["rerun"]["wall"] / base["rerun"]["wall"]
        ok &= rss <= RSS_RATIO and rerun <= RERUN_RATIO
        print(f"{m['n']} over {base['n']}: peak RSS {rss:.2f}x (target <= {RSS_RATIO}x)  {_mark(rss <= RSS_RATIO)}; "
              f"rerun wall {rerun:.2f}x (target <= {RERUN_RATIO}x)  {_mark(rerun <= RERUN_RATIO)}; "
              f"rerun peak RSS {m['rerun']['rss'] / base['rerun']['rss']:.2f}x; "
              f"CPU per answer {m['run']['cpu'] / m['n'] / (base['run']['cpu'] / base['n']):.2f}x")
    return ok


def multiset_digest(path: Path) -> tuple[int, str]:
    """(lines, an order-free digest: the sum of every line's sha256 modulo 2^256)."""
    total, n = 0, 0
    with open(path, "rb") as f:
        for line in f:
            total = (total + int.from_bytes(hashlib.sha256(line).digest(), "big")) % (1 << 256)
            n += 1
    return n, f"{total:064x}"


def file_digest(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return path.stat().st_size, h.hexdigest()


DATA = {"subtopics.jsonl": multiset_digest, "questions.jsonl": multiset_digest,
        "answers.jsonl": multiset_digest, "train.jsonl": file_digest, "eval.jsonl": file_digest}


def same_data(a: Path, b: Path) -> bool:
    ok = True
    for name, digest in DATA.items():
        da, db = digest(a / "data" / name), digest(b / "data" / name)
        how = "lines as a multiset" if digest is multiset_digest else "bytes"
        same = da == db
        ok &= same
        print(f"    {name:<16} ({how}): {'identical' if same else 'DIFFERENT'} ({da[0]} vs {db[0]} "
              f"{'lines' if digest is multiset_digest else 'bytes'})")
    return ok


LIMITS = {"cgroup": "a cgroup v2 memory.max", "rss": "resident memory watched, ru_maxrss checked",
          "as": "RLIMIT_AS, address space"}


def big(tmp: Path, server: ProviderProcess, n: int, concurrency: int, mode: str) -> bool:
    if mode == "auto":
        mode = "as"
    print(f"--big: {n} answers, unlimited, then under a 1 GB limit ({mode}: {LIMITS[mode]})")
    free = make_project(tmp / "big-free", n, concurrency)
    r = run_overbrainer(free, server.url, "run")
    print(f"    unlimited: rc {r['rc']}, wall {r['wall']:.1f} s, CPU {r['cpu']:.1f} s "
          f"({1000 * r['cpu'] / n:.3f} ms/answer), peak RSS {r['rss']:.1f} MB")
    limited = make_project(tmp / "big-limited", n, concurrency)
    limit = Limit(mode)
    lr = run_overbrainer(limited, server.url, "run", limit)
    print(f"    limited  : rc {lr['rc']}, wall {lr['wall']:.1f} s, CPU {lr['cpu']:.1f} s "
          f"({1000 * lr['cpu'] / n:.3f} ms/answer), peak RSS {lr['rss']:.1f} MB"
          + (f"; {limit.note}" if limit.note else ""))
    for run, what in ((r, "unlimited run"), (lr, "limited run")):
        if _failed(run, what):
            print(f"    FAILED: {_failed(run, what)}")
    made = [count_lines(p / "data" / "answers.jsonl") if (p / "data" / "answers.jsonl").exists() else 0
            for p in (free, limited)]
    print(f"    answers written: {made[0]} unlimited, {made[1]} limited (of {n})")
    ok = (r["rc"] == 0 and lr["rc"] == 0 and lr["rss"] * (1 << 20) <= LIMIT_BYTES
          and made[0] == n and made[1] == n)
    if ok:
        ok = same_data(free, limited)
    print(f"    {n} answers under 1 GB with the same records as unlimited: {_mark(ok)}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="5000,50000",
                        help=f"answer counts, each a multiple of {TOPICS * QUESTIONS} (default 5000,50000)")
    parser.add_argument("--big", action="store_true", help=f"also {BIG} answers unlimited and under a 1 GB limit")
    parser.add_argument("--big-size", type=int, default=BIG, help=f"the answers of --big ({BIG})")
    parser.add_argument("--limit-mode", choices=("auto", "cgroup", "rss", "as"), default="auto",
                        help="how --big limits memory (auto: as, i.e. ulimit -v)")
    parser.add_argument("--latency", type=float, default=0.01, help="the fake's latency in seconds (0.01)")
    parser.add_argument("--concurrency", type=int, default=64, help="[pipeline] concurrency (64)")
    parser.add_argument("--keep", type=Path, help="make the projects under this folder and keep them")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    if not sizes or any(n <= 0 or n % (TOPICS * QUESTIONS) for n in sizes + [args.big_size]):
        parser.error(f"--sizes: positive multiples of {TOPICS * QUESTIONS}")
    if args.big and args.limit_mode == "cgroup" and not cgroup_available():
        parser.error("--limit-mode cgroup: needs root and cgroup v2 with the memory controller enabled")
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=args.keep))
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs; "
          f"fake latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}")
    server = ProviderProcess(args.latency, SETUP)
    try:
        results = []
        for n in sizes:
            results.append(measure(tmp, server, n, args.concurrency))
            report_size(results[-1])
        ok = not any(m["error"] for m in results) and compare_sizes(results)
        if args.big:
            ok &= big(tmp, server, args.big_size, args.concurrency, args.limit_mode)
    finally:
        server.close()
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("all targets met" if ok else "target(s) MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
