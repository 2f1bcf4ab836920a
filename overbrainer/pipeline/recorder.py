"""History recording around a stage, on dataset.accounting.history.HistoryRecorder: `begin`
when the stage starts, one line when it ends, whatever happens.

`ok` with the stage's stats when nothing failed; `failed` when items failed or a fatal error
stopped it (counts from the stage's own tally, which every worker updates as it goes);
`interrupted` on Ctrl-C. A failure to write the history only logs a warning.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Iterator

from overbrainer.dataset.accounting.history import HistoryRecorder
from overbrainer.errors import Interrupted
from overbrainer.pipeline.stage import StageRun

log = logging.getLogger(__name__)


class StageRecorder:
    """`with StageRecorder(dir).recording(run, box) as run: ...; box.append(result)`."""

    def __init__(self, project_dir: Path):
        self.project_dir = Path(project_dir)

    @contextlib.contextmanager
    def recording(self, run: StageRun, result_box: list) -> Iterator[StageRun]:
        recorder = HistoryRecorder(self.project_dir)
        recorder.begin(run.name, run.provider if run.model is not None else None, run.model)
        try:
            yield run
        except Interrupted:
            recorder.finish("interrupted", run.stats())
            raise
        except BaseException:
            recorder.finish("failed", run.stats())
            raise
        result = result_box[0] if result_box else None
        stats = result.stats if result is not None else run.stats()
        failed = stats.failed > 0 or (result is not None and result.error is not None)
        split = None
        if result is not None and result.split is not None:
            s = result.split
            split = {"train": s.train, "eval": s.eval, "orphaned": s.orphaned,
                     "kept_output_tokens": s.kept_output_tokens}
            if s.contaminated:
                split["contaminated"] = s.contaminated
        recorder.finish("failed" if failed else "ok", stats, split=split)
