"""Transfer benchmark: the SSH executor against OpenSSH, both ways.

Creates ~1 GiB of run files (a few big, many small, random data), starts the test sshd on
127.0.0.1 (tests/fixtures/sshd_server.py), and times, alternately over BENCH_REPEAT rounds (default 3):

- ours: upload = `SshExecutor.upload`; download = what retrieving a run does (`fetch`): the
  target's SHA-256 manifest (on its own channel, during the download), the download (each file
  hashed as it is written) and the verification against the manifest;
- `tar | ssh`: the like-for-like baseline (one tar stream over one ssh session, no checksums);
- `scp -r`: what a user would type (recent OpenSSH runs it over SFTP).

Prints the medians in MB/s and the ratios. Target: ours >= 0.9x `tar | ssh` both ways; exits 1
when it is missed.
Usage: scripts/bench_transfer.sh [size_mib]
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from overbrainer.exec.ssh import SshExecutor  # noqa: E402
from tests.fixtures.sshd_server import SshServer  # noqa: E402

MIB = 1 << 20
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))


def make_files(root: Path, total_mib: int) -> int:
    """Three big files (~90 %) and many small ones (1-64 KiB, ~10 %)."""
    rng = random.Random(7)
    out = root / "output"
    (out / "small").mkdir(parents=True)
    big = total_mib * MIB * 9 // 10
    size = 0
    for i, part in enumerate((0.5, 0.3, 0.2)):
        n = int(big * part)
        with open(out / f"model-{i}.safetensors", "wb") as f:
            left = n
            while left:
                chunk = min(left, 8 * MIB)
                f.write(os.urandom(chunk))
                left -= chunk
        size += n
    i = 0
    while size < total_mib * MIB:
        n = rng.randint(1024, 64 * 1024)
        sub = out / "small" / f"d{i // 500}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i}.bin").write_bytes(os.urandom(n))
        size += n
        i += 1
    (root / "job.log").write_text("log\n")
    return size


class TimedSsh(SshExecutor):
    """Notes how long the manifest and the download of each `fetch` take (they overlap)."""

    parts: dict[str, list[float]] = {"manifest": [], "download": [], "verify": []}

    def _timed(self, name: str, fn, *a, **kw):
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            self.parts[name].append(time.perf_counter() - t)

    def manifest(self, *a, **kw):
        return self._timed("manifest", super().manifest, *a, **kw)

    def download(self, *a, **kw):
        out = self._timed("download", super().download, *a, **kw)
        self._downloaded = time.perf_counter()
        return out

    def fetch(self, *a, **kw):
        out = super().fetch(*a, **kw)
        self.parts["verify"].append(time.perf_counter() - self._downloaded)  # the wait for the manifest too
        return out


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run(cmd: str) -> None:
    subprocess.run(["sh", "-c", cmd], check=True)


def main() -> int:
    total_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    base = Path(tempfile.mkdtemp(prefix="bench-transfer-"))
    server = SshServer.start_in(base / "sshd")
    try:
        src = base / "src" / "run1"
        size = make_files(src, total_mib)
        n_files = sum(len(f) for _, _, f in os.walk(src))
        print(f"data: {size / MIB:.0f} MiB in {n_files} files; sshd on 127.0.0.1:{server.port}", flush=True)
        ex = TimedSsh(server.endpoint(), workdir=str(base / "remote"))
        ssh = f"ssh -F {shlex.quote(str(server.ssh_config))} -q {server.alias}"
        scp = ["scp", "-F", str(server.ssh_config), "-q", "-r"]
        entries = ["output", "job.log"]
        remote = base / "remote"
        os.sync()

        def fresh(path: Path) -> Path:
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
            return path

        # name: (the destination, emptied before the clock starts, so no case times a deletion; the run)
        cases = {
            "up ours": (remote / "ours", lambda: ex.upload(str(src), f"{remote}/ours")),
            "up tar|ssh": (remote / "tar", lambda: run(f"tar -C {shlex.quote(str(src))} -cf - {' '.join(entries)} | "
                                                       f"{ssh} 'tar -C {remote}/tar -xf -'")),
            "up scp": (remote / "scp", lambda: subprocess.run([*scp, str(src / "output"), str(src / "job.log"),
                                                               f"{server.alias}:{remote / 'scp'}/"], check=True)),
            "down ours": (base / "back-ours", lambda: ex.fetch(f"{remote}/ours", str(base / "back-ours"), entries)),
            "down tar|ssh": (base / "back-tar", lambda: run(f"{ssh} 'tar -C {remote}/ours -cf - {' '.join(entries)}' | "
                                                            f"tar -C {shlex.quote(str(base / 'back-tar'))} -xf -")),
            "down scp": (base / "back-scp", lambda: subprocess.run(
                [*scp, *(f"{server.alias}:{remote}/ours/{e}" for e in entries), str(base / "back-scp") + "/"],
                check=True)),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(REPEAT):  # alternate: this box is shared, medians of interleaved rounds
            for name, (dest, fn) in cases.items():
                fresh(dest)
                os.sync()
                times[name].append(timed(fn))
        ex.close()
        med = {name: statistics.median(t) for name, t in times.items()}

        def rate(sec: float) -> float:
            return size / MIB / sec

        print(f"medians of {REPEAT} alternated rounds (ours includes the manifest and verification on download):")
        ok = True
        for way in ("up", "down"):
            ours, tar, scp_t = med[f"{way} ours"], med[f"{way} tar|ssh"], med[f"{way} scp"]
            ratio_tar, ratio_scp = tar / ours, scp_t / ours
            ok &= ratio_tar >= 0.9
            print(f"{way + 'load':8s} ours {rate(ours):7.1f} MB/s ({ours:5.1f} s)   tar|ssh {rate(tar):7.1f} MB/s "
                  f"({tar:5.1f} s)   scp {rate(scp_t):7.1f} MB/s ({scp_t:5.1f} s)   "
                  f"ours/tar|ssh {ratio_tar:.2f}   ours/scp {ratio_scp:.2f}")
        print("ours on download (manifest and download overlap; verify = after the download, waiting for the "
              "manifest included): "
              + ", ".join(f"{name} {statistics.median(t):.1f} s" for name, t in ex.parts.items()))
        print("target (ours >= 0.9x tar|ssh both ways):", "met" if ok else "MISSED")
        return 0 if ok else 1
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
