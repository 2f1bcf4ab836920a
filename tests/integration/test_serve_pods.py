"""A served provider's pods through the real CLI (`serve up|ls|down`, `pod ls|rm`) on the fake
Runpod, whose pods are real process trees: llama-server serving SmolLM2 behind the fake's HTTP
proxy, the watchdog on its lease. After every test the fake lists no pod that bills."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.cli import clean_env, run_cli, signalled_when
from tests.fixtures.serve import serve_env, serve_toml

pytestmark = pytest.mark.ssh


def setup(project, fake, gguf: Path, **kw) -> None:
    project.write(topics=1, subtopics=1, questions=1)
    with (project.dir / "overbrainer.toml").open("a") as f:
        f.write("\n" + serve_toml(gguf, **kw))
    project.env.update(serve_env(fake))


def serve_json(project) -> dict:
    [path] = sorted((project.dir / ".overbrainer" / "serves").glob("*/serve.json"))
    return json.loads(path.read_text())


def chat(base: str, key: str, model: str) -> dict:
    import requests

    r = requests.post(base + "/chat/completions", headers={"Authorization": f"Bearer {key}"}, timeout=60,
                      json={"model": model, "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4})
    return {"status": r.status_code, "body": r.json() if r.status_code == 200 else r.text}


def test_serve_up_leaves_ready_replicas_and_serve_down_deletes_them(project, served, cli, smollm2_gguf):
    setup(project, served, smollm2_gguf, replicas=2)
    r = cli(["-C", project.dir, "--json", "serve", "up"], env=project.env, timeout=240)
    assert r.returncode == 0, r.stderr
    up = json.loads(r.stdout)
    assert up["provider"] == "rented" and up["replicas"] == 2 and len(up["endpoints"]) == 2
    assert up["kept"] == "kept until `overbrainer serve down`, max_hours or max_cost_usd"
    doc = serve_json(project)
    assert doc["state"] == "idle" and doc["by_hand"] is True and len(doc["replica_keys"]) == 2
    pods = [p for p in served.listed()]
    assert len(pods) == 2 and all(p["ports"] == ["22/tcp", "8000/http"] for p in pods)
    args = json.loads(pods[0]["args"])
    assert args["entrypoint"] == ["sh", "-c"] and "OVERBRAINER_BOOTSTRAP" in args["cmd"][0]
    env = pods[0]["env"]
    assert env["OVERBRAINER_ENGINE_KEY"].startswith("{{ RUNPOD_SECRET_overbrainer_serve_key_")
    assert env["OVERBRAINER_ENGINE_KEY_VAR"] == "LLAMA_API_KEY"
    assert "--api-key" not in env["OVERBRAINER_ENGINE_ARGV"]
    [key] = [v for k, v in served.secret_values.items() if k.startswith("overbrainer_serve_key_")]
    assert key not in r.stdout + r.stderr
    for base in up["endpoints"]:  # each replica answers with the serve's key, and refuses without it
        assert chat(base, key, str(smollm2_gguf))["status"] == 200
        assert chat(base, "wrong", str(smollm2_gguf))["status"] == 401

    r = cli(["-C", project.dir, "serve", "ls"], env=project.env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"{doc['id']}  rented    idle   2/2" in r.stdout
    r = cli(["-C", project.dir, "pod", "ls"], env=project.env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("serve idle") == 2, r.stdout
    first = doc["replica_keys"][0]
    r = cli(["-C", project.dir, "pod", "rm", first], env=project.env, timeout=120)  # one replica by its ID
    assert r.returncode == 0, r.stderr
    assert len(served.billing()) == 1, r.stdout + r.stderr

    r = cli(["-C", project.dir, "serve", "down"], env=project.env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.match(rf"serve: rented \({doc['id']}\) down: deleted, about <?\$\d+\.\d\d\n", r.stdout), r.stdout
    assert "INFO serve rented: pod " in r.stderr
    assert served.billing() == [] and serve_json(project)["state"] == "down"
    assert not [k for k in served.secret_values if k.startswith("overbrainer_")]  # every secret forgotten


def test_a_kept_warm_serve_is_deleted_by_its_watchdog_once_idle(project, served, cli, smollm2_gguf):
    setup(project, served, smollm2_gguf, keep_warm=0.3)  # 18 s
    r = cli(["-C", project.dir, "serve", "up"], env=project.env, timeout=240)
    assert r.returncode == 0, r.stderr
    assert "kept warm for 0.3 min" in r.stdout
    [pod] = served.billing()
    deadline = time.monotonic() + 90
    while served.billing() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert served.billing() == []
    log = (served.root / "pods" / pod["id"] / "workspace" / "overbrainer").glob("*/.pod/watchdog.log")
    assert any("delete reason=idle" in p.read_text() for p in log)


def parent_served(project, fake, gguf: Path, home: Path, *, questions: int, max_tokens: int, **kw) -> None:
    """A project whose parent is on the served provider `rented` (the generator on the fake
    provider), its questions written (no pod for them)."""
    project.write(topics=1, subtopics=1, questions=questions,
                  parent={"provider": "rented", "model": str(gguf), "max_tokens": max_tokens})
    with (project.dir / "overbrainer.toml").open("a") as f:
        f.write("\n" + serve_toml(gguf, parallel=1, **kw))
    project.env.update(serve_env(fake))
    for stage in ("subtopics", "questions"):
        r = run_cli(["-C", project.dir, stage], env=project.env, home=home, timeout=120)
        assert r.returncode == 0, r.stderr
    assert fake.listed() == []


def answers(project, home: Path) -> subprocess.Popen:
    """`overbrainer answers`, started."""
    return subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project.dir), "answers"],
                            env=clean_env(project.env, home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(proc: subprocess.Popen, ready, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)


def test_the_parent_on_a_served_provider_answers_through_both_replicas_then_its_pods_go(project, served, tmp_path,
                                                                                          smollm2_gguf):
    parent_served(project, served, smollm2_gguf, tmp_path, questions=4, max_tokens=8, replicas=2)
    with project.context() as ctx:  # in flight: what the replicas batch (2 × parallel 1), not [pipeline]'s 4
        assert (ctx.concurrency("parent"), ctx.concurrency("generator")) == (2, 4)
    r = run_cli(["-C", project.dir, "answers", "--plan"], env=project.env, home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert ("cost unknown (served by provider rented: no throughput measured yet (no earlier serve gave tokens); "
            "at most $1.3800 of pod time)") in r.stdout, r.stdout  # 2 replicas × 1 h × $0.69/h
    assert served.listed() == [] and not served.calls_to("POST", "/pods")  # the plan brings no pod up
    r = run_cli(["-C", project.dir, "answers"], env=project.env, home=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("answers: 4 questions, 4 answers written"), r.stdout
    doc = serve_json(project)
    assert doc["state"] == "down" and len(doc["replica_keys"]) == 2
    # what the answers cost: the pods' time over their output tokens
    out = int(re.search(r"tokens \d+ in, (\d+) out", r.stdout).group(1))
    assert doc["output_tokens"] == out > 0 and doc["serving_usd"] > 0
    per_million = doc["serving_usd"] / out * 1e6
    assert f"serve rented: {out} output tokens for about " in r.stderr
    assert f"${per_million:,.2f} per million output tokens" in r.stderr, r.stderr
    r = run_cli(["-C", project.dir, "--json", "serve", "ls"], env=project.env, home=tmp_path)
    [row] = json.loads(r.stdout)["serves"]
    assert row["usd_per_million_output"] == pytest.approx(per_million) and row["state"] == "down"
    r = run_cli(["-C", project.dir, "history"], env=project.env, home=tmp_path)
    assert (f"served rented ({smollm2_gguf}): {out} output tokens for about " in r.stdout
            and f"${per_million:,.2f} per million output tokens; no API price known for it" in r.stdout), r.stdout
    # the next plan prices the answers at the throughput measured, and still brings no pod up
    creates = len(served.calls_to("POST", "/pods"))
    r = run_cli(["-C", project.dir, "--json", "answers", "--plan", "--force"], env=project.env, home=tmp_path)
    assert r.returncode == 0, r.stderr
    [plan] = [d for d in map(json.loads, r.stdout.splitlines()) if d.get("stage") == "answers"]
    boot = doc["boot_secs"] / 3600 * 0.69 * 2  # the last boot, both replicas at $0.69/h
    assert plan["cost_usd"] == pytest.approx(boot + per_million * plan["output_tokens"] / 1e6, rel=1e-3)
    assert plan["cost_max_usd"] == 1.38 and f"${per_million:,.2f} per million" in plan["price_source"]
    assert len(served.calls_to("POST", "/pods")) == creates
    # both replicas answered (least outstanding: 4 requests, one at a time per replica)
    chats = served.proxy.chats()
    assert len(chats) == 2 and sum(chats.values()) == 4 and all(n >= 1 for n in chats.values()), chats
    assert served.billing() == []


@pytest.mark.parametrize("when", ["loading", "stage"])
def test_a_client_killed_during_the_load_or_the_stage_leaves_no_pod_billing_past_its_lease(project, served, tmp_path,
                                                                                            smollm2_gguf, when):
    from overbrainer.runpod.serve import lease_seconds

    parent_served(project, served, smollm2_gguf, tmp_path, questions=6, max_tokens=48)
    proc = answers(project, tmp_path)
    try:
        def ready() -> bool:
            if when == "loading":  # the pod is up, its engine not yet asked anything
                return any(p["status"] == "RUNNING" for p in served.listed()) and not served.proxy.chats()
            return bool(served.proxy.chats())
        wait_for(proc, ready)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert served.billing(), "the pod outlives its client until its lease runs out"
    killed = time.monotonic()
    while served.billing() and time.monotonic() < killed + lease_seconds() + 30:
        time.sleep(0.25)
    assert served.billing() == []
    logs = list((served.root / "pods").glob("*/workspace/overbrainer/*/.pod/watchdog.log"))
    assert any("delete reason=client_gone" in p.read_text() for p in logs), [p.read_text()[-500:] for p in logs]


def test_a_replica_lost_mid_stage_leaves_its_requests_to_the_other(project, served, tmp_path, smollm2_gguf):
    parent_served(project, served, smollm2_gguf, tmp_path, questions=8, max_tokens=24, replicas=2)
    proc = answers(project, tmp_path)
    try:
        wait_for(proc, lambda: len(served.proxy.chats()) >= 2)
        lost = sorted(served.proxy.chats())[0]
        served.pods.delete(lost)  # Runpod took the pod back, mid-request
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.startswith("answers: 8 questions, 8 answers written") and "0 failed" in out, out
    kept = served.proxy.chats()
    assert sum(kept.values()) >= 8 and [p for p in kept if p != lost], kept
    assert served.billing() == []
    assert serve_json(project)["state"] == "down"


def test_a_command_takes_over_the_serve_brought_up_by_hand_and_leaves_it_up(project, served, tmp_path, smollm2_gguf):
    parent_served(project, served, smollm2_gguf, tmp_path, questions=2, max_tokens=8)
    r = run_cli(["-C", project.dir, "serve", "up", "rented"], env=project.env, home=tmp_path, timeout=240)
    assert r.returncode == 0, r.stderr
    [pod] = served.billing()
    r = run_cli(["-C", project.dir, "answers"], env=project.env, home=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("answers: 2 questions, 2 answers written"), r.stdout
    assert len(served.calls_to("POST", "/pods")) == 1 and served.proxy.chats() == {pod["id"]: 2}
    assert [p["id"] for p in served.billing()] == [pod["id"]]  # still up: `serve up` keeps it until `serve down`
    doc = serve_json(project)
    assert doc["state"] == "idle" and doc["output_tokens"] > 0
    r = run_cli(["-C", project.dir, "serve", "down", "rented"], env=project.env, home=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert served.billing() == [] and serve_json(project)["state"] == "down"


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_mid_stage_deletes_the_served_pods_before_the_command_exits(project, served, tmp_path, smollm2_gguf,
                                                                             signum, code):
    parent_served(project, served, smollm2_gguf, tmp_path, questions=6, max_tokens=48)
    proc = answers(project, tmp_path)
    out, err = signalled_when(proc, lambda: bool(served.proxy.chats()), "a chat", signum=signum)
    assert proc.returncode == code, err
    assert "interrupted: answers stopped" in out + err
    assert served.billing() == []  # deleted and confirmed before the exit, not by the watchdog later
    doc = serve_json(project)
    assert doc["state"] == "down" and doc["output_tokens"] >= 0


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_serve_up_boots_deletes_what_it_made(project, served, tmp_path, smollm2_gguf, signum, code):
    parent_served(project, served, smollm2_gguf, tmp_path, questions=1, max_tokens=8, replicas=2)
    proc = subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project.dir), "serve", "up"],
                            env=clean_env(project.env, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    _, err = signalled_when(proc, lambda: len(served.calls_to("POST", "/pods")) >= 1, "a create", signum=signum)
    assert proc.returncode == code, err
    assert served.billing() == []
    assert serve_json(project)["state"] in ("failed", "down")


def test_a_spend_cap_counts_the_pods_time_and_stops_the_stage_there(project, served, tmp_path, smollm2_gguf):
    parent_served(project, served, smollm2_gguf, tmp_path, questions=12, max_tokens=48)
    # $0.69/h: $0.001 is about 5 s of the pod's time, far less than 12 answers take on one thread
    r = run_cli(["-C", project.dir, "answers", "--max-cost", "0.001"], env=project.env, home=tmp_path, timeout=100)
    assert r.returncode == 1, r.stdout + r.stderr
    written = int(re.search(r"answers: stopped after (\d+) of 12 questions: spend cap reached", r.stdout).group(1))
    assert 0 < written < 12, r.stdout
    # counted as it passes, the pods' time may go past the cap by one count's worth, and says so
    assert "error: spend past the cap" not in r.stderr or "a served provider's pods cost their time" in r.stderr
    assert served.billing() == [] and serve_json(project)["state"] == "down"


def test_evals_parent_on_a_served_provider_is_skipped_and_says_why(project, served, tmp_path, smollm2_gguf):
    from overbrainer.eval.flow import parent_side

    parent_served(project, served, smollm2_gguf, tmp_path, questions=1, max_tokens=8)
    side, about = parent_side(project.config(), 42)
    assert side is None and about["skipped"] == ("provider rented is served on rented pods, which eval does not "
                                                 "bring up (docs/serving.md)")
    assert served.listed() == []
