"""Where a project keeps its data files and its state (docs/data-files.md#project-layout)."""

from __future__ import annotations

from pathlib import Path


class ProjectPaths:
    """Paths of one project: `paths.data / "subtopics.jsonl"` or `paths.subtopics`."""

    def __init__(self, project_dir: str | Path):
        self.root = Path(project_dir)
        self.data = self.root / "data"
        self.state = self.root / ".overbrainer"
        self.runs = self.root / "runs"

    @property
    def subtopics(self) -> Path:
        return self.data / "subtopics.jsonl"

    @property
    def questions(self) -> Path:
        return self.data / "questions.jsonl"

    @property
    def answers(self) -> Path:
        return self.data / "answers.jsonl"

    @property
    def train(self) -> Path:
        return self.data / "train.jsonl"

    @property
    def eval(self) -> Path:
        return self.data / "eval.jsonl"

    @property
    def gate(self) -> Path:
        """The quality gate's verdicts (dataset/quality/verdicts.py)."""
        return self.data / "gate.jsonl"

    @property
    def rejected(self) -> Path:
        return self.data / "rejected.jsonl"

    @property
    def history(self) -> Path:
        return self.state / "history.jsonl"

    @property
    def dataset_state(self) -> Path:
        """The saved figures of the data files (dataset/state.py): a cache, rebuilt when stale."""
        return self.state / "dataset.json"

    @property
    def gate_state(self) -> Path:
        """What the last complete gate read and judged (dataset/state.py)."""
        return self.state / "gate.json"

    @property
    def split_state(self) -> Path:
        """What the last split read, wrote and counted (dataset/state.py)."""
        return self.state / "split.json"

    @property
    def dataset_push(self) -> Path:
        """What `push --dataset` stages (hub/): the Parquet files, the card, push.json."""
        return self.state / "dataset"

    @property
    def stalls(self) -> Path:
        """The list rounds that added nothing, not asked again until their prompt changes
        (dataset/stalls.py)."""
        return self.state / "stalls.json"

    @property
    def rate_limits(self) -> Path:
        """The rate limits the providers published, by provider and model (dataset/rate_limits.py)."""
        return self.state / "rate_limits.json"

    @property
    def batches(self) -> Path:
        """The journal of batch submissions, one JSON file each (dataset/batch_journal.py)."""
        return self.state / "batches"
