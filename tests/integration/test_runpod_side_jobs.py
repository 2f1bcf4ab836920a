"""`export` and `compare` of a run trained on Runpod, through the real CLI: each on a new pod of the
fake Runpod whose pods are real process trees (the host's filesystem is the image: the real
llama.cpp of the test extra is the target's `llama_cpp_dir`, SmolLM2-135M the run's model), and
`compare --target here` on this machine's CPU. After every test the fake lists no pod that bills."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.cli import clean_env, signalled_when
from tests.fixtures.compare import write_eval
from tests.integration.test_cli_compare_job import judge
from tests.fixtures.timescale import scaled_env

pytestmark = pytest.mark.ssh

RUN = "demo_20261201-101010"
RTX4090 = "NVIDIA GeForce RTX 4090"
GGUF = f"output/gguf/{RUN}-F16.gguf"


@pytest.fixture
def fake(fake_runpod):
    from tests.fixtures.llama import cache_dir

    os.makedirs("/run/sshd", exist_ok=True)
    # The image: this machine's Python, its venv (llama.cpp's converter and binaries) and the
    # suite's cache (llama_cpp_dir), wherever they are.
    fake_runpod.pods.image_paths = sorted({str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix, cache_dir())
                                           if str(Path(p).resolve()).startswith("/root/")})
    yield fake_runpod
    assert fake_runpod.billing() == []


def pod_run(project, fake, model: Path | None, llama_cpp_dir: Path, *, questions: int = 2,
            gpu_types: str = f'["{RTX4090}"]', base_model: str = "HuggingFaceTB/SmolLM2-135M-Instruct") -> Path:
    """A run trained on the runpod target `gpu` (its results home, no GGUF yet), the project's
    eval questions, targets `gpu` (the fake) and `here` (this machine)."""
    write_eval(project.data, questions)
    with (project.dir / "overbrainer.toml").open("a") as f:
        f.write(f'\n[targets.gpu]\nkind = "runpod"\ngpu_types = {gpu_types}\nmax_hours = 1\n'
                f'venv = "{sys.prefix}"\nllama_cpp_dir = "{llama_cpp_dir}"\n'
                f'\n[targets.here]\nkind = "local"\nruntime = "native"\nvenv = "{sys.prefix}"\n'
                f'llama_cpp_dir = "{llama_cpp_dir}"\n'
                '\n[export]\nquantize = "F16"\n'
                "\n[compare]\nmax_tokens = 8\ntemperature = 0.0\nserver_start_secs = 60\nmax_hours = 0.5\n")
    project.env.update({"OVERBRAINER_RUNPOD__BASE_URL": fake.url, "OVERBRAINER_RUNPOD__API_KEY": fake.account_key,
                        **scaled_env(0.01)})
    run_dir = project.dir / "runs" / RUN
    (run_dir / "output").mkdir(parents=True)
    for f in (model.iterdir() if model is not None else ()):
        os.link(f, run_dir / "output" / f.name)
    (run_dir / "axolotl.yaml").write_text(f"base_model: {base_model}\nsequence_len: 512\n")
    (run_dir / "job.log").write_text("trained\n")
    remote = f"/workspace/overbrainer/{RUN}"
    (run_dir / "run.json").write_text(json.dumps({
        "id": RUN, "target": "gpu", "created": "2026-12-01T10:10:10Z", "remote_dir": remote,
        "job": {"dir": remote, "pid": 4242, "container": None}, "state": "succeeded", "message": None}))
    return run_dir


def jobs(run_dir: Path, kind: str) -> list[Path]:
    root = run_dir / f"{kind}s"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def pod_of(job_dir: Path) -> dict:
    return json.loads((job_dir / "pod.json").read_text())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def price_line(stderr: str, kind: str, max_hours: str) -> None:
    """The one line before the create: the GPU, its price per hour, the most the job can cost."""
    import re

    lines = [x for x in stderr.splitlines() if "INFO creating pod" in x]
    assert len(lines) == 1, stderr
    assert re.search(rf"creating pod overbrainer-{kind}_\S+: .+ × 1 at \$\d+\.\d\d/h, max \$\d+\.\d\d over "
                     rf"max_hours = {max_hours}$", lines[0]), lines[0]


def workspace(fake, pod_id: str) -> Path:
    """The run's directory on a pod (what stays of its disk on this machine once it is gone)."""
    return fake.root / "pods" / pod_id / "workspace" / "overbrainer" / RUN


def test_export_on_a_new_pod_brings_the_gguf_home_and_deletes_the_pod(project, fake, cli, smollm2_hf,
                                                                     llama_cpp_dir):
    # gpu_types = "auto": a VRAM floor from the base model (a local folder here, so no Hub asked)
    run_dir = pod_run(project, fake, smollm2_hf, llama_cpp_dir, gpu_types='"auto"', base_model=str(smollm2_hf))
    r = cli(["-C", project.dir, "export", RUN], env=project.env, timeout=300)
    assert r.returncode == 0, r.stderr
    [export_dir] = jobs(run_dir, "export")
    gguf = run_dir / GGUF
    doc = json.loads((export_dir / "export.json").read_text())
    assert doc["file"] == GGUF and doc["sha256"] == sha256(gguf) and gguf.read_bytes()[:4] == b"GGUF"
    assert (gguf.parent / "Modelfile").is_file()
    pod = pod_of(export_dir)
    assert pod["state"] == "deleted" and fake.pod(pod["pod_id"]) is None
    assert f"export: {export_dir.name}: runs/{RUN}/output to GGUF F16 on target `gpu`" in r.stdout
    price_line(r.stderr, "export", "1")
    assert "the pod needs at least 3 GB of VRAM" in r.stderr  # ceil(1.2 × 269 MB / 1e9) + 2
    assert "sending its model and axolotl.yaml (272.6 MB)" in r.stderr
    assert not (workspace(fake, pod["pod_id"]) / "exports" / export_dir.name / "export-work").exists()


def test_a_compare_of_a_run_without_gguf_exports_first_in_the_same_pod_kept_then_removed(
        project, fake, fake_provider, cli, smollm2_hf, llama_cpp_dir):
    run_dir = pod_run(project, fake, smollm2_hf, llama_cpp_dir, questions=1, gpu_types='"auto"',
                      base_model=str(smollm2_hf))
    fake_provider.responder = judge
    try:
        r = cli(["-C", project.dir, "compare", "--run", RUN, "--keep-pod"], env=project.env, timeout=300)
        assert r.returncode == 0, r.stderr
        _exported_in_the_same_pod_and_kept(project, fake, cli, run_dir, r)
    finally:
        _delete_left_pods(fake)


def _delete_left_pods(fake) -> None:
    """The chaos rule: a kept pod is deleted even when an assertion failed first."""
    from overbrainer.runpod.api import RunpodClient

    with RunpodClient(fake.url, fake.account_key) as client:
        for pod in fake.billing():
            client.delete_pod(pod["id"])


def _exported_in_the_same_pod_and_kept(project, fake, cli, run_dir: Path, r) -> None:
    assert len(fake.calls_to("POST", r"/pods")) == 1  # one pod for both
    [line] = [x for x in r.stderr.splitlines() if "INFO creating pod" in x]
    assert line.endswith("no time limit (--keep-pod)"), line
    assert "the pod needs at least 3 GB of VRAM" in r.stderr  # from the base model (the GGUF is not made yet)
    assert not jobs(run_dir, "export")
    [compare_dir] = jobs(run_dir, "compare")
    cid = compare_dir.name
    assert r.stdout.strip() == f"runs/{RUN}/compares/{cid}/compare.md"
    gguf = run_dir / GGUF
    doc = json.loads((compare_dir / "export.json").read_text())
    assert doc["file"] == GGUF and doc["sha256"] == sha256(gguf)
    setup = json.loads((compare_dir / "setup.json").read_text())
    assert setup["gguf"] == GGUF and setup["gguf_sha256"] == doc["sha256"] and setup["quantize"] == "F16"
    answers = [json.loads(x) for x in (compare_dir / "child_answers.jsonl").read_text().splitlines()]
    assert [a["id"] for a in answers] == ["q00"] and answers[0].get("answer")
    from overbrainer.compare.plan import run_gguf

    assert run_gguf(run_dir).file == GGUF  # the next compare serves it
    # Kept: its files are there, but not the GGUF (home, verified, then removed there).
    pod = pod_of(compare_dir)
    assert fake.pod(pod["pod_id"]) is not None and pod["state"] != "deleted"
    there = workspace(fake, pod["pod_id"])
    assert (there / "compares" / cid / "child_answers.jsonl").is_file() and not (there / GGUF).exists()
    ls = cli(["-C", project.dir, "pod", "ls"], env=project.env)
    assert ls.returncode == 0 and cid in ls.stdout, ls.stdout + ls.stderr
    rm = cli(["-C", project.dir, "pod", "rm", cid], env=project.env)
    assert rm.returncode == 0, rm.stderr
    assert fake.pod(pod["pod_id"]) is None and pod_of(compare_dir)["state"] == "deleted"


def with_gguf(run_dir: Path, gguf: Path) -> str:
    """The run's GGUF (a hard link to `gguf`) and its export.json; its path in the run."""
    rel = f"output/gguf/{RUN}-Q4_1.gguf"
    (run_dir / "output" / "gguf").mkdir(parents=True, exist_ok=True)
    os.link(gguf, run_dir / rel)
    (run_dir / "export.json").write_text(json.dumps({
        "quantize": "Q4_1", "llama_cpp": "b11434", "file": rel, "sha256": sha256(gguf),
        "size": gguf.stat().st_size, "created": "2026-12-01T11:00:00Z"}))
    return rel


def test_a_compare_on_a_new_pod_sends_the_gguf_once_and_removes_it_there(project, fake, fake_provider, cli,
                                                                        smollm2_gguf, llama_cpp_dir):
    run_dir = pod_run(project, fake, None, llama_cpp_dir, questions=1, gpu_types='"auto"')
    (run_dir / "output" / "adapter_config.json").write_text("{}")
    rel = with_gguf(run_dir, smollm2_gguf)
    fake_provider.responder = judge
    r = cli(["-C", project.dir, "compare"], env=project.env, timeout=300)
    assert r.returncode == 0, r.stderr
    [compare_dir] = jobs(run_dir, "compare")
    price_line(r.stderr, "compare", "0.5")  # [compare] max_hours
    assert "the pod needs at least 3 GB of VRAM" in r.stderr  # ceil(1.2 × 98 MB / 1e9) + 2
    assert f"compare: sent {rel} (" in r.stderr
    pod = pod_of(compare_dir)
    assert pod["state"] == "deleted" and fake.pod(pod["pod_id"]) is None
    assert not (workspace(fake, pod["pod_id"]) / rel).exists()  # removed once served
    answers = [json.loads(x) for x in (compare_dir / "child_answers.jsonl").read_text().splitlines()]
    assert [a["id"] for a in answers] == ["q00"] and answers[0].get("answer")


def _hanging_llama_cpp(tmp_path: Path, real: Path) -> Path:
    """A llama.cpp whose converter never ends (the job is running when Ctrl-C comes)."""
    fake = tmp_path / "hanging-llama.cpp"
    fake.mkdir()
    for name in os.listdir(real):
        if name != "convert_hf_to_gguf.py":
            os.symlink(real / name, fake / name)
    (fake / "convert_hf_to_gguf.py").write_text("import time\nprint('converting', flush=True)\ntime.sleep(3600)\n")
    return fake


@pytest.mark.parametrize("command", ["export", "compare"])
def test_ctrl_c_cancels_the_side_job_and_ends_its_pod(command, project, fake, fake_provider, smollm2_hf,
                                                      llama_cpp_dir, tmp_path):
    run_dir = pod_run(project, fake, smollm2_hf, _hanging_llama_cpp(tmp_path, llama_cpp_dir))
    args = [RUN] if command == "export" else ["--run", RUN]
    proc = subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project.dir), command, *args],
                            env=clean_env(project.env, tmp_path / "home"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    _, err = signalled_when(proc, lambda: any(json.loads((d / "run.json").read_text())["state"] == "running"
                                               for d in jobs(run_dir, command) if (d / "run.json").is_file()),
                            "the job never ran")
    assert proc.returncode == 130, err
    [job_dir] = jobs(run_dir, command)
    assert "cancelled" in err.strip().splitlines()[-1], err
    assert json.loads((job_dir / "run.json").read_text())["state"] == "cancelled"
    pod = pod_of(job_dir)
    assert pod["state"] == "deleted" and fake.pod(pod["pod_id"]) is None
    assert not (run_dir / "output" / "gguf").exists() or not list((run_dir / "output" / "gguf").iterdir())
    assert not (run_dir / ".upload").exists() and not (job_dir / ".download").exists()


def test_compare_target_here_serves_a_pod_trained_child_on_this_cpu(project, fake_provider, cli, smollm2_gguf,
                                                                    llama_cpp_dir, tmp_path):
    class NoFake:
        url, account_key = "http://127.0.0.1:9", "unused"

    run_dir = pod_run(project, NoFake, None, llama_cpp_dir, questions=1)
    (run_dir / "output" / "adapter_config.json").write_text("{}")
    with_gguf(run_dir, smollm2_gguf)
    fake_provider.responder = judge
    r = cli(["-C", project.dir, "compare", "--target", "here"], env=project.env, timeout=300)
    assert r.returncode == 0, r.stderr
    [compare_dir] = jobs(run_dir, "compare")
    assert json.loads((compare_dir / "run.json").read_text())["target"] == "here"
    hardware = json.loads((compare_dir / "hardware.json").read_text())
    md = (compare_dir / "compare.md").read_text()
    assert hardware["gpus"] == [] and f"| Hardware | {hardware['cpu']}, CPU (ubuntu-x64) |" in md


def test_eval_on_a_new_pod_brings_lm_evals_output_home_and_deletes_the_pod(project, fake, cli, smollm2_gguf,
                                                                           llama_cpp_dir, tmp_path):
    """`eval --target gpu`: the child's side (llama-server and lm-eval, the image's python3 has it)
    on a pod of its own, a user's task file sent with its data; eval.json written here."""
    run_dir = pod_run(project, fake, None, llama_cpp_dir, questions=1, gpu_types='"auto"')
    (run_dir / "output" / "adapter_config.json").write_text("{}")
    rel = with_gguf(run_dir, smollm2_gguf)
    data = tmp_path / "colours.jsonl"
    data.write_text("".join(json.dumps({"q": f"Name colour number {i}.", "a": "blue"}) + "\n" for i in range(3)))
    task = tmp_path / "colours.yaml"
    task.write_text(f"task: colours\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\n"
                    'test_split: test\noutput_type: generate_until\ndoc_to_text: "{{q}}"\ndoc_to_target: "{{a}}"\n'
                    "generation_kwargs:\n  until: []\nmetric_list:\n  - metric: exact_match\n")
    r = cli(["-C", project.dir, "eval", "--target", "gpu", "--tasks", str(task), "--limit", "2", "--no-parent"],
            env=project.env, timeout=300)
    assert r.returncode == 0, r.stderr
    [eval_dir] = jobs(run_dir, "eval")
    price_line(r.stderr, "eval", "0.5")  # a pod as a compare's: [compare] max_hours
    pod_lines = [x for x in r.stderr.splitlines() if ": pod " in x]
    assert pod_lines and all(" INFO eval: pod " in x for x in pod_lines), r.stderr  # the job's, not `train:`
    assert "the pod needs at least 3 GB of VRAM" in r.stderr  # from the GGUF's size, as a compare's
    pod = pod_of(eval_dir)
    assert pod["state"] == "deleted" and fake.pod(pod["pod_id"]) is None
    assert json.loads((eval_dir / "run.json").read_text())["state"] == "succeeded"
    doc = json.loads((eval_dir / "eval.json").read_text())
    assert doc["tasks"] == ["colours"] and doc["child"]["target"] == "gpu" and doc["parent"]["skipped"] == "--no-parent"
    assert doc["child"]["output"]["n-samples"]["colours"]["effective"] == 2
    assert doc["summary"]["colours"]["samples"] == 2
    # The task went with its data, named from the job's folder; the GGUF was removed once served.
    assert "test: tasks/colours/colours.jsonl" in (eval_dir / "tasks" / "colours" / "colours.yaml").read_text()
    there = workspace(fake, pod["pod_id"])
    assert (there / "evals" / eval_dir.name / "tasks" / "colours" / "colours.jsonl").read_text() == data.read_text()
    assert not (there / rel).exists()


def test_ctrl_c_cancels_a_remote_eval_and_ends_its_pod(project, fake, smollm2_gguf, llama_cpp_dir, tmp_path):
    hanging = tmp_path / "hanging-server"
    (hanging / "bin").mkdir(parents=True)
    (hanging / "bin" / "llama-server").write_text("#!/bin/sh\necho 'never ready'\nexec sleep 3600\n")
    (hanging / "bin" / "llama-server").chmod(0o755)
    run_dir = pod_run(project, fake, None, hanging)
    with_gguf(run_dir, smollm2_gguf)
    proc = subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project.dir), "eval", "--target", "gpu",
                             "--no-parent"], env=clean_env(project.env, tmp_path / "home"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    def serving() -> bool:  # the job's server started on the pod (its run.json says running before that)
        for d in jobs(run_dir, "eval"):
            pod_id = pod_of(d).get("pod_id") if (d / "pod.json").is_file() else None
            log = workspace(fake, pod_id) / "evals" / d.name / "server.log" if pod_id else None
            if log is not None and log.is_file() and "never ready" in log.read_text():
                return True
        return False

    _, err = signalled_when(proc, serving, "the job's server never started")
    assert proc.returncode == 130, err
    [eval_dir] = jobs(run_dir, "eval")
    assert err.strip().splitlines()[-1].endswith(
        f"error: interrupted: eval {eval_dir.name} of run {RUN} cancelled"), err
    assert json.loads((eval_dir / "run.json").read_text())["state"] == "cancelled"
    assert "never ready" in (eval_dir / "server.log").read_text()  # fetched before the pod went
    pod = pod_of(eval_dir)
    assert pod["state"] == "deleted" and fake.pod(pod["pod_id"]) is None
    assert not (eval_dir / "eval.json").exists()
