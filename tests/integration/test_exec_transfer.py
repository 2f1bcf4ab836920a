"""Files between here and the target: tar upload/download, manifest, verify, safe extraction."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from overbrainer.errors import OverbrainerError
from overbrainer.exec.local import LocalExecutor
from overbrainer.exec.transfer import UnsafeArchive, VerifyError, extract_tar, local_manifest, sha256_file, verify

ENTRIES = ["output", "metrics.jsonl", "job.log"]


def make_run(root: Path) -> Path:
    (root / "data").mkdir(parents=True)
    (root / "data" / "train.jsonl").write_text('{"messages": []}\n')
    (root / "axolotl.yaml").write_text("base_model: x\n")
    (root / "ssh").mkdir()
    (root / "ssh" / "id_ed25519").write_text("never uploaded")
    (root / "pod.json").write_text("{}")
    (root / "run.json").write_text('{"state": "preparing"}\n')
    (root / "odd name\nwith newline.txt").write_text("odd")
    (root / "exec.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "exec.sh", 0o755)
    (root / "link").symlink_to("axolotl.yaml")
    (root / "empty").mkdir()
    return root


def make_outputs(d: Path) -> None:
    (d / "output" / "checkpoint-2").mkdir(parents=True)
    (d / "output" / "checkpoint-2" / "model.safetensors").write_bytes(os.urandom(3000))
    (d / "output" / "merged").mkdir()
    (d / "output" / "merged" / "model.safetensors").write_bytes(os.urandom(200_000))
    (d / "output" / "adapter_model.safetensors").write_bytes(os.urandom(70_000))
    (d / "output" / "odd \\ name\n.txt").write_text("x")
    (d / "metrics.jsonl").write_text('{"event":"begin"}\n')
    (d / "job.log").write_text("log\n")
    (d / "exit_code").write_text("0\n")


def test_upload_skips_ssh_pod_json_and_run_json_and_keeps_modes_and_links(executor, tmp_path):
    local = make_run(tmp_path / "local" / "run1")
    remote = f"{executor.workdir}/run1"
    executor.upload(str(local), remote)
    r = Path(remote)
    assert sorted(os.listdir(r)) == sorted(["data", "axolotl.yaml", "odd name\nwith newline.txt", "exec.sh",
                                            "link", "empty"])
    assert (r / "data" / "train.jsonl").read_text() == '{"messages": []}\n'
    assert os.access(r / "exec.sh", os.X_OK)
    assert os.readlink(r / "link") == "axolotl.yaml"
    executor.upload(str(local), remote)  # again: overwrites
    assert (r / "axolotl.yaml").read_text() == "base_model: x\n"


def test_upload_of_an_empty_dir_creates_the_remote_dir(executor, tmp_path):
    (tmp_path / "e").mkdir()
    executor.upload(str(tmp_path / "e"), f"{executor.workdir}/r")
    assert Path(executor.workdir, "r").is_dir()


def test_upload_of_chosen_entries_puts_each_at_its_path(executor, tmp_path):
    """Chosen files and folders, each to its own path (folders made), in one transfer: what
    compare sends of a GGUF and export of a model, without a staging folder."""
    local = make_run(tmp_path / "local" / "run1")
    (local / "output" / "gguf").mkdir(parents=True)
    (local / "output" / "gguf" / "m.gguf").write_bytes(os.urandom(10_000))
    (local / "model" / "sub").mkdir(parents=True)
    (local / "model" / "config.json").write_text("{}")
    (local / "model" / "sub" / "w.bin").write_bytes(b"w" * 100)
    remote = Path(executor.workdir, "run1")
    sent: list[tuple[int, int | None]] = []
    executor.upload(entries=[(local / "output" / "gguf" / "m.gguf", f"{remote}/output/gguf/m.gguf"),
                             (local / "model", f"{remote}/model"),
                             (local / "axolotl.yaml", "run1/axolotl.yaml")],  # relative: under workdir
                    progress=lambda done, total: sent.append((done, total)))
    assert sha256_file(remote / "output" / "gguf" / "m.gguf") == sha256_file(local / "output" / "gguf" / "m.gguf")
    assert (remote / "model" / "sub" / "w.bin").read_bytes() == b"w" * 100
    assert (remote / "axolotl.yaml").read_text() == "base_model: x\n"
    assert sorted(os.listdir(remote)) == ["axolotl.yaml", "model", "output"]  # nothing else
    assert sent[-1] == (10_000 + 2 + 100 + len("base_model: x\n"),) * 2
    assert not (tmp_path / "local" / "run1" / ".upload").exists()
    with pytest.raises(TypeError):
        executor.upload(str(local), str(remote), entries=[(local / "axolotl.yaml", f"{remote}/x")])


def test_local_upload_of_an_entry_onto_itself_is_a_no_op(tmp_path):
    ex = LocalExecutor(tmp_path / "runs")
    run = make_run(Path(ex.workdir) / "run1")
    before = sha256_file(run / "axolotl.yaml")
    ex.upload(entries=[(run / "axolotl.yaml", str(run / "axolotl.yaml"))])
    assert sha256_file(run / "axolotl.yaml") == before
    with pytest.raises(OverbrainerError, match="into itself"):
        ex.upload(entries=[(run / "data", str(run / "data" / "sub" / "data"))])


def test_download_round_trip_verifies_against_the_manifest(executor, tmp_path):
    remote = Path(executor.workdir, "run1")
    remote.mkdir(parents=True)
    make_outputs(remote)
    manifest = executor.manifest(str(remote), ENTRIES + ["absent"], ["checkpoint-*"])
    assert [p for p, _ in manifest] == sorted(["job.log", "metrics.jsonl", "output/adapter_model.safetensors",
                                                "output/merged/model.safetensors", "output/odd \\ name\n.txt"])
    assert dict(manifest)["job.log"] == sha256_file(remote / "job.log")
    local = tmp_path / "back" / "run1"
    executor.download(str(remote), str(local), ENTRIES + ["absent"], ["checkpoint-*"])
    verify(local, manifest, ENTRIES, ["checkpoint-*"])
    assert not (local / "output" / "checkpoint-2").exists() and not (local / "exit_code").exists()
    # pass 2 of a stopped run: the checkpoint alone, no exclude
    m2 = executor.manifest(str(remote), ["output/checkpoint-2"])
    executor.download(str(remote), str(local), ["output/checkpoint-2"])
    verify(local, m2, ["output/checkpoint-2"])
    assert len(m2) == 1


def test_download_of_nothing_creates_no_local_dir(executor, tmp_path):
    remote = Path(executor.workdir, "run1")
    remote.mkdir(parents=True)
    executor.download(str(remote), str(tmp_path / "nothing"), ENTRIES)
    assert not (tmp_path / "nothing").exists()
    assert executor.manifest(str(remote), ENTRIES) == []


def test_download_of_a_missing_run_dir_fails(executor, tmp_path):
    with pytest.raises(OverbrainerError, match="does not exist"):
        executor.download(f"{executor.workdir}/gone", str(tmp_path / "x"), ENTRIES)


def test_a_file_changed_after_the_manifest_is_detected(executor, tmp_path):
    remote = Path(executor.workdir, "run1")
    remote.mkdir(parents=True)
    make_outputs(remote)
    manifest = executor.manifest(str(remote), ENTRIES, ["checkpoint-*"])
    (remote / "output" / "adapter_model.safetensors").write_bytes(b"tampered")
    local = tmp_path / "back"
    executor.download(str(remote), str(local), ENTRIES, ["checkpoint-*"])
    with pytest.raises(VerifyError, match=r'verify failed: "output/adapter_model.safetensors" differs from the '
                                          r"target \(SHA-256 mismatch\)"):
        verify(local, manifest, ENTRIES, ["checkpoint-*"])


def test_verify_names_missing_and_extra_files(tmp_path):
    (tmp_path / "output").mkdir()
    (tmp_path / "output" / "a").write_text("a")
    (tmp_path / "output" / "checkpoint-1").mkdir()
    (tmp_path / "output" / "checkpoint-1" / "x").write_text("excluded")
    m = local_manifest(tmp_path, ["output"], ["checkpoint-*"])
    verify(tmp_path, m, ["output"], ["checkpoint-*"])
    with pytest.raises(VerifyError, match='"output/b" is missing locally'):
        verify(tmp_path, m + [("output/b", "0" * 64)], ["output"], ["checkpoint-*"])
    (tmp_path / "output" / "c").write_text("c")
    with pytest.raises(VerifyError, match='"output/c" is not on the target'):
        verify(tmp_path, m, ["output"], ["checkpoint-*"])


def test_local_upload_and_download_are_no_ops_on_the_same_dir(tmp_path):
    ex = LocalExecutor(tmp_path / "runs")
    run = make_run(Path(ex.workdir) / "run1")
    make_outputs(run)
    before = local_manifest(run, ["output", "data"])
    ex.upload(str(run), str(run))
    ex.download(str(run), str(run), ENTRIES)
    assert local_manifest(run, ["output", "data"]) == before
    with pytest.raises(OverbrainerError, match="into itself"):
        ex.upload(str(run), str(run / "data" / "sub"))


def test_a_symlink_on_the_target_pointing_outside_is_refused(executor, tmp_path):
    remote = Path(executor.workdir, "run1")
    (remote / "output").mkdir(parents=True)
    (remote / "output" / "model").write_text("m")
    (remote / "output" / "escape").symlink_to("/etc")
    local = tmp_path / "back"
    with pytest.raises(UnsafeArchive, match="symlink 'output/escape'.* points to an absolute path"):
        executor.download(str(remote), str(local), ["output"])
    assert not (local / "output" / "escape").exists()


def _tar(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                tf.addfile(info)
    return buf.getvalue()


def _info(name, kind=tarfile.REGTYPE, link=""):
    i = tarfile.TarInfo(name)
    i.type, i.linkname, i.mode = kind, link, 0o644
    return i


@pytest.mark.parametrize("members, why", [
    ([(_info("/etc/evil"), b"x")], "absolute path"),
    ([(_info("../evil"), b"x")], "contains `..`"),
    ([(_info("output/../../evil"), b"x")], "contains `..`"),
    ([(_info("out", tarfile.SYMTYPE, "../.."), None)], "points outside"),
    ([(_info("out", tarfile.SYMTYPE, "/tmp"), None)], "absolute path"),
    ([(_info("d", tarfile.DIRTYPE), None), (_info("d/l", tarfile.SYMTYPE, ".."), None),
      (_info("d/l/x", tarfile.SYMTYPE, ".."), None)], "points outside"),
    ([(_info("d", tarfile.SYMTYPE, "."), None), (_info("h", tarfile.LNKTYPE, "../etc/passwd"), None)],
     "contains `..`"),
    ([(_info("out", tarfile.SYMTYPE, ""), None)], "points nowhere"),
    ([(_info("h", tarfile.LNKTYPE, "/etc/passwd"), None)], "absolute path"),
    ([(_info("d", tarfile.DIRTYPE), None), (_info("d/h", tarfile.LNKTYPE, "d/../../x"), None)], "contains `..`"),
    ([(_info("dev", tarfile.CHRTYPE), None)], "device"),
    ([(_info("fifo", tarfile.FIFOTYPE), None)], "device"),
])
def test_unsafe_tar_members_are_refused(tmp_path, members, why):
    dest = tmp_path / "run" / "dest"
    stream = io.BytesIO(_tar(*members))
    with pytest.raises(UnsafeArchive, match=why):
        extract_tar(stream.read, dest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert not (tmp_path / "evil").exists() and not (tmp_path / "run" / "evil").exists()


def test_extraction_drops_owners_and_odd_modes(tmp_path):
    """tarfile's data filter: no setuid, no group/other write, no chown to the target's users."""
    odd = _info("tool")
    odd.mode, odd.uid, odd.gid, odd.uname = 0o4777, 4242, 4242, "pod"
    plain = _info("notes.txt")
    plain.mode = 0o466  # not writable by its owner there: it is here
    extract_tar(io.BytesIO(_tar((odd, b"#!/bin/sh\n"), (plain, b"n"))).read, tmp_path / "d")
    tool, notes = os.stat(tmp_path / "d" / "tool"), os.stat(tmp_path / "d" / "notes.txt")
    assert stat.S_IMODE(tool.st_mode) == 0o755 and tool.st_uid == os.getuid()
    assert stat.S_IMODE(notes.st_mode) == 0o644


def test_extraction_never_writes_through_an_existing_symlink(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (dest / "job.log").symlink_to(outside)
    (dest / "output").symlink_to(tmp_path)
    with pytest.raises(UnsafeArchive, match="leads outside"):
        extract_tar(io.BytesIO(_tar((_info("output/x"), b"y"))).read, dest)
    names = extract_tar(io.BytesIO(_tar((_info("job.log"), b"new log"))).read, dest)
    assert names == ["job.log"] and outside.read_text() == "keep"
    assert (dest / "job.log").read_text() == "new log" and not (dest / "job.log").is_symlink()


def test_uploads_and_downloads_report_their_bytes(executor, tmp_path, monkeypatch):
    """Every chunk reported (no throttle here): from (0, total) up, never past total, ending at
    (total, total), total being the bytes of the files moved; a download counts the target's files."""
    from overbrainer.exec import transfer

    monkeypatch.setattr(transfer, "PROGRESS_SECS", 0.0)
    local = make_run(tmp_path / "local" / "run1")
    (local / "data" / "big.bin").write_bytes(os.urandom(3_000_000))
    up: list[tuple[int, int | None]] = []
    remote = Path(executor.workdir, "run1")
    executor.upload(str(local), str(remote), progress=lambda done, total: up.append((done, total)))
    sent = transfer.tree_size(local, transfer.upload_names(local, ("ssh", "pod.json", "run.json")))
    assert sent > 3_000_000
    make_outputs(remote)
    down: list[tuple[int, int | None]] = []
    executor.download(str(remote), str(tmp_path / "back"), ENTRIES, ["checkpoint-*"],
                      progress=lambda done, total: down.append((done, total)))
    got = 200_000 + 70_000 + 1 + len('{"event":"begin"}\n') + len("log\n")  # make_outputs minus checkpoints
    for events, total in ((up, sent), (down, got)):
        assert events[0] == (0, total) and events[-1] == (total, total)
        assert len(events) > 3, "progress inside the transfer, not only its ends"
        dones = [d for d, _ in events]
        assert dones == sorted(dones) and all(t == total for _, t in events)
