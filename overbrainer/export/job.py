"""The export's part of a job: its scripts, its environment and secrets, what it sends to the
target, and what it leaves here. `export_flow` runs it as a job of its own; a compare of a run
that has no GGUF yet runs it first in its own job, on the same pod (compare/job.py).

- Files: `export.sh` and `llama_cpp.sh`; one step `sh export.sh` in the job's directory
  `<root>/<kind>s/<id>`, reading the model at `../../<model>` and `../../axolotl.yaml`, writing
  `../../output/gguf/<run>-<TYPE>.gguf` (`<root>`: the run's directory on the target).
- Secrets: the HF token (OVERBRAINER_HF_TOKEN) when the model is an adapter: the merge fetches
  the base model itself on the target. It reaches the job's environment only.
- Sent (`upload_if_gone`): nothing when a read-only probe finds the model and axolotl.yaml on the
  target; else as little as makes the model: an adapter's folder without its checkpoints, earlier
  GGUFs and `merged/` (the target merges again from the base it fetches), a full model's folder
  without its checkpoints and GGUFs, and axolotl.yaml; one transfer, its size logged.
- Home (`fetch_gguf`, `deliver`): the GGUF verified against the target's SHA-256 into
  `runs/<run>/output/gguf/`, then `export.json` (in the job's directory), the Modelfile beside it.
"""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from overbrainer.config.model import Config, Target
from overbrainer.errors import OverbrainerError
from overbrainer.exec.runtime import Step
from overbrainer.exec.transfer import tree_size
from overbrainer.export import llama_cpp
from overbrainer.export.deliver import VERSION_FILE, read_version, write_export_json, write_modelfile
from overbrainer.export.gate import CONFIG_NAME, Source, sequence_len
from overbrainer.support import fmt

log = logging.getLogger(__name__)

SCRIPT = "export.sh"


@dataclass
class ExportPart:
    """What an export adds to a job (see the module docstring)."""
    source: Source
    quantize: str
    files: dict[str, str]
    env: dict[str, str]
    secrets: dict[str, str]

    @property
    def gguf_name(self) -> str:
        return f"{self.source.record.id}-{self.quantize}.gguf"

    @property
    def gguf_rel(self) -> str:
        """The GGUF, relative to the run's directory (here and on the target)."""
        return f"output/gguf/{self.gguf_name}"

    @property
    def step(self):
        return Step("export", ("sh", SCRIPT), from_path=True)

    def upload_if_gone(self, executor, remote_job_dir: str) -> None:
        upload_if_gone(executor, self.source, remote_job_dir)

    def fetch_gguf(self, executor, remote_job_dir: str) -> str:
        """The GGUF home, verified against the target's SHA-256 (which is returned)."""
        manifest = executor.fetch(run_root(remote_job_dir), str(self.source.run_dir), [self.gguf_rel])
        return dict(manifest)[self.gguf_rel]

    def deliver(self, job_dir: Path, sha256: str, created: str) -> dict:
        """export.json in `job_dir` and the Modelfile beside the GGUF; export.json's content."""
        gguf = self.source.run_dir / self.gguf_rel
        doc = write_export_json(job_dir, quantize=self.quantize, llama_cpp=read_version(job_dir),
                                file=self.gguf_rel, sha256=sha256, size=gguf.stat().st_size, created=created)
        write_modelfile(gguf, sequence_len(self.source.run_dir))
        return doc

    def size_line(self) -> str:
        gguf = self.source.run_dir / self.gguf_rel
        return f"{self.quantize}, {fmt.size(gguf.stat().st_size)}"


def export_part(config: Config, source: Source, quantize: str, target: Target) -> ExportPart:
    """The export of `source`'s model to `quantize` on `target` (its llama.cpp settings)."""
    files = {SCRIPT: llama_cpp.script(SCRIPT), llama_cpp.SCRIPT: llama_cpp.script(llama_cpp.SCRIPT)}
    env = {"OVERBRAINER_EXPORT_NAME": source.record.id, "OVERBRAINER_EXPORT_QUANTIZE": quantize,
           "OVERBRAINER_EXPORT_MODEL": f"../../{source.model}", "OVERBRAINER_EXPORT_CONFIG": f"../../{CONFIG_NAME}",
           **llama_cpp.job_env(target)}
    secrets = {}
    token = config.hf_token
    if token is not None and is_adapter(source.run_dir / source.model):
        secrets["HF_TOKEN"] = token.resolve()
    return ExportPart(source, quantize, files, env, secrets)


FETCHED = [VERSION_FILE]


def is_adapter(model: Path) -> bool:
    return (model / "adapter_config.json").is_file()


def run_root(remote_job_dir: str) -> str:
    """The run's directory on the target, from a side job's `<root>/<kind>s/<id>`."""
    return str(PurePosixPath(remote_job_dir).parent.parent)


def upload_if_gone(executor, source: Source, remote_job_dir: str) -> int:
    """Upload the run's model (as little as makes it) and axolotl.yaml when a read-only probe
    finds them gone from the target; the bytes sent."""
    remote_run = run_root(remote_job_dir)
    q = shlex.quote
    model = f"{q(remote_run)}/{q(source.model)}"
    probe = (f"if [ -f {q(remote_run)}/{CONFIG_NAME} ] && {{ [ -f {model}/config.json ] || "
             f"[ -f {model}/adapter_config.json ] || [ -f {model}/merged/config.json ]; }}; "
             "then echo present; else echo missing; fi")
    if executor.probe(probe, timeout=60).strip() == "present":
        return 0
    entries = [*model_entries(source.run_dir / source.model, f"{remote_run}/{source.model}"),
               (source.run_dir / CONFIG_NAME, f"{remote_run}/{CONFIG_NAME}")]
    size = sum(tree_size(path.parent, [path.name], ()) for path, _ in entries)
    what = "adapter" if is_adapter(source.run_dir / source.model) else "model"
    log.info("export: the model of run %s is not on the target: sending its %s and %s (%s)", source.record.id,
             what, CONFIG_NAME, fmt.size(size))
    executor.upload(entries=entries)
    return size


def model_entries(src: Path, remote: str) -> list[tuple[Path, str]]:
    """A model folder's entries to send: all but its checkpoints and earlier GGUFs, and for an
    adapter its merged model too (the target merges again)."""
    adapter = is_adapter(src)

    def skipped(name: str) -> bool:
        return name.startswith("checkpoint-") or name == "gguf" or adapter and name == "merged"

    entries = [(path, f"{remote}/{path.name}") for path in sorted(src.iterdir())
               if not skipped(path.name)] if src.is_dir() else []
    if not any(_holds_a_file(path) for path, _ in entries):
        raise OverbrainerError(f"{src} holds no file to upload")
    return entries


def _holds_a_file(path: Path) -> bool:
    return path.is_file() or any(p.is_file() for p in path.rglob("*"))
