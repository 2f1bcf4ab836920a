"""`[export] after_training = true`: the export runs inside the training job (the fake axolotl
trains; with `set_model` its output is SmolLM2-135M, converted for real by llama.cpp)."""

from __future__ import annotations

import hashlib
import json

from tests.integration.test_runs_support import make_project


def with_export(p, quantize: str = "F16"):
    toml = p.dir / "overbrainer.toml"
    toml.write_text(toml.read_text() + f'\n[export]\nafter_training = true\nquantize = "{quantize}"\n')
    return p


def test_the_export_inside_the_training_job_delivers_its_gguf_with_the_run(tmp_path, fake_axolotl, smollm2_hf,
                                                                          llama_cpp_dir):
    p = with_export(make_project(tmp_path, fake_axolotl))
    fake_axolotl.set_model(smollm2_hf)
    p.env["OVERBRAINER_LLAMA_CPP_DIR"] = str(llama_cpp_dir)  # the default llama_cpp_dir of every target
    r = p.run("train", timeout=300)
    assert r.returncode == 0, r.stderr
    [rid] = p.run_ids()
    run_dir = p.runs / rid
    gguf = run_dir / "output" / "gguf" / f"{rid}-F16.gguf"
    size = gguf.stat().st_size
    assert f"train: GGUF in runs/{rid}/output/gguf/{gguf.name} (F16, {size / 1e6:.1f} MB), Modelfile beside it" \
        in r.stdout.splitlines()
    assert "INFO train: exporting" in r.stderr and "INFO train: converting to GGUF" in r.stderr
    doc = json.loads((run_dir / "export.json").read_text())
    assert doc["file"] == f"output/gguf/{gguf.name}" and doc["quantize"] == "F16" and doc["size"] == size
    assert doc["sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert doc["llama_cpp"].startswith("0.") and "version" not in doc["llama_cpp"]
    assert (gguf.parent / "Modelfile").read_text().startswith(f"FROM ./{gguf.name}\n")
    assert not (run_dir / "export-work").exists()
    from overbrainer.compare.plan import run_gguf

    assert run_gguf(run_dir).file == doc["file"]


def test_a_failed_export_inside_the_job_leaves_the_run_succeeded_with_a_warning(tmp_path, fake_axolotl,
                                                                                llama_cpp_dir):
    p = with_export(make_project(tmp_path, fake_axolotl))  # the fake adapter is no model llama.cpp reads
    p.env["OVERBRAINER_LLAMA_CPP_DIR"] = str(llama_cpp_dir)
    r = p.run("train", timeout=120)
    assert r.returncode == 0, r.stderr
    [rid] = p.run_ids()
    assert p.record(rid)["state"] == "succeeded"
    assert (f"WARN train: the export in the job made no GGUF: see runs/{rid}/job.log, or run "
            f"`overbrainer export {rid}`") in r.stderr
    assert not (p.runs / rid / "export.json").exists()
    assert "holds no model" in (p.runs / rid / "job.log").read_text()
