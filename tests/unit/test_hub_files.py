"""What a push sends: the walk of output/ and its repo paths."""

from __future__ import annotations

import pytest

from overbrainer.errors import OverbrainerError
from overbrainer.hub.files import collect


def _write(root, files):
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_walk_skips_hidden_checkpoints_debug_log_symlinks_and_readme_and_flattens_gguf(tmp_path):
    out = tmp_path / "output"
    _write(out, {"adapter_model.safetensors": b"a", "adapter_config.json": b"{}", "merged/model.safetensors": b"m",
                 "gguf/r-Q4_K_M.gguf": b"g", "gguf/Modelfile": b"FROM x", "checkpoint-2/state.json": b"c",
                 "debug.log": b"d", ".cache/x": b"h", "README.md": b"r", "merged/debug.log": b"kept"})
    (out / "link.bin").symlink_to(out / "adapter_config.json")
    assert [(u.path, u.size) for u in collect(out)] == [
        ("Modelfile", 6), ("adapter_config.json", 2), ("adapter_model.safetensors", 1), ("merged/debug.log", 4),
        ("merged/model.safetensors", 1), ("r-Q4_K_M.gguf", 1)]


def test_two_files_on_one_repo_path_is_an_error(tmp_path):
    out = tmp_path / "output"
    _write(out, {"Modelfile": b"1", "gguf/Modelfile": b"2"})
    with pytest.raises(OverbrainerError, match=r"would both be pushed as Modelfile: remove one"):
        collect(out)


def test_nothing_to_push(tmp_path):
    out = tmp_path / "output"
    _write(out, {"checkpoint-1/x": b"1", "debug.log": b"d"})
    with pytest.raises(OverbrainerError, match="holds nothing to push"):
        collect(out)
