"""What a training job needs from the train package: the config file name, the
metrics plugin shipped with the run, and whether the job merges the adapter.

The job's command itself (stage lines, telemetry env, the snapshot-marker chain, native/docker/
podman wrapping) is built by `exec/runtime.py` (`Runtime.job`).
"""

from __future__ import annotations

import os
from pathlib import Path

from overbrainer.config.model import Training
from overbrainer.support.atomic import atomic_write_bytes

PLUGIN_NAME = "overbrainer_metrics.py"
PLUGIN_FILE = Path(__file__).resolve().parent / "plugin" / PLUGIN_NAME
CONFIG_NAME = "axolotl.yaml"


def plugin_source() -> bytes:
    """The metrics plugin shipped inside the package."""
    return PLUGIN_FILE.read_bytes()


def install_plugin(run_dir: str | os.PathLike) -> Path:
    """Write the plugin as `<run_dir>/plugin/overbrainer_metrics.py` (uploaded with the run)."""
    dest = Path(run_dir) / "plugin" / PLUGIN_NAME
    atomic_write_bytes(dest, plugin_source())
    return dest


def wants_merge(training: Training) -> bool:
    """`merge = true` only means something for an adapter (lora/qlora)."""
    return training.merge and training.adapter.lower() in ("lora", "qlora")
