"""What the Runpod code needs of the job layer: the runs and side jobs that own pods, and what a
lease is given.

Every pod belongs to one owner, a training run or a side job (an export or a compare run on a pod
of its own), whose ID is the pod's marker (`env.OVERBRAINER_RUN_ID`). The job layer keeps the
owners' records (`run.json`) and their folders; the pods' code reaches them only through these
protocols, which jobs/homes.py implements (`Home`, `Homes`): runpod/ imports nothing of jobs/.
An owner's folder holds its pod's record (`pod.json`) and keys (`ssh/`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

# The states of run.json (docs/runs.md#runjson) the pods' code tells apart; `Record.ended` says
# whether the run is over.
PREPARING, RUNNING = "preparing", "running"

Retrieved = Callable[[Any, Path], bool]  # (owner's record, its folder) -> whether its results are home


class Record(Protocol):
    """An owner's run.json, as the job layer reads it."""

    id: str
    state: str
    job: Any  # None until its job was spawned
    message: str | None
    remote_dir: str

    @property
    def ended(self) -> bool: ...


class Owner(Protocol):
    """A run or a side job: `key` is its ID (its pods' marker), `dir` its folder here, `kind` the
    word of the messages (`run`, `export`, `compare`), `side` whether it is a side job. A record
    it is given is one its `load` gave, or the one its flow holds."""

    @property
    def key(self) -> str: ...

    @property
    def dir(self) -> Path: ...

    @property
    def kind(self) -> str: ...

    @property
    def side(self) -> bool: ...

    def shown(self, project_dir: Path) -> str:
        """Its folder relative to the project (`runs/<run>/exports/<id>`)."""
        ...

    def load(self) -> Record:
        """Its record as it is on disk now (OverbrainerError when it cannot be read)."""
        ...

    def fail(self, record: Any, message: str) -> None:
        """Save `record` (this owner's) `failed` with `message` (a warning when it cannot be saved)."""
        ...

    def fail_run(self, message: str) -> None:
        """Read its record and save it `failed` with `message` (best effort: a warning)."""
        ...

    def claim(self, executor: Any, record: Any, token: str) -> None:
        """Claim its directory on the target of `executor` (`token`: the claim's value) and save
        `record.remote_dir`."""
        ...

    def results_home(self, record: Any, rule: Retrieved | None) -> bool:
        """Whether it ended with its results home: a side job by its own rule, a run by `rule`
        (the training's; None: never)."""
        ...


class Options(Protocol):
    """What a lease is given besides its target (jobs.kinds.LeaseOptions): `retrieved`, the job
    kind's rule whether an ended run's results are home (a pod is deleted only then; a Runpod
    lease needs it); `keep`, the pod is kept once the job ended (`--keep-pod`); `home`, the
    lease's owner (None: the run in runs/); `workdir`, the pod's workdir (the owner's directory
    there is `<workdir>/<id>`; None: runpod.pod_spec.WORKDIR); `runs_retrieved`, the training's
    rule for ending the left pods of runs before a side job's new pod (None: only side jobs'
    left pods are ended)."""

    @property
    def retrieved(self) -> Retrieved | None: ...

    @property
    def keep(self) -> bool: ...

    @property
    def home(self) -> Owner | None: ...

    @property
    def workdir(self) -> str | None: ...

    @property
    def runs_retrieved(self) -> Retrieved | None: ...


class Owners(Protocol):
    """The runs and side jobs of one project (`project_dir`)."""

    @property
    def project_dir(self) -> Path: ...

    def all(self) -> Sequence[Owner]:
        """Every run and side job folder of the project, whether its record reads or not."""
        ...

    def find(self, key: str) -> Owner | None:
        """The run or side job `key` that has a record (a run wins), or None."""
        ...

    def run(self, key: str) -> Owner:
        """The place of the run `key` in the project, whether it exists or not (OverbrainerError
        for an ID that is not valid)."""
        ...
