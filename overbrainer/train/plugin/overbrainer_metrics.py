"""overbrainer's Axolotl plugin: metrics lines and snapshots (docs/runs.md#metrics-plugin).

Uploaded with every run as `<root>/plugin/overbrainer_metrics.py` and loaded by Axolotl through
`plugins: [overbrainer_metrics.OverbrainerMetricsPlugin]` (the job puts `<root>/plugin` on
PYTHONPATH). Standalone: it imports nothing from overbrainer, and imports without Axolotl,
transformers or torch (the unit tests drive its callbacks with plain objects).

* `$OVERBRAINER_METRICS` set: one JSON object per line is appended there (`begin`, `log`, `eval`,
  `end`), by world rank 0 only, one open/append/flush per line.
* `$OVERBRAINER_SNAPSHOT` set: after every step rank 0 looks for that request file; when it
  appears (and the step is not the last one) the trainer saves a checkpoint and stops, and
  rank 0 writes `snapshot.json` next to the request file (atomically) as the proof.

* Several processes (torchrun, Axolotl's launcher) on a machine without an accelerator (a CPU
  run): Axolotl 0.19 loads each process's model with the device map `{"": LOCAL_RANK}`, an
  accelerator's index; before the model loads, the plugin points that map at the CPU, and sets
  ACCELERATE_USE_CPU=true (unless set) so that the trainer's Accelerate state is a multi-CPU one:
  without it transformers sees no distributed run, and each process trains alone.

Nothing here ever raises into the trainer: a failed write is reported once on stderr.
"""

import json
import math
import os
import sys
import time

try:  # pragma: no cover - only inside an Axolotl environment
    from axolotl.integrations.base import BasePlugin
except Exception:  # noqa: BLE001 - any import problem: run as a plain object
    BasePlugin = object

try:  # pragma: no cover - only inside an Axolotl environment
    from transformers import TrainerCallback
except Exception:  # noqa: BLE001
    TrainerCallback = None  # type: ignore[misc,assignment]  # the stand-in below

_EVENTS = (
    "on_init_end", "on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
    "on_step_begin", "on_pre_optimizer_step", "on_optimizer_step", "on_substep_end", "on_step_end",
    "on_evaluate", "on_predict", "on_save", "on_log", "on_prediction_step",
)

if TrainerCallback is None:
    class TrainerCallback:  # type: ignore[no-redef]  # noqa: D101 - stand-in with every event a no-op
        pass

    def _noop(self, args, state, control, **kwargs):
        return None

    for _name in _EVENTS:
        setattr(TrainerCallback, _name, _noop)

REASONS = ("requested", "deadline", "cost", "disk")
EVAL_EVERY_SECS = 2.0
_warned: set = set()


def _warn(what, exc):
    if what in _warned:
        return
    _warned.add(what)
    try:
        sys.stderr.write("overbrainer_metrics: %s: %s\n" % (what, exc))
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


def is_rank0(state=None):
    """World rank 0? The trainer state knows; without it, the launcher's RANK variable."""
    value = getattr(state, "is_world_process_zero", None)
    if isinstance(value, bool):
        return value
    return os.environ.get("RANK", "0") in ("", "0")


def _number(value):
    try:
        value = float(value.item() if hasattr(value, "item") else value)
    except Exception:  # noqa: BLE001
        return None
    return value if math.isfinite(value) else None


def _int(value):
    try:
        return int(value)
    except Exception:  # noqa: BLE001
        return None


def append_line(path, record):
    """Append one JSON line (creating the folder). Never raises; returns whether it was written."""
    try:
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        line = json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n"
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
        return True
    except Exception as exc:  # noqa: BLE001
        _warn("cannot write metrics to %s" % path, exc)
        return False


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


class MetricsCallback(TrainerCallback):  # type: ignore[misc]  # transformers: no type information
    """Writes `begin`, `log`, `eval` and `end` lines."""

    def __init__(self, path, clock=time.time):
        self.path = path
        self.clock = clock
        self.eval_step = 0
        self.eval_shown = 0
        self.eval_last = None
        self.eval_total = None

    def _now(self):
        return round(self.clock(), 3)

    def _emit(self, state, record):
        if is_rank0(state):
            append_line(self.path, record)

    def on_train_begin(self, args, state, control, **kwargs):
        try:
            self._emit(state, {"event": "begin", "time": self._now(),
                               "max_steps": _int(getattr(state, "max_steps", None))})
        except Exception as exc:  # noqa: BLE001
            _warn("on_train_begin", exc)

    def on_log(self, args, state, control, logs=None, **kwargs):
        try:
            if logs and any(str(k).startswith("eval_") for k in logs) and self.eval_step > self.eval_shown:
                # an evaluation's results (logged before on_evaluate): first its last batch, when the
                # throttle held it back (an eval loader without a length)
                self._eval_line(state, self.clock())
            record = {
                "event": "log",
                "time": self._now(),
                "step": _int(getattr(state, "global_step", 0)) or 0,
                "epoch": _number(getattr(state, "epoch", None)),
                "max_steps": _int(getattr(state, "max_steps", None)),
            }
            for key in ("loss", "eval_loss", "learning_rate", "grad_norm"):
                if logs and key in logs:
                    record[key] = _number(logs[key])
            self._emit(state, record)
        except Exception as exc:  # noqa: BLE001
            _warn("on_log", exc)

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        try:
            self.eval_step += 1
            now = self.clock()
            total = None
            try:
                total = len(eval_dataloader) if eval_dataloader is not None else None
            except Exception:  # noqa: BLE001 - an iterable without a length
                total = None
            self.eval_total = total
            last = total is not None and self.eval_step >= total
            if (self.eval_step > 1 and not last and self.eval_last is not None
                    and now - self.eval_last < EVAL_EVERY_SECS):
                return
            self._eval_line(state, now)
        except Exception as exc:  # noqa: BLE001
            _warn("on_prediction_step", exc)

    def _eval_line(self, state, now):
        self.eval_last = now
        self.eval_shown = self.eval_step
        self._emit(state, {"event": "eval", "time": round(now, 3), "step": self.eval_step,
                           "total": self.eval_total})

    def on_evaluate(self, args, state, control, **kwargs):
        self.eval_step = self.eval_shown = 0
        self.eval_last = self.eval_total = None

    on_predict = on_evaluate  # type: ignore[assignment]  # the same reset

    def on_train_end(self, args, state, control, **kwargs):
        try:
            self._emit(state, {"event": "end", "time": self._now(),
                               "step": _int(getattr(state, "global_step", 0)) or 0})
        except Exception as exc:  # noqa: BLE001
            _warn("on_train_end", exc)


def broadcast_flag(flag):
    """Under torch.distributed, every rank gets rank 0's flag (a collective: all ranks call it)."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return flag
        device = "cpu"
        if str(dist.get_backend()) == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        tensor = torch.tensor([1 if flag else 0], device=device)
        dist.broadcast(tensor, src=0)
        return bool(tensor.item())
    except Exception as exc:  # noqa: BLE001
        _warn("cannot share the snapshot request between ranks", exc)
        return flag


class SnapshotCallback(TrainerCallback):  # type: ignore[misc]  # transformers: no type information
    """Saves a checkpoint and stops when the request file appears; writes the proof."""

    def __init__(self, request_path, clock=time.time):
        self.request_path = request_path
        self.root = os.path.dirname(os.path.abspath(request_path))
        self.clock = clock
        self.reason = None
        self.written = False

    def _read_reason(self):
        try:
            with open(self.request_path, encoding="utf-8", errors="replace") as f:
                text = f.read(64).strip()
        except Exception:  # noqa: BLE001
            text = ""
        return text if text in REASONS else "requested"

    def on_step_end(self, args, state, control, **kwargs):
        try:
            if self.reason is not None:
                return
            rank0 = is_rank0(state)
            seen = False
            if rank0:
                seen = os.path.exists(self.request_path)
            seen = broadcast_flag(seen)
            if not seen:
                return
            max_steps = _int(getattr(state, "max_steps", None)) or 0
            step = _int(getattr(state, "global_step", 0)) or 0
            if max_steps > 0 and step >= max_steps:
                return  # the last step: the run ends normally anyway
            self.reason = self._read_reason() if rank0 else "requested"
            control.should_save = True
            control.should_training_stop = True
        except Exception as exc:  # noqa: BLE001
            _warn("on_step_end", exc)

    def on_save(self, args, state, control, **kwargs):
        try:
            if self.reason is None or self.written or not is_rank0(state):
                return
            step = _int(getattr(state, "global_step", 0)) or 0
            checkpoint = os.path.join(os.path.abspath(args.output_dir), "checkpoint-%d" % step)
            proof = {
                "checkpoint": os.path.relpath(checkpoint, self.root),
                "step": step,
                "time": round(self.clock(), 3),
                "reason": self.reason,
            }
            write_atomic(os.path.join(self.root, "snapshot.json"), json.dumps(proof) + "\n")
            self.written = True
        except Exception as exc:  # noqa: BLE001
            _warn("cannot write snapshot.json", exc)


class OverbrainerMetricsPlugin(BasePlugin):  # type: ignore[misc]  # Axolotl's, untyped
    """The Axolotl plugin: hands the trainer the callbacks the job's environment asks for."""

    def add_callbacks_pre_trainer(self, cfg, model):
        callbacks = []
        try:
            metrics = os.environ.get("OVERBRAINER_METRICS")
            if metrics:
                callbacks.append(MetricsCallback(metrics))
            request = os.environ.get("OVERBRAINER_SNAPSHOT")
            if request:
                callbacks.append(SnapshotCallback(request))
        except Exception as exc:  # noqa: BLE001
            _warn("add_callbacks_pre_trainer", exc)
        return callbacks

    def add_callbacks_post_trainer(self, cfg, trainer):
        return []

    def pre_model_load(self, cfg):
        try:
            if cpu_device_map(cfg.device_map):
                cpu_distributed(os.environ)
        except Exception as exc:  # noqa: BLE001
            _warn("pre_model_load", exc)


def cpu_distributed(environ) -> bool:
    """A CPU run of several processes (WORLD_SIZE > 1): ACCELERATE_USE_CPU=true in `environ`
    unless it is set. Returns whether it set it."""
    try:
        world = int(environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return False
    if world < 2 or "ACCELERATE_USE_CPU" in environ:
        return False
    environ["ACCELERATE_USE_CPU"] = "true"
    return True


def cpu_device_map(device_map, accelerator=None):
    """An accelerator index in `device_map` (a dict, edited in place: Axolotl's loader holds the
    same object) becomes "cpu" when there is no accelerator (`accelerator()`, default: torch's
    CUDA). Returns whether it changed anything."""
    indexes = [k for k, v in (device_map.items() if isinstance(device_map, dict) else ())
               if isinstance(v, int) and not isinstance(v, bool)]
    if not indexes:
        return False
    if accelerator is None:
        import torch

        accelerator = torch.cuda.is_available
    if accelerator():
        return False
    for key in indexes:
        device_map[key] = "cpu"
    return True
