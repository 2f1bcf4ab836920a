"""The compare job's two files (compare.sh, compare_client.py) run directly with `sh`, against the
real llama-server and SmolLM2-135M: answers, hardware, progress lines, a dead server, resume."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from overbrainer.compare.answers import read_answers

PACKAGE = Path(__file__).resolve().parents[2] / "overbrainer"
SCRIPTS = [PACKAGE / "compare" / "scripts" / "compare.sh", PACKAGE / "compare" / "scripts" / "compare_client.py",
           PACKAGE / "export" / "scripts" / "llama_cpp.sh"]
QUESTIONS = [
    {"id": "q00", "messages": [{"role": "system", "content": "Answer in one short sentence."},
                               {"role": "user", "content": "What is the capital of France?"}]},
    {"id": "q01", "messages": [{"role": "user", "content": "Name one primary color."}]},
    {"id": "q02", "messages": [{"role": "user", "content": "Write a long story about a dragon."}]},
]


def job_dir(tmp_path: Path, questions=QUESTIONS) -> Path:
    work = tmp_path / "job"
    work.mkdir()
    for path in SCRIPTS:
        shutil.copy(path, work / path.name)
    (work / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    return work


def run_job(work: Path, llama_cpp_dir: Path, model: Path | str, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OVERBRAINER_")}
    env.update({"OVERBRAINER_COMPARE_MODEL": str(model), "OVERBRAINER_COMPARE_CTX": "1024",
           "OVERBRAINER_COMPARE_MAX_TOKENS": "24", "OVERBRAINER_COMPARE_TEMPERATURE": "0",
           "OVERBRAINER_COMPARE_START_SECS": "120", "OVERBRAINER_LLAMA_CPP_DIR": str(llama_cpp_dir),
           "OVERBRAINER_METRICS": str(work / "metrics.jsonl"), **extra})
    return subprocess.run(["sh", "compare.sh"], cwd=work, env=env, capture_output=True, text=True, timeout=300)


def servers_in(work: Path) -> list[int]:
    """llama-server processes still running in `work` (the exit trap must leave none)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "cwd") == str(work) and \
                    b"llama-server" in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_answers_hardware_and_progress(tmp_path, llama_cpp_dir, smollm2_gguf):
    work = job_dir(tmp_path)
    done = run_job(work, llama_cpp_dir, smollm2_gguf)
    assert done.returncode == 0, done.stderr
    answers = read_answers(work)
    assert sorted(answers) == ["q00", "q01", "q02"]
    for a in answers.values():
        assert "error" not in a, a
        assert a["finish"] in ("stop", "length")
        assert 0 < a["output_tokens"] <= 24 and a["input_tokens"] > 5
        assert 0 < a["first_token_seconds"] < a["seconds"]
        rate = a["output_tokens"] / (a["seconds"] - a["first_token_seconds"])
        assert abs(a["tokens_per_second"] - rate) <= 0.01 * rate + 0.01
    assert "Paris" in answers["q00"]["answer"]
    assert answers["q02"]["finish"] == "length" and answers["q02"]["output_tokens"] == 24
    hardware = json.loads((work / "hardware.json").read_text())
    assert set(hardware) == {"build", "gpus", "cpu"} and hardware["gpus"] == [] and hardware["cpu"]
    metrics = [json.loads(line) for line in (work / "metrics.jsonl").read_text().splitlines()]
    assert {m["event"] for m in metrics} == {"eval"}
    assert [(m["step"], m["total"]) for m in metrics] == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert all(isinstance(m["time"], float) for m in metrics)
    assert "load_model" in (work / "server.log").read_text()
    assert servers_in(work) == []


def test_resume_asks_only_what_is_missing(tmp_path, llama_cpp_dir, smollm2_gguf):
    work = job_dir(tmp_path)
    kept = {"id": "q00", "answer": "KEPT", "finish": "stop", "input_tokens": 1, "output_tokens": 1,
            "seconds": 1.0, "first_token_seconds": 0.5, "tokens_per_second": 2.0}
    # q00 answered, q01 failed last time (asked again), q02 cut mid-line by a crash (asked again)
    (work / "child_answers.jsonl").write_text(json.dumps(kept) + "\n" + json.dumps(
        {"id": "q01", "error": "HTTP 500 from llama-server"}) + "\n" + '{"id": "q02", "ans')
    done = run_job(work, llama_cpp_dir, smollm2_gguf)
    assert done.returncode == 0, done.stderr
    lines = (work / "child_answers.jsonl").read_text().splitlines()
    by_id, q00_lines = {}, 0
    for line in lines:
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        by_id[doc["id"]] = doc
        q00_lines += doc["id"] == "q00"
    assert q00_lines == 1
    assert by_id["q00"] == kept
    assert "error" not in by_id["q01"] and by_id["q01"]["answer"]
    assert "error" not in by_id["q02"] and by_id["q02"]["answer"]
    steps = [json.loads(x) for x in (work / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m["total"]) for m in steps] == [(1, 3), (2, 3), (3, 3)]


def test_dead_server_fails_with_its_log(tmp_path, llama_cpp_dir):
    work = job_dir(tmp_path)
    (work / "model.gguf").write_bytes(b"not a gguf at all")
    done = run_job(work, llama_cpp_dir, "model.gguf")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == "compare: llama-server exited before it was ready"
    tail = done.stderr.split("compare: server.log ends with:\n", 1)[1].splitlines()[:-1]
    assert 0 < len(tail) <= 20 and any("failed to load model" in line for line in tail)
    assert (work / "model.gguf").is_file()  # the job never removes the GGUF it served
    assert not (work / "child_answers.jsonl").exists() or (work / "child_answers.jsonl").read_text() == ""


def test_missing_llama_server_is_named(tmp_path, smollm2_gguf):
    work = job_dir(tmp_path)
    done = run_job(work, tmp_path, smollm2_gguf)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == \
        f"llama.cpp: {tmp_path} (OVERBRAINER_LLAMA_CPP_DIR) has no llama-server, in it or its bin/"
    assert smollm2_gguf.is_file()
