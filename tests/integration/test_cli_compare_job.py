"""`overbrainer compare` for real: the child (SmolLM2-135M as the run's GGUF) served by the real
llama-server on the run's target (local, and SSH through the real sshd), the judge and parent from
the fake provider, the reports checked against the answers the job brought back; a dead server;
Ctrl-C during the job."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from overbrainer.exec.transfer import sha256_file
from overbrainer.jobs import run_record as records
from tests.fixtures.cli import clean_env
from tests.fixtures.compare import write_eval
from tests.fixtures.timescale import scale, scaled_env

RUN = "demo_20261201-101010"
GGUF = f"output/gguf/{RUN}-Q4_1.gguf"
OUTCOMES = {"q00": "win", "q01": "loss", "q02": "tie"}
_PROMPT = re.compile(r"Question:\n.*?(\d\d)\?\n\nAnswer A:\n(.*?)\n\nAnswer B:\n", re.S)
_SHA: dict[str, str] = {}


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    scale(monkeypatch, 0.025)


def judge(req):
    """The fake provider's responder: the verdict scripted for each question, from the child's side
    (the parent's answer is `PARENT says N`, the child's is whatever SmolLM2 said)."""
    from tests.fixtures.provider import Answer

    m = _PROMPT.search(req.prompt)
    if m is None:
        return None
    qid = f"q{m.group(1)}"
    child_is_a = not m.group(2).startswith("PARENT says")
    outcome = OUTCOMES.get(qid, "win")
    pick = "tie" if outcome == "tie" else ("A" if (outcome == "win") == child_is_a else "B")
    return Answer(content=f'{{"verdict": "{pick}", "reason": "scripted {outcome} for {qid}"}}')


def make_run(project, gguf_source: Path, *, target: str, remote: Path | None, llama_cpp_dir: Path,
             questions: int = 3, max_tokens: int = 16, gguf_bytes: bytes | None = None) -> Path:
    """A trained-and-exported run made by hand, its GGUF a hard link to SmolLM2 (or `gguf_bytes`)."""
    write_eval(project.data, questions)
    with (project.dir / "overbrainer.toml").open("a") as f:
        f.write(f'\n[targets.here]\nkind = "local"\nruntime = "native"\nvenv = "{sys.prefix}"\n'
                f'\n[targets.remote]\nkind = "ssh"\nruntime = "native"\nvenv = "{sys.prefix}"\nworkdir = "{remote}"\n'
                f"\n[compare]\nmax_tokens = {max_tokens}\ntemperature = 0.0\nserver_start_secs = 60\n"
                "parent_price_in = 2.0\nparent_price_out = 8.0\nchild_price_per_hour = 0.36\n")
    project.env["OVERBRAINER_LLAMA_CPP_DIR"] = str(llama_cpp_dir)
    project.env.update(scaled_env(0.025))
    run_dir = project.dir / "runs" / RUN
    (run_dir / "output" / "gguf").mkdir(parents=True)
    if gguf_bytes is None:
        os.link(gguf_source, run_dir / GGUF)
        sha = _SHA.get(str(gguf_source)) or _SHA.setdefault(str(gguf_source), sha256_file(gguf_source))
    else:
        (run_dir / GGUF).write_bytes(gguf_bytes)
        sha = sha256_file(run_dir / GGUF)
    (run_dir / "axolotl.yaml").write_text("base_model: HuggingFaceTB/SmolLM2-135M-Instruct\nsequence_len: 1024\n")
    (run_dir / "export.json").write_text(json.dumps({
        "quantize": "Q4_1", "llama_cpp": "b11434", "file": GGUF, "sha256": sha,
        "size": (run_dir / GGUF).stat().st_size, "created": "2026-12-01T11:00:00Z"}))
    (run_dir / "job.log").write_text("trained\n")  # its results are home
    remote_dir = run_dir.resolve() if target == "here" else remote / RUN
    records.RunPlace(project.dir / "runs", RUN).save(records.RunRecord(
        id=RUN, target=target, created="2026-12-01T10:10:10Z", remote_dir=str(remote_dir), state="succeeded"))
    return run_dir


def compare_dirs(run_dir: Path) -> list[Path]:
    root = run_dir / "compares"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def nearest_rank(values: list[float], p: float) -> float:
    import math

    ordered = sorted(values)
    return ordered[max(1, math.ceil(p * len(ordered) / 100)) - 1]


@pytest.mark.parametrize("where", ["here", "remote"])
def test_compare_serves_the_child_judges_and_reports(where, project, fake_provider, cli, tmp_path,
                                                     llama_cpp_dir, smollm2_gguf, request):
    remote = tmp_path / "remote"
    home = None
    if where == "remote":
        sshd = request.getfixturevalue("sshd")
        project.env["OVERBRAINER_TARGETS__REMOTE__HOST"] = sshd.alias
        home = sshd.home
    run_dir = make_run(project, smollm2_gguf, target=where, remote=remote, llama_cpp_dir=llama_cpp_dir)
    fake_provider.responder = judge
    kw = {"home": home} if home is not None else {}
    r = cli(["-C", project.dir, "compare", "--run", RUN], env=project.env, **kw)
    assert r.returncode == 0, r.stderr
    [compare_dir] = compare_dirs(run_dir)
    cid = compare_dir.name
    assert r.stdout.strip() == f"runs/{RUN}/compares/{cid}/compare.md"
    setup = json.loads((compare_dir / "setup.json").read_text())
    assert setup["compare"] == cid and setup["context"] == 1024 and [q["id"] for q in setup["questions"]] == list(OUTCOMES)
    job = json.loads((compare_dir / "run.json").read_text())
    assert job["state"] == "succeeded" and job["target"] == where
    # The judge is held to its verdict's shape by the server (response_format), not only asked.
    formats = [r.body.get("response_format") for r in fake_provider.chat_requests()]
    assert formats and all(f["json_schema"]["name"] == "verdict" for f in formats)
    assert formats[0]["json_schema"]["schema"]["properties"]["verdict"]["enum"] == ["A", "B", "tie"]
    # The child's real answers came back, with the job's progress.
    answers = [json.loads(line) for line in (compare_dir / "child_answers.jsonl").read_text().splitlines()]
    assert [a["id"] for a in answers] == ["q00", "q01", "q02"]
    assert all(a["answer"] and 0 < a["output_tokens"] <= 16 and a["seconds"] > 0 for a in answers)
    assert "load_model" in (compare_dir / "server.log").read_text()
    evals = [json.loads(x) for x in (compare_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m["total"]) for m in evals if m["event"] == "eval"][-1] == (3, 3)
    if where == "remote":
        # Sent once into the run's directory on the target, the stage removed; the compare's
        # files on the target are in <remote_dir>/compares/<id>.
        assert (remote / RUN / GGUF).read_bytes()[:4] == b"GGUF"
        assert (remote / RUN / GGUF).stat().st_size == smollm2_gguf.stat().st_size
        assert not (run_dir / ".upload").exists()
        assert "INFO compare: uploading" in r.stderr  # the job's files, under the job's name
        assert "INFO train:" not in r.stderr
        assert (remote / RUN / "compares" / cid / "child_answers.jsonl").read_bytes() == \
            (compare_dir / "child_answers.jsonl").read_bytes()
    else:
        assert (run_dir / GGUF).stat().st_ino == smollm2_gguf.stat().st_ino  # used in place, never copied
    # The numbers: 1 win, 1 loss, 1 tie; speed and costs from the answers brought back.
    doc = json.loads((compare_dir / "compare.json").read_text())
    s = doc["summary"]
    assert (s["questions"], s["wins"], s["ties"], s["losses"], s["errors"]) == (3, 1, 1, 1, 0)
    assert abs(s["win_or_tie"] - 2 / 3) < 1e-9
    seconds = [a["seconds"] for a in answers]
    assert s["latency_p50"] == nearest_rank(seconds, 50) and s["latency_p95"] == max(seconds)
    assert abs(s["mean_seconds"] - sum(seconds) / 3) < 1e-9
    assert abs(s["tokens_per_second"] - sum(a["tokens_per_second"] for a in answers) / 3) < 1e-6
    assert s["truncated"] == sum(a["finish"] == "length" for a in answers)
    # Parent: mean input (100+101+102)/3 = 101, output (400+410+420)/3 = 410;
    #   (101·2 + 410·8) / 1e6 × 1000 = 3.482.  Child: 0.36 × mean seconds / 3600 × 1000.
    assert doc["costs"]["parent_per_1k"] == 3.482
    assert abs(doc["costs"]["child_per_1k"] - round(0.36 * (sum(seconds) / 3) / 3.6, 6)) < 1e-6
    hardware = json.loads((compare_dir / "hardware.json").read_text())
    assert doc["hardware"] == hardware and hardware["build"] == "ubuntu-x64"
    md = (compare_dir / "compare.md").read_text()
    assert f"# Compare of run {RUN}" in md
    assert f"| Hardware | {hardware['cpu']}, CPU (ubuntu-x64) |" in md
    assert "| Wins / ties / losses | 1 / 1 / 1 |" in md and "| Win or tie | 66.7% " in md
    assert f"| GGUF | Q4_1, llama.cpp b11434, SHA-256 {setup['gguf_sha256'][:12]} |" in md
    by_id = {q["id"]: q for q in doc["questions"]}
    assert by_id["q01"]["verdict"] == "loss" and by_id["q01"]["child"] == answers[1]["answer"].strip()
    assert len(fake_provider.chat_requests()) == 3


def test_a_dead_server_fails_the_compare_with_its_log(project, fake_provider, cli, tmp_path, llama_cpp_dir):
    run_dir = make_run(project, Path("unused"), target="here", remote=tmp_path / "remote",
                       llama_cpp_dir=llama_cpp_dir, gguf_bytes=b"GGUF? no: not a model")
    r = cli(["-C", project.dir, "compare"], env=project.env)
    assert r.returncode == 1, r.stderr
    [compare_dir] = compare_dirs(run_dir)
    cid = compare_dir.name
    assert (f"error: compare {cid} failed: llama-server exited before it was ready; "
            f"its server log is runs/{RUN}/compares/{cid}/server.log") in r.stderr
    assert "failed to load model" in (compare_dir / "server.log").read_text()
    assert "failed to load model" in (compare_dir / "job.log").read_text()  # the log's last lines
    assert json.loads((compare_dir / "run.json").read_text())["state"] == "failed"
    assert (run_dir / GGUF).is_file()  # the run's own GGUF is never discarded
    assert fake_provider.chat_requests() == [] and not (compare_dir / "compare.md").exists()


@pytest.mark.timeout(420)  # its own waits: 120 s for the job, 180 s for the stop
def test_ctrl_c_during_the_job_cancels_it(project, fake_provider, tmp_path, llama_cpp_dir, smollm2_gguf):
    run_dir = make_run(project, smollm2_gguf, target="here", remote=tmp_path / "remote",
                       llama_cpp_dir=llama_cpp_dir, questions=40, max_tokens=400)
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project.dir), "compare"],
                            env=clean_env(project.env, home), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 120
        while True:  # the server is up and busy with the first question
            metrics = [p / "metrics.jsonl" for p in compare_dirs(run_dir)]
            if metrics and metrics[0].is_file() and '"event": "eval"' in metrics[0].read_text():
                break
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the job never got going"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=180)  # a loaded 2-core machine: the cancel, the pod's end
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    [compare_dir] = compare_dirs(run_dir)
    assert proc.returncode == 130, err
    assert f"interrupted: compare {compare_dir.name} of run {RUN} cancelled" in err
    assert json.loads((compare_dir / "run.json").read_text())["state"] == "cancelled"
    answers = compare_dir / "child_answers.jsonl"
    lines = answers.read_text().splitlines() if answers.is_file() else []
    assert len(lines) < 40
    assert fake_provider.chat_requests() == []
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _is_server_in(int(pid), compare_dir)]
    assert left == []  # the cancel stopped llama-server with its job


def _is_server_in(pid: int, compare_dir: Path) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/cwd") == str(compare_dir.resolve()) and \
            b"llama-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_the_runs_target_must_still_be_there_and_a_runpod_one_needs_its_api_key(project, fake_provider, cli, tmp_path, llama_cpp_dir):
    run_dir = make_run(project, Path("unused"), target="gone", remote=tmp_path / "remote",
                       llama_cpp_dir=llama_cpp_dir, gguf_bytes=b"GGUF")
    r = cli(["-C", project.dir, "compare"], env=project.env)
    assert r.returncode == 2
    assert r.stderr.strip().endswith(f"error: target `gone` of run {RUN} is no longer in overbrainer.toml "
                                     "(targets: `here`, `remote`)")
    with (project.dir / "overbrainer.toml").open("a") as f:
        f.write('\n[targets.gone]\nkind = "runpod"\nmax_hours = 1\ngpu_types = "auto"\n')
    r = cli(["-C", project.dir, "compare"], env=project.env)
    assert r.returncode == 77  # a new pod for the compare: nothing is claimed without the API key
    assert r.stderr.strip().endswith("error: no Runpod API key: set OVERBRAINER_RUNPOD__API_KEY")
    assert compare_dirs(run_dir) == []


def test_a_small_local_judge_held_to_the_verdict_schema_gives_readable_verdicts(project, cli, tmp_path,
                                                                              llama_cpp_dir, smollm2_gguf,
                                                                              llama_server):
    """The judge is SmolLM2 itself behind a real llama-server: with the verdict's JSON schema in
    `response_format` every verdict parses (without it, this 135M model's replies did not)."""
    run_dir = make_run(project, smollm2_gguf, target="here", remote=None, llama_cpp_dir=llama_cpp_dir,
                       questions=2)
    project.env["OVERBRAINER_PROVIDERS__FAKE__BASE_URL"] = llama_server(smollm2_gguf) + "/v1"
    r = cli(["-C", project.dir, "compare", "--run", RUN], env=project.env)
    assert r.returncode == 0, r.stderr
    [compare_dir] = compare_dirs(run_dir)
    [verdicts] = compare_dir.glob("verdicts-*.jsonl")
    lines = [json.loads(x) for x in verdicts.read_text().splitlines()]
    assert len(lines) == 2 and all(v["verdict"] in ("win", "tie", "loss") for v in lines), lines
