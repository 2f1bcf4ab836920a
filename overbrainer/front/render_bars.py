"""Events → tqdm bars on a terminal (stderr), with the same log lines as the plain renderer for
starts, retries, failures and phases. tqdm is imported only when the first bar is drawn."""

from __future__ import annotations

import sys
from typing import IO, Any

from overbrainer.front import terminal
from overbrainer.front.events import Metric, Transfer
from overbrainer.front.render_lines import Every, LineRenderer, RunProgress, StageProgress, Tenths, is_number


class BarRenderer(LineRenderer):
    def __init__(self, stream: IO[str] | None = None, **kw: Any):
        super().__init__(**kw)
        self.stream = stream
        self.bars: dict[Any, Any] = {}

    def _open(self, key: Any, **kw: Any) -> Any:
        self._close(key)
        # lazy: tqdm only once a bar is drawn on a terminal; lines on a pipe never load it
        from tqdm import tqdm

        if not self.bars:
            terminal.bars_started()
        with terminal.LOCK:
            bar = tqdm(file=self.stream or sys.stderr, leave=False, dynamic_ncols=True,
                       mininterval=0.2, **kw)
        self.bars[key] = bar
        return bar

    def _close(self, key: Any) -> None:
        bar = self.bars.pop(key, None)
        if bar is None:
            return
        with terminal.LOCK:
            bar.close()
        if not self.bars:
            terminal.bars_stopped()

    def close(self) -> None:
        for key in list(self.bars):
            self._close(key)

    # --- stages -------------------------------------------------------------------------------

    def stage_started(self, stage: str, total: int) -> None:
        self._open(("stage", stage), total=total, desc=stage, unit="item")

    def stage_progress(self, stage: str, st: StageProgress) -> None:
        bar = self.bars.get(("stage", stage))
        if bar is None:
            return super().stage_progress(stage, st)
        with terminal.LOCK:
            bar.update(1)

    def stage_finished(self, stage: str) -> None:
        self._close(("stage", stage))

    # --- training -----------------------------------------------------------------------------

    def metric(self, r: RunProgress, m: Metric) -> None:
        key = ("steps", r.prefix)
        bar = self.bars.get(key)
        if bar is None or (m.max_steps and bar.total != m.max_steps):
            bar = self._open(key, total=m.max_steps, desc=r.prefix, unit="step")
        postfix = {}
        if is_number(m.loss):
            postfix["loss"] = f"{m.loss:.4f}"
        if is_number(m.epoch):
            postfix["epoch"] = f"{m.epoch:.2f}"
        with terminal.LOCK:
            bar.n = m.step
            bar.set_postfix(postfix, refresh=False)
            bar.refresh()
        last = bool(m.max_steps) and m.step >= (m.max_steps or 0)
        if last:
            self._close(key)
        if last or is_number(m.eval_loss):
            super().metric(r, m)  # every eval line and the last step are shown as lines

    def transfer(self, r: RunProgress, ev: Transfer, gate: Tenths | Every) -> None:
        key = ("transfer", r.prefix, ev.direction)
        bar = self.bars.get(key)
        if bar is None or ev.done == 0:  # a new transfer (0 bytes) gets a bar of its own
            verb = "upload" if ev.direction == "upload" else "download"
            bar = self._open(key, total=ev.total, desc=f"{r.prefix}: {verb}", unit="B",
                             unit_scale=True, unit_divisor=1000)
        with terminal.LOCK:
            bar.n = ev.done
            bar.refresh()
        if ev.total is not None and ev.done >= ev.total:
            self._close(key)
