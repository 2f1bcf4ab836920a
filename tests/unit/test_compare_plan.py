"""compare/plan.py finds a run's GGUF through its export records (export/deliver.ExportRecord)."""

from __future__ import annotations

import json
import logging

from overbrainer.compare.plan import run_gguf


def _export(path, **doc):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def test_an_unreadable_export_record_is_named_and_passed_over(tmp_path, caplog):
    run_dir = tmp_path / "demo_20260101-000000"
    (run_dir / "output" / "gguf").mkdir(parents=True)
    (run_dir / "output" / "gguf" / "a.gguf").write_bytes(b"GGUF")
    _export(run_dir / "exports" / "export_1" / "export.json", file="output/gguf/a.gguf", sha256="ab",
            quantize="Q4_K_M", llama_cpp="b1", size=4, created="2026-01-01T00:00:01Z")
    bad = run_dir / "exports" / "export_2" / "export.json"
    _export(bad, file="output/gguf/a.gguf", sha256=7, created="2026-01-01T00:00:02Z")
    with caplog.at_level(logging.WARNING):
        found = run_gguf(run_dir)
    assert found is not None and found.sha256 == "ab" and found.created == "2026-01-01T00:00:01Z"
    assert f"compare: ignoring {bad} is not a valid export record (field sha256)" in caplog.text
