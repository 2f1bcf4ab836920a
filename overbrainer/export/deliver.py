"""What an export leaves here: the GGUF in `runs/<run>/output/gguf/`, `export.json` in the export's
directory (its record: `ExportRecord`, read by compare to find a run's GGUF), a `Modelfile` beside
the GGUF, and with a name an Ollama model (docs/export.md#files).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from overbrainer.support.atomic import atomic_write_text
from overbrainer.support.record_file import RecordFile

log = logging.getLogger(__name__)

OLLAMA_SECS = 600
VERSION_FILE = "llama_cpp.txt"  # llama.cpp's version, written by export.sh beside its GGUF's job


def read_version(job_dir: Path) -> str:
    """The first line of the job's `llama_cpp.txt` (cut to 200 characters), else `unknown`."""
    try:
        text = (job_dir / VERSION_FILE).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        text = ""
    return text.splitlines()[0][:200] if text else "unknown"


EXPORT_JSON = RecordFile("export record")
RECORD = "export.json"


@dataclass
class ExportRecord:
    """`export.json`: the GGUF an export made (`file`, relative to the run directory) and how."""
    file: str
    quantize: str | None = None
    llama_cpp: str | None = None
    sha256: str | None = None
    size: int | None = None
    created: str = ""

    @classmethod
    def load(cls, path: Path) -> "ExportRecord":
        """The record in `path`; errors name the file and a position or a field."""
        f = EXPORT_JSON.fields(EXPORT_JSON.read(path), path)
        return cls(file=f.text("file", optional=False), quantize=f.text("quantize"), llama_cpp=f.text("llama_cpp"),
                   sha256=f.text("sha256"), size=f.integer("size"), created=f.text("created") or "")


def write_export_json(job_dir: Path, *, quantize: str, llama_cpp: str, file: str, sha256: str, size: int,
                      created: str) -> dict:
    doc = {"quantize": quantize, "llama_cpp": llama_cpp, "file": file, "sha256": sha256, "size": size,
           "created": created}
    EXPORT_JSON.write(job_dir / RECORD, doc)
    return doc


def write_modelfile(gguf: Path, num_ctx: int | None) -> Path:
    """`Modelfile` beside the GGUF, naming it (no TEMPLATE: Ollama uses the GGUF's own)."""
    text = f"FROM ./{gguf.name}\n" + (f"PARAMETER num_ctx {num_ctx}\n" if num_ctx else "")
    path = gguf.parent / "Modelfile"
    atomic_write_text(path, text)
    return path


def ollama_create(name: str, gguf_dir: Path, shown_dir: str) -> str | None:
    """`ollama create NAME -f Modelfile` in the GGUF's directory: the line to report, or None
    (a warning with the command said why it was not created)."""
    command = f"cd {shown_dir} && ollama create {name} -f Modelfile"
    exe = shutil.which("ollama")
    if exe is None:
        log.warning("ollama is not installed here: create the model with `%s`", command)
        return None
    try:
        proc = subprocess.run([exe, "create", name, "-f", "Modelfile"], cwd=gguf_dir, capture_output=True,
                              text=True, timeout=OLLAMA_SECS, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        log.warning("ollama create failed (%s): run `%s`", e, command)
        return None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit code {proc.returncode}"
        log.warning("ollama create failed (%s): run `%s`", last, command)
        return None
    return f"export: Ollama model {name} created: `ollama run {name}`"
