"""`overbrainer eval` for real: lm-eval runs its tasks on the child (SmolLM2-135M as the run's
GGUF, served by the real llama-server, here or as a job on an SSH target through the real sshd)
and on the parent (the fake provider, with a key), offline; eval.json, the ratio line, a user's
YAML task, the errors, and the key never in argv or files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from overbrainer.eval.stats import ratio_interval
from tests.integration.test_cli_compare_job import GGUF, RUN, make_run
from tests.integration.test_runs_support import cmdlines, files_containing

KEY = "sk-eval-test-9f8e7d6c5b4a"
QUESTIONS = ["Say hello to the world.", "Name a colour of the sky.", "What is two plus two?"]
REFERENCES = ["Hello world", "The sky is blue", "Two plus two is four"]
LINE = re.compile(r"^overbrainer_eval token_f1: child = (\d+\.\d) % of parent \(95 % interval (\d+\.\d)–(\d+\.\d) %\); "
                  r"(\S+) vs (\S+) over 3 samples$", re.M)


def eval_record(i: int) -> dict:
    return {"id": f"e{i}", "topic": "t", "subtopic": "s",
            "messages": [{"role": "user", "content": QUESTIONS[i]},
                         {"role": "assistant", "content": REFERENCES[i], "reasoning_content": "hm"}],
            "meta": {"model": "parent", "input_tokens": 10, "output_tokens": 20}}


def setup_run(project, fake_provider, tmp_path, llama_cpp_dir, smollm2_gguf) -> Path:
    project.write(api_key=KEY)
    fake_provider.api_key = KEY
    run_dir = make_run(project, smollm2_gguf, target="here", remote=tmp_path / "remote", llama_cpp_dir=llama_cpp_dir)
    (project.data / "eval.jsonl").write_text("".join(json.dumps(eval_record(i)) + "\n" for i in range(3)))
    return run_dir


def the_eval(run_dir: Path) -> Path:
    [found] = sorted((run_dir / "evals").iterdir())
    return found


def scores(path: Path, metric: str = "token_f1") -> dict[int, float]:
    return {s["doc_id"]: s[metric] for s in map(json.loads, path.read_text().splitlines())}


def test_eval_runs_the_child_and_the_parent_with_the_same_settings(project, fake_provider, cli, tmp_path,
                                                                    llama_cpp_dir, smollm2_gguf):
    run_dir = setup_run(project, fake_provider, tmp_path, llama_cpp_dir, smollm2_gguf)
    seen: list[list[bytes]] = []

    def parent(req):  # right twice, wrong once: the parent scores 2/3 against its own answers
        from tests.fixtures.provider import Answer

        seen.append(cmdlines())
        i = QUESTIONS.index(req.prompt)
        return Answer(content=REFERENCES[i] if i != 1 else "No idea, sorry")

    fake_provider.responder = parent
    r = cli(["-C", project.dir, "eval", "--run", RUN], env=project.env, timeout=300)
    assert r.returncode == 0, r.stderr
    eval_dir = the_eval(run_dir)
    doc = json.loads((eval_dir / "eval.json").read_text())
    # What was asked, on both sides alike.
    assert doc["run"] == RUN and doc["eval"] == eval_dir.name and doc["tasks"] == ["overbrainer_eval"]
    assert doc["offline"] is True and doc["seed"] == 42 and doc["lm_eval"] == "0.4.13"
    assert doc["gen_kwargs"] == {"max_gen_toks": 16, "temperature": 0.0, "do_sample": False}
    for side in ("child", "parent"):
        out = doc[side]["output"]
        assert out["versions"] == {"overbrainer_eval": 1} and out["n-samples"]["overbrainer_eval"]["effective"] == 3
        assert out["config"]["random_seed"] == 42 and out["config"]["fewshot_seed"] == 42
        assert out["config"]["gen_kwargs"] == doc["gen_kwargs"]
    assert doc["child"]["gguf"].endswith(".gguf") and doc["child"]["context"] == 1024
    assert doc["parent"]["model"] == "deepseek/deepseek-r1" and doc["parent"]["provider"] == "fake"
    chats = fake_provider.chat_requests()
    assert len(chats) == 3 and all(c.headers.get("authorization") == f"Bearer {KEY}" for c in chats)
    assert {(c.body["max_tokens"], c.body["temperature"], c.body["seed"]) for c in chats} == {(16, 0.0, 42)}
    # Sent [pipeline] concurrency at a time: in any order.
    assert sorted(c.body["messages"][0]["content"] for c in chats) == sorted(QUESTIONS)
    assert all(c.body["messages"] == [{"role": "user", "content": c.body["messages"][0]["content"]}] for c in chats)
    # The child really answered (llama-server), and the parent scored 1, 0, 1.
    child_resps = [json.loads(x)["resps"][0][0] for x in (eval_dir / "samples-child.jsonl").read_text().splitlines()]
    assert len(child_resps) == 3 and any(child_resps)
    assert scores(eval_dir / "samples-parent.jsonl") == {0: 1.0, 1: 0.0, 2: 1.0}
    assert "load_model" in (eval_dir / "server.log").read_text()
    # The ratio line, from the per-sample scores (paired bootstrap, the eval's seed).
    child_scores = scores(eval_dir / "samples-child.jsonl")
    want = ratio_interval(child_scores, {0: 1.0, 1: 0.0, 2: 1.0}, 42)
    m = LINE.search(r.stdout)
    assert m, r.stdout
    assert float(m.group(1)) == round(100 * want["ratio"], 1)
    assert (float(m.group(2)), float(m.group(3))) == (round(100 * want["low"], 1), round(100 * want["high"], 1))
    assert doc["summary"]["overbrainer_eval"]["ratio"] == want
    # The key: sent in the header only; never in a process's argv nor in a file of the project.
    assert seen and not [c for snapshot in seen for c in snapshot if KEY.encode() in c]
    assert files_containing(project.dir, KEY.encode()) == []
    assert KEY not in r.stdout + r.stderr
    assert "Requesting API" not in r.stderr  # no progress bars when stderr is not a terminal


def test_a_users_yaml_task_runs_offline(project, fake_provider, cli, tmp_path, llama_cpp_dir, smollm2_gguf):
    run_dir = setup_run(project, fake_provider, tmp_path, llama_cpp_dir, smollm2_gguf)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    data = tasks / "colours.jsonl"
    data.write_text("".join(json.dumps({"q": f"Name colour number {i}.", "a": "blue"}) + "\n" for i in range(4)))
    (tasks / "colours.yaml").write_text(
        "task: colours\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {data}\ntest_split: test\noutput_type: generate_until\n"
        'doc_to_text: "{{q}}"\ndoc_to_target: "{{a}}"\ngeneration_kwargs:\n  until: []\n'
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n"
        "metadata:\n  version: 2\n")
    r = cli(["-C", project.dir, "--json", "eval", "--tasks", str(tasks / "colours.yaml"), "--limit", "2",
             "--no-parent"], env=project.env, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert all(json.loads(line) for line in r.stderr.splitlines() if line.strip()), r.stderr  # --json: JSON lines
    assert out["run"] == RUN and out["parent"] == {"skipped": "--no-parent"}
    row = out["summary"]["colours"]
    assert row["metric"] == "exact_match" and row["samples"] == 2 and "ratio" not in row
    doc = json.loads((the_eval(run_dir) / "eval.json").read_text())
    assert doc["offline"] is True and doc["task_files"] == {"colours": str(tasks / "colours.yaml")}
    assert doc["child"]["output"]["versions"] == {"colours": 2} and doc["parent"]["output"] is None
    assert fake_provider.chat_requests() == []


@pytest.mark.parametrize("task,code,said", [
    ("no_such_task_xyz", 2, "unknown task `no_such_task_xyz`: not a task, group or tag of lm-eval 0.4.13"),
    ("hub.yaml", 1, "task `from_the_hub` cannot be loaded: Couldn't reach 'someone/no-such-data' on the Hub"),
])
def test_a_task_the_harness_cannot_load_is_one_line_naming_it(task, code, said, project, fake_provider, cli,
                                                              tmp_path, llama_cpp_dir, smollm2_gguf):
    run_dir = setup_run(project, fake_provider, tmp_path, llama_cpp_dir, smollm2_gguf)
    if task.endswith(".yaml"):  # a task whose data set is on the Hub (lm-eval's own tasks are alike)
        task = str(tmp_path / task)
        Path(task).write_text("task: from_the_hub\ndataset_path: someone/no-such-data\ntest_split: test\n"
                              "output_type: generate_until\ndoc_to_text: q\ndoc_to_target: a\n")
    env = {**project.env, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}  # no network for its data
    r = cli(["-C", project.dir, "eval", "--tasks", task], env=env, timeout=300)
    assert r.returncode == code, r.stderr
    [line] = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert said in line, line
    assert not any((run_dir / "evals").iterdir())  # nothing evaluated, nothing left
    assert fake_provider.chat_requests() == []


def test_an_ssh_target_runs_the_childs_side_as_a_job_there(project, fake_provider, cli, tmp_path, llama_cpp_dir,
                                                           smollm2_gguf, sshd):
    """The child's side on the SSH target (the real sshd): its GGUF sent there, llama-server and
    lm-eval run by the job (the target's python3 has lm-eval), the output brought home into the
    eval's folder; the parent still asked from here, with the same settings."""
    remote = tmp_path / "remote"
    run_dir = setup_run(project, fake_provider, tmp_path, llama_cpp_dir, smollm2_gguf)
    project.env["OVERBRAINER_TARGETS__REMOTE__HOST"] = sshd.alias
    r = cli(["-C", project.dir, "eval", "--run", RUN, "--target", "remote"], env=project.env, home=sshd.home,
            timeout=300)
    assert r.returncode == 0, r.stderr
    eval_dir = the_eval(run_dir)
    job = json.loads((eval_dir / "run.json").read_text())
    assert job["state"] == "succeeded" and job["target"] == "remote" and job["id"] == eval_dir.name
    assert job["remote_dir"] == str(remote / RUN / "evals" / eval_dir.name)
    doc = json.loads((eval_dir / "eval.json").read_text())
    assert doc["eval"] == eval_dir.name and doc["tasks"] == ["overbrainer_eval"] and doc["offline"] is True
    assert doc["task_files"] == {"overbrainer_eval": str(eval_dir / "task" / "overbrainer_eval.yaml")}
    child = doc["child"]
    assert child["target"] == "remote" and child["hardware"]["build"] == "ubuntu-x64" and child["context"] == 1024
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1/chat/completions", child["model_args"]["base_url"])
    for side in ("child", "parent"):  # the same settings on both sides
        out = doc[side]["output"]
        assert out["n-samples"]["overbrainer_eval"]["effective"] == 3 and out["config"]["random_seed"] == 42
        assert out["config"]["gen_kwargs"] == {"max_gen_toks": 16, "temperature": 0.0, "do_sample": False}
    assert doc["child"]["output"]["lm_eval_version"] == "0.4.13"
    assert len(fake_provider.chat_requests()) == 3
    # What came home: lm-eval's samples, the server's log, the job's log; the GGUF sent once.
    assert len((eval_dir / "samples-child.jsonl").read_text().splitlines()) == 3
    assert "load_model" in (eval_dir / "server.log").read_text()
    assert "eval: lm-eval done: overbrainer_eval" in (eval_dir / "job.log").read_text()
    there = remote / RUN / "evals" / eval_dir.name
    assert (there / "output-child.json").is_file() and (there / "task" / "overbrainer_eval.jsonl").is_file()
    assert (remote / RUN / GGUF).stat().st_size == smollm2_gguf.stat().st_size
    assert doc["summary"]["overbrainer_eval"]["ratio"]["n"] == 3 and LINE.search(r.stdout), r.stdout
    assert files_containing(project.dir, KEY.encode()) == [] and files_containing(remote, KEY.encode()) == []


def test_sigterm_stops_the_eval_and_its_server(project, fake_provider, tmp_path, llama_cpp_dir, smollm2_gguf):
    import signal
    import subprocess
    import sys
    import time

    from tests.fixtures.cli import clean_env, signalled_when

    run_dir = setup_run(project, fake_provider, tmp_path, llama_cpp_dir, smollm2_gguf)
    (project.data / "eval.jsonl").write_text("".join(json.dumps(eval_record(i % 3) | {"id": f"e{i}"}) + "\n"
                                                     for i in range(30)))
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project.dir), "eval",
                             "--max-tokens", "400"], env=clean_env(project.env, home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def busy() -> bool:
        logs = list((run_dir / "evals").glob("*/server.log")) if (run_dir / "evals").is_dir() else []
        return bool(logs) and "processing task" in logs[0].read_text(errors="replace")

    out, err = signalled_when(proc, busy, "the child never got a request", signum=signal.SIGTERM)
    assert proc.returncode == 143, err
    assert re.search(r"error: interrupted: eval eval_\S+ of run demo_20261201-101010 stopped", err), err
    assert not any((run_dir / "evals").iterdir())
    gguf = str(run_dir / "output").encode()
    deadline = time.monotonic() + 15
    while [c for c in cmdlines() if b"llama-server" in c and gguf in c]:
        assert time.monotonic() < deadline, "llama-server outlived the eval"
        time.sleep(0.1)


def test_the_parent_is_asked_only_through_an_openai_protocol_provider_and_its_key_is_not_recorded(project):
    from overbrainer.eval.flow import parent_side

    project.write(protocol="anthropic", api_key=KEY)
    side, about = parent_side(project.config(), 42)
    assert side is None and about["skipped"] == ("provider fake speaks the anthropic protocol; lm-eval's chat "
                                                 "model speaks OpenAI's")
    project.write(protocol="openai", api_key=KEY)
    side, about = parent_side(project.config(), 42)
    assert side.url == f"{project.url}/chat/completions" and side.key == KEY and side.model_args()["seed"] == 42
    assert KEY not in json.dumps(about) and KEY not in repr(side)


def test_a_server_that_does_not_start_fails_the_eval_with_its_log(project, fake_provider, cli, tmp_path,
                                                                  llama_cpp_dir):
    run_dir = make_run(project, Path("unused"), target="here", remote=tmp_path / "remote",
                       llama_cpp_dir=llama_cpp_dir, gguf_bytes=b"GGUF? no: not a model")
    r = cli(["-C", project.dir, "eval"], env=project.env, timeout=300)
    assert r.returncode == 1, r.stderr
    eval_dir = the_eval(run_dir)
    assert f"error: eval: llama-server exited before it was ready; its log is {eval_dir / 'server.log'}" in r.stderr
    assert "failed to load model" in (eval_dir / "server.log").read_text()
    assert not (eval_dir / "eval.json").exists() and fake_provider.chat_requests() == []
