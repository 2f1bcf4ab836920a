"""Executor.fetch: the download verified against the manifest the target computed from its own
disk, with the manifest taken during the download and each file hashed as it is extracted."""

from __future__ import annotations

import io
import os
import tarfile
import threading
from pathlib import Path

import pytest

from overbrainer.errors import OverbrainerError
from overbrainer.exec import transfer
from overbrainer.exec.transfer import VerifyError, extract_tar, local_manifest, verify

ENTRIES = ["output", "metrics.jsonl", "job.log"]
EXCLUDE = ["checkpoint-*"]
ADAPTER = "output/adapter_model.safetensors"
DIFFERS = f'verify failed: "{ADAPTER}" differs from the target \\(SHA-256 mismatch\\)'


def make_outputs(d: Path) -> Path:
    (d / "output" / "checkpoint-2").mkdir(parents=True)
    (d / "output" / "checkpoint-2" / "model.safetensors").write_bytes(os.urandom(3000))
    (d / "output" / "merged").mkdir()
    (d / "output" / "merged" / "model.safetensors").write_bytes(os.urandom(200_000))
    (d / ADAPTER).write_bytes(b"pristine;" * 10_000)
    (d / "metrics.jsonl").write_text('{"event":"begin"}\n')
    (d / "job.log").write_text("log\n")
    return d


@pytest.fixture
def remote(executor):
    return make_outputs(Path(executor.workdir, "run1"))


def test_fetch_verifies_without_reading_the_downloaded_files_again(executor, remote, tmp_path, monkeypatch):
    read = []
    real = transfer.sha256_file
    monkeypatch.setattr(transfer, "sha256_file", lambda p: read.append(str(p)) or real(p))
    local = tmp_path / "back"
    manifest = executor.fetch(str(remote), str(local), ENTRIES + ["absent"], EXCLUDE)
    assert manifest == executor.manifest(str(remote), ENTRIES, EXCLUDE)
    assert [p for p, _ in manifest] == ["job.log", "metrics.jsonl", ADAPTER, "output/merged/model.safetensors"]
    assert not [p for p in read if p.startswith(str(local))]
    assert not (local / "output" / "checkpoint-2").exists()
    assert manifest == local_manifest(local, ENTRIES, EXCLUDE)  # what a full re-read says


def test_a_file_corrupted_in_flight_is_caught(executor, remote, tmp_path, monkeypatch):
    real = transfer.extract_tar

    def corrupting(read, dest, written=None):
        return real(lambda n: read(n).replace(b"pristine;", b"Pristine;"), dest, written)

    monkeypatch.setattr(transfer, "extract_tar", corrupting)
    with pytest.raises(VerifyError, match=DIFFERS):
        executor.fetch(str(remote), str(tmp_path / "back"), ENTRIES, EXCLUDE)


def test_a_file_changed_on_the_target_during_the_download_is_caught(executor, remote, tmp_path, monkeypatch):
    """The target rewrites a file once it was sent; its manifest, taken after, hashes the new bytes."""
    sent = threading.Event()
    real_download, real_manifest = executor.download, executor.manifest

    def download(*a, **kw):
        written = real_download(*a, **kw)
        (remote / ADAPTER).write_bytes(b"changed on the target")
        sent.set()
        return written

    def manifest(*a, **kw):
        assert sent.wait(30)
        return real_manifest(*a, **kw)

    monkeypatch.setattr(executor, "download", download)
    monkeypatch.setattr(executor, "manifest", manifest)
    with pytest.raises(VerifyError, match=DIFFERS):
        executor.fetch(str(remote), str(tmp_path / "back"), ENTRIES, EXCLUDE)


@pytest.mark.parametrize("change, problem", [
    (lambda m: m + [("output/more.bin", "0" * 64)], '"output/more.bin" is missing locally'),
    (lambda m: [e for e in m if e[0] != "job.log"], '"job.log" is not on the target'),
])
def test_missing_and_extra_files_are_caught(executor, remote, tmp_path, monkeypatch, change, problem):
    real = executor.manifest
    monkeypatch.setattr(executor, "manifest", lambda *a: change(real(*a)))
    with pytest.raises(VerifyError, match=problem):
        executor.fetch(str(remote), str(tmp_path / "back"), ENTRIES, EXCLUDE)


def test_a_stale_local_file_is_not_on_the_target(executor, remote, tmp_path):
    local = tmp_path / "back"
    (local / "output").mkdir(parents=True)
    (local / "output" / "stale.bin").write_text("from an earlier run")
    with pytest.raises(VerifyError, match='"output/stale.bin" is not on the target'):
        executor.fetch(str(remote), str(local), ENTRIES, EXCLUDE)


def test_a_manifest_failure_fails_the_fetch_even_when_the_download_succeeds(executor, remote, tmp_path,
                                                                            monkeypatch):
    def manifest(*a):
        raise OverbrainerError("the target's manifest has an unexpected record")

    monkeypatch.setattr(executor, "manifest", manifest)
    local = tmp_path / "back"
    with pytest.raises(OverbrainerError, match="^manifest failed: the target's manifest has an unexpected record$"):
        executor.fetch(str(remote), str(local), ENTRIES, EXCLUDE)
    assert (local / ADAPTER).read_bytes() == (remote / ADAPTER).read_bytes()  # the download went through


def test_a_failed_download_is_named_and_a_missing_dir_fails_in_the_manifest(executor, remote, tmp_path):
    (remote / "output" / "escape").symlink_to("/etc")
    with pytest.raises(OverbrainerError, match="^download failed: refusing symlink 'output/escape'"):
        executor.fetch(str(remote), str(tmp_path / "back"), ENTRIES, EXCLUDE)
    with pytest.raises(OverbrainerError, match="^manifest failed: .*gone does not exist"):
        executor.fetch(f"{executor.workdir}/gone", str(tmp_path / "back2"), ENTRIES)


def _member(name: str, data: bytes | None = None, link: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.mode, info.mtime = 0o644, 1_000_000
    if link:
        info.type, info.linkname = tarfile.LNKTYPE, link
    return info, data


def _extract(dest: Path, *members) -> transfer.Written:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for info, data in members:
            info.size = len(data) if data is not None else 0
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    written: transfer.Written = {}
    extract_tar(io.BytesIO(buf.getvalue()).read, dest, written)
    return written


def test_extraction_hashes_match_the_files_left_behind_with_hard_links_and_repeated_names(tmp_path):
    dest = tmp_path / "d"
    written = _extract(dest, _member("p", b"one"), _member("q", link="p"), _member("q", b"two"),
                       _member("r", b"old"), _member("r", b"new"))
    # q was a hard link to p: rewriting q must not change p
    assert [(dest / n).read_bytes() for n in "pqr"] == [b"one", b"two", b"new"]
    assert local_manifest(dest, ["p", "q", "r"], written=written) == local_manifest(dest, ["p", "q", "r"])


def test_a_file_changed_after_its_extraction_is_read_again(tmp_path):
    dest = tmp_path / "d"
    written = _extract(dest, _member("job.log", b"original"))
    truth = local_manifest(dest, ["job.log"])
    (dest / "job.log").write_bytes(b"tampered")  # same size, at once: the stat key still changes
    with pytest.raises(VerifyError, match='"job.log" differs from the target'):
        verify(dest, truth, ["job.log"], written=written)


def _tool(bin_dir: Path, name: str, body: str) -> None:
    (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / name).chmod(0o755)


@pytest.mark.parametrize("tools", ["openssl", "sha256sum -z", "sha256sum", "failing openssl"])
def test_the_manifest_script_agrees_with_a_full_read_whichever_hasher_the_target_has(tmp_path, tools):
    """openssl for plain paths, sha256sum -z for paths with a newline or backslash; run by sh on a
    PATH holding only the tools given (a sha256sum without -z stands for an old coreutils)."""
    import shutil
    import subprocess

    from overbrainer.exec import scripts
    from overbrainer.exec.transfer import parse_manifest

    run = make_outputs(tmp_path / "run")
    (run / "output" / "odd \\ name\n.txt").write_text("x")
    (run / "output" / "new\nline dir").mkdir()
    (run / "output" / "new\nline dir" / "f").write_text("y")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "find", "tr"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    if tools == "sha256sum":
        _tool(bin_dir, "sha256sum", f'for a; do [ "$a" = -z ] && exit 1; done\nexec {shutil.which("sha256sum")} "$@"')
    else:
        (bin_dir / "sha256sum").symlink_to(shutil.which("sha256sum"))
    if tools == "openssl":
        (bin_dir / "openssl").symlink_to(shutil.which("openssl"))
    if tools == "failing openssl":  # hashes, then fails (an unreadable file): the manifest must fail
        _tool(bin_dir, "openssl", f'{shutil.which("openssl")} "$@" || exit; [ $# -le 3 ] || exit 1')
    script = scripts.manifest(str(run), ENTRIES, EXCLUDE)
    out = subprocess.run(["/bin/sh", "-c", script], env={"PATH": str(bin_dir)}, capture_output=True)
    if tools == "failing openssl":
        assert out.returncode == 1 and b" *./output/" in out.stdout
        return
    assert out.returncode == 0, out.stderr
    assert parse_manifest(out.stdout) == local_manifest(run, ENTRIES, EXCLUDE)
    assert len(parse_manifest(out.stdout)) == 6
    assert (b" *./output/" in out.stdout) == (tools == "openssl")
