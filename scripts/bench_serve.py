#!/usr/bin/env python3
"""Served-provider benchmark: a parent on rented pods (docs/serving.md), on the fakes.

The fake Runpod of the tests (tests/fixtures/runpod_server.py: real pods, the package's
bootstrap, sshd and watchdog in a namespace, the engine's port behind the fake's HTTP proxy), whose
llama.cpp image runs this machine's llama-server on SmolLM2-135M (the suite's cache: `python3 -m
tests.fixtures.llama` fills it), one CPU thread per engine. In-process, through the stages' own
path: a StageContext's client of `roles.parent` on the served provider `rented` (its first use
brings the pods up; the context's close deletes them). The same chats (`--chats`, 24 output
tokens at most, the engine's batch full: `parallel` per replica) are sent each time:

1. straight to a llama-server started on this machine with the same flags (the baseline), after
   timing how long it takes to be ready (`/health` 200 and the model on `/v1/models`);
2. through the serve path with 1 replica, then with 2, each timed from the first request to the
   last answer (pods up before), and boot to first answer timed from the client's first use (the
   create) to the first chat's answer.

Printed: output tokens per second of each, the ratios 2 replicas / 1 (target ≥ 1.8: needs a
free core per engine, so a busy or 2-core machine may miss it, which the script says), serve
path / straight (target ≤ 1.05 in time per token), and boot to first answer against the
engine's own: its start to ready, plus the same first chat straight (target ≤ + 2 s). Exits 1
when a target is missed (the 2-replica one only with at least 4 CPUs), or any pod is still
billing at the end. Needs root (the fake's pods).

Usage: PYTHONPATH=. python3 scripts/bench_serve.py [--chats 48] [--parallel 2]
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from overbrainer.config.load import load_config  # noqa: E402
from overbrainer.export.llama_cpp import cpu_env  # noqa: E402
from overbrainer.llm.types import ChatRequest  # noqa: E402
from overbrainer.pipeline.context import StageContext  # noqa: E402
from overbrainer.support import timescale  # noqa: E402
from tests.fixtures.llama import THREADS_ENV, free_port, prepare_gguf, prepare_llama_cpp  # noqa: E402
from tests.fixtures.runpod_server import FakeRunpod  # noqa: E402
from tests.fixtures.serve import TIME_SCALE, llama_image, serve_env, serve_toml  # noqa: E402

timescale.FACTOR = TIME_SCALE  # the tool's own waits (polls, the watchdog's tick), as in the tests

MAX_TOKENS = 24
REPLICA_GAIN = 1.8
PATH_OVERHEAD = 1.05
BOOT_MARGIN = 2.0


def project(root: Path, gguf: Path, replicas: int, parallel: int) -> Path:
    root.mkdir(parents=True)
    toml = ['[project]', 'name = "bench"', '', '[[topics]]', 'name = "t"', 'subtopics = 1',
            'questions_per_subtopic = 1', '', '[providers.fake]', 'protocol = "openai"', '',
            '[roles]', 'generator = { provider = "fake", model = "g" }',
            f'parent = {{ provider = "rented", model = "{gguf}", max_tokens = {MAX_TOKENS} }}', '',
            '[pipeline]', f'concurrency = {replicas * parallel}', '']
    (root / "overbrainer.toml").write_text("\n".join(toml) + serve_toml(gguf, replicas=replicas, parallel=parallel))
    return root


def questions(n: int) -> list[ChatRequest]:
    topics = ["rivers", "bread", "clocks", "bees", "glass", "salt", "maps", "rain"]
    return [ChatRequest(f"In two sentences, why do {topics[i % len(topics)]} matter? ({i})") for i in range(n)]


def send_all(client, chats: list[ChatRequest], threads: int) -> tuple[float, int]:
    """(seconds from the first request to the last answer, output tokens)."""
    started = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        answers = list(pool.map(client.chat, chats))
    return time.monotonic() - started, sum(a.usage.output_tokens for a in answers)


def ready_secs(base: str, model: str, proc: subprocess.Popen) -> float:
    import requests

    started = time.monotonic()
    while True:
        assert proc.poll() is None, "llama-server exited"
        try:
            if requests.get(base + "/health", timeout=5).status_code == 200:
                models = requests.get(base + "/v1/models", timeout=5).json()
                if any(m.get("id") == model for m in models.get("data", [])):
                    return time.monotonic() - started
        except requests.RequestException:
            pass
        time.sleep(0.05)


def straight(llama: Path, gguf: Path, parallel: int, chats: list[ChatRequest],
             tmp: Path) -> tuple[float, float, float, int]:
    """(ready seconds, start to first answer, seconds, output tokens) of a llama-server started here."""
    port = free_port()
    env = {**os.environ, THREADS_ENV: "1", **cpu_env()}
    cmd = [str(llama / "bin" / "llama-server"), "-m", str(gguf), "--alias", str(gguf), "--host", "127.0.0.1",
           "--port", str(port), "-ngl", "999", "--no-webui", "--parallel", str(parallel),
           "--ctx-size", str(1024 * parallel)]
    with open(tmp / "straight.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        ready = ready_secs(base, str(gguf), proc)
        root = project(tmp / "straight", gguf, 1, parallel)
        text = (root / "overbrainer.toml").read_text()
        text = text.replace('provider = "rented"', 'provider = "direct"')
        text += '\n[providers.direct]\nprotocol = "openai"\n'
        (root / "overbrainer.toml").write_text(text)
        config = load_config(root, {"OVERBRAINER_PROVIDERS__DIRECT__BASE_URL": base + "/v1"})
        with StageContext(root, config) as ctx:
            client = ctx.client("parent")
            started = time.monotonic()
            client.chat(chats[0])
            first = ready + time.monotonic() - started
            secs, tokens = send_all(client, chats, parallel)
        return ready, first, secs, tokens
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def served(fake: FakeRunpod, gguf: Path, replicas: int, parallel: int, chats: list[ChatRequest],
           tmp: Path) -> tuple[float, float, int]:
    """(boot to first answer, seconds, output tokens) through the serve path."""
    root = project(tmp / f"served{replicas}", gguf, replicas, parallel)
    config = load_config(root, serve_env(fake))
    with StageContext(root, config) as ctx:
        started = time.monotonic()
        client = ctx.client("parent")
        client.chat(chats[0])
        boot = time.monotonic() - started
        secs, tokens = send_all(client, chats, replicas * parallel)
    return boot, secs, tokens


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chats", type=int, default=48)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--verbose", action="store_true", help="the tool's log on stderr")
    args = ap.parse_args()
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s.%(msecs)03d %(name)s %(message)s",
                            datefmt="%H:%M:%S")
    llama, gguf = prepare_llama_cpp(), prepare_gguf()
    chats = questions(args.chats)
    failed = []
    with tempfile.TemporaryDirectory(prefix="bench_serve_") as d:
        tmp = Path(d)
        fake = FakeRunpod(tmp / "fake").start()
        try:
            llama_image(fake, llama, gguf)
            ready, first, s0, t0 = straight(llama, gguf, args.parallel, chats, tmp)
            boot, s1, t1 = served(fake, gguf, 1, args.parallel, chats, tmp)
            _, s2, t2 = served(fake, gguf, 2, args.parallel, chats, tmp)
            billing = fake.billing()
        finally:
            left = fake.stop()
    rate = [t / s for t, s in ((t0, s0), (t1, s1), (t2, s2))]
    gain, overhead = rate[2] / rate[1], s1 / s0 * (t0 / t1 if t1 else 1.0)
    cpus = os.cpu_count() or 1
    print(f"chats: {args.chats}, at most {MAX_TOKENS} output tokens each, {args.parallel} per replica; {cpus} CPUs")
    print(f"straight to llama-server: ready in {ready:.2f} s, first answer at {first:.2f} s; {t0} tokens in "
          f"{s0:.2f} s = {rate[0]:.1f} tok/s")
    print(f"serve path, 1 replica:    boot to first answer {boot:.2f} s; {t1} tokens in {s1:.2f} s = "
          f"{rate[1]:.1f} tok/s")
    print(f"serve path, 2 replicas:   {t2} tokens in {s2:.2f} s = {rate[2]:.1f} tok/s")
    print(f"2 replicas / 1: {gain:.2f}x (target >= {REPLICA_GAIN})")
    print(f"serve path / straight, time per token: {overhead:.3f} (target <= {PATH_OVERHEAD})")
    print(f"boot to first answer, serve path - straight: {boot - first:+.2f} s (target <= +{BOOT_MARGIN:g} s)")
    if gain < REPLICA_GAIN:
        if cpus >= 4:
            failed.append("replica gain")
        else:
            print("  (fewer than 4 CPUs: two engines share the cores, the replica target is not judged)")
    if overhead > PATH_OVERHEAD:
        failed.append("serve path overhead")
    if boot - first > BOOT_MARGIN:
        failed.append("boot to first answer")
    if billing or left:
        failed.append(f"pods left billing: {billing} {left}")
    if failed:
        print("missed: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
