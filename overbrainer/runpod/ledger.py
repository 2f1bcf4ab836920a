"""The ledger of the pods of this project's runs and of the account: which run each pod belongs to,
what it costs, and which are orphans (`pod ls` lists the rows, the Runpod lease warns of orphans
before a new pod).

A pod belongs to overbrainer when it carries a run marker (`env.OVERBRAINER_RUN_ID`) or an
`overbrainer-*` name. A run still `preparing` while no overbrainer holds the project (a `train`
killed during provisioning: `stale`) is not in progress: its pods are orphans. The ledger never
deletes a pod: a recorded pod the account list lacks is looked at with the gone rule (3 Runpod
404s and absence from the list, or TERMINATED); a gone one is recorded `deleted`, an unclear look
shows `UNCHECKED`.

What the pods cost, for the read-only views, from the pod.json files alone (no API call): the pod
column and fields of `runs ls` / `runs show` (`pod_summary`), the spend line of `history`
(`pod_spend`), and each run's spend for the metrics exporter (`runpod_spend`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterable

from overbrainer.errors import OverbrainerError
from overbrainer.runpod import cost
from overbrainer.runpod.gone import Found, Gone, mark_gone
from overbrainer.runpod.owners import PREPARING, RUNNING, Owner, Owners
from overbrainer.runpod.objects import Cluster
from overbrainer.runpod.pod_record import NAME_PREFIX, InvalidPodRecord, PodRecord, PodState, run_of_name
from overbrainer.runpod.units import CLUSTER, POD, unit_of
from overbrainer.support import fmt

log = logging.getLogger(__name__)

EMPTY = "pod: no overbrainer pod on this account"
STOPPED_NOTE = "run preparing, its process stopped"
_CELL = 64


def _cell(value, limit: int = _CELL) -> str:
    """Printable ASCII only, at most `limit` characters (the API's text is never trusted)."""
    text = "".join(c if " " <= c <= "~" else "?" for c in str(value))
    return text[:limit]


def unix_of(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def run_of(pod) -> str | None:
    """The run a pod (or cluster) belongs to: its marker, else the run ID in an
    `overbrainer-<run>-<n>` name (a cluster's only marker)."""
    return getattr(pod, "run_marker", None) or run_of_name(pod.name)


def is_ours(pod) -> bool:
    return bool(getattr(pod, "run_marker", None)) or (pod.name or "").startswith(NAME_PREFIX)


@dataclass
class Row:
    run: str
    pod: str
    status: str
    gpu: str
    rate: float | None
    created: str
    note: str
    spend: float | None = None

    def cells(self) -> list[str]:
        cells = [_cell(v) for v in (self.run, self.pod, self.status, self.gpu, fmt.usd_per_hour(self.rate),
                                    self.created or "-")]
        return cells + [_cell(self.note, 2 * _CELL + len(self.run))]  # our own words around the run ID

    def to_dict(self) -> dict:
        return {"run": self.run, "pod_id": self.pod, "status": self.status, "gpu": self.gpu,
                "rate_per_hour": self.rate, "created": self.created, "note": self.note,
                "spend": round(self.spend, 4) if self.spend is not None else None}


@dataclass
class RunPods:
    """What this project knows of one run or side job (its pods' marker): its state and pod.json
    (or why not), and where they are (`home`, its runpod.owners.Owner; None when not in runs/)."""
    run_id: str
    state: str | None = None
    ended: bool = False
    record: PodRecord | None = None
    unreadable: bool = False
    present: bool = False
    others: list = field(default_factory=list)
    home: Owner | None = None

    @property
    def kind(self) -> str:
        """`run`, `export` or `compare`: how its notes name it."""
        return self.home.kind if self.home is not None else "run"


def pod_owners(owners: Owners) -> list:
    """Every run and side job of the project whose folder holds a pod.json."""
    return [owner for owner in owners.all() if PodRecord.path_in(owner.dir).is_file()]


def known_run(owners: Owners, run_id: str) -> RunPods:
    """The run or side job `run_id` of this project (a pod's marker names one or the other)."""
    known = RunPods(run_id)
    home = owners.find(run_id)
    if home is None:
        try:
            place = owners.run(run_id)
            known.present = place.dir.is_dir()  # a run dir without run.json
        except OverbrainerError:
            pass
        if known.present:
            known.home, known.unreadable = place, True
        return known
    known.present, known.home = True, home
    try:
        run = home.load()
        known.state, known.ended = run.state, run.ended
        known.record = PodRecord.load_if_any(PodRecord.path_in(home.dir))
    except (OverbrainerError, InvalidPodRecord, OSError):
        known.unreadable = True
    return known


def _recorded(owners: Owners) -> dict[str, RunPods]:
    return {home.key: known_run(owners, home.key) for home in pod_owners(owners)}


def _note(pod_id: str, run: str | None, known: RunPods | None, has_marker: bool, stale: bool = False) -> str:
    if run is None or not has_marker and known is None:
        return "no run marker"
    if known is None or not known.present:
        return (f"not in this project's runs/; if no other checkout owns it, "
                f"`overbrainer pod rm {run} --force`")
    if known.unreadable:
        return "run record unreadable"
    rec = known.record
    if rec is None or rec.unit_id != pod_id:
        return "stray, not deleted"
    if rec.state == PodState.KEPT:
        return "kept"
    if rec.state == PodState.AWAITING_RETRIEVAL:
        return "awaiting retrieval"
    if known.ended:
        return f"{known.kind} {known.state}, not deleted"
    if stale and (known.state == PREPARING or known.state == RUNNING and known.home.side):
        return f"{known.kind} {known.state}, its process stopped"  # a side job lives with its process
    return f"{known.kind} {known.state}"


def _row(pod, known: RunPods | None, now: float, stale: bool = False) -> Row:
    run = run_of(pod)
    run = _cell(run) if run else None
    rec = known.record if known is not None else None
    mine = rec is not None and rec.unit_id == pod.id
    rate = cost.usable_rate(getattr(pod, "cost_per_hour", None)) or (rec.cost_per_hour if mine and rec else None)
    if mine and rec is not None:
        spend = rec.spend_so_far(now)
    else:
        spend = cost.spend(rate, unix_of(pod.created_at), now)
    gpu = pod.gpu_id or "-"
    if isinstance(pod, Cluster):  # shown as one thing: its shape, its members' status
        gpu = f"{gpu} x{pod.gpu_count or '?'}, {pod.pod_count or '?'} pods"
    return Row(run or "-", pod.id, pod.status, gpu, rate, pod.created_at or "-",
               _note(pod.id, run, known, bool(getattr(pod, "run_marker", None)), stale), spend)


def account_rows(client, owners: Owners, *, look=None, stale: bool = False) -> list[Row]:
    """Every overbrainer pod and cluster of the account (one list each; a cluster is one row, its
    members never listed as pods) and, with `look` (gone.look_up_all bound to a Timing, called
    with the unit: runpod/units.py), every recorded live pod or cluster the lists lack. `stale`:
    no overbrainer holds the project (besides the caller), so a `preparing` run's process is
    gone. Never deletes anything."""
    now = time.time()
    recorded = _recorded(owners)
    listed = [p for p in client.list_pods() if is_ours(p)] + [c for c in client.list_clusters() if is_ours(c)]
    rows = []
    for pod in listed:
        run = run_of(pod)
        known = recorded.get(run) if run else None
        if known is None and run:
            known = known_run(owners, run)
        rows.append(_row(pod, known, now, stale))
    if look is None:
        return rows
    seen = {p.id for p in listed}
    missing = [k for k in recorded.values()
               if k.record is not None and k.record.unit_id and k.record.live and k.record.unit_id not in seen]
    looks = []
    for unit in (POD, CLUSTER):
        these = [k for k in missing if unit_of(k.record) is unit]
        if these:
            looks += list(zip(these, look(client, [k.record.unit_id for k in these], unit)))
    for known, result in looks:
        rec = known.record
        assert rec is not None and rec.unit_id is not None  # missing: records with a pod or cluster id
        if isinstance(result, Found):
            rows.append(_row(result.pod, known, now, stale))
        elif isinstance(result, Gone):
            mark_gone(rec)
            rows.append(Row(known.run_id, rec.unit_id, "GONE", rec.gpu_type or "-", rec.cost_per_hour,
                            rec.created_at or "-", "gone", rec.estimated_spend))
        else:
            note = (STOPPED_NOTE.replace("run", known.kind, 1) if stale and known.state == PREPARING
                    else f"{known.kind} {known.state}")
            rows.append(Row(known.run_id, rec.unit_id, "UNCHECKED", rec.gpu_type or "-", rec.cost_per_hour,
                            rec.created_at or "-", note, rec.spend_so_far(now)))
    return rows


def orphan_warnings(client, owners: Owners, run_id: str | None = None, stale: bool = False) -> list[str]:
    """The `train` warnings for billing pods nothing in progress owns (one list; never deletes).
    `stale`: the caller holds the project, so other `preparing` runs are stopped ones."""
    out = []
    for row in account_rows(client, owners, stale=stale):
        if row.run == run_id or _in_progress(row.note) or row.status in ("EXITED", "TERMINATED"):
            continue
        if row.note == "no run marker":
            out.append(f"pod {row.pod} (no run marker) is still on Runpod at {fmt.usd_per_hour(row.rate)}: "
                       f"delete it from the Runpod console")
            continue
        text = (f"pod {row.pod} ({row.note}) is still on Runpod at {fmt.usd_per_hour(row.rate)}: remove it "
                f"with `overbrainer pod rm {row.run}`")
        if row.note == "stray, not deleted":
            text += " (this also deletes the run's kept pod)" if _kept(owners, row.run) else ""
        out.append(text)
    return out


def _in_progress(note: str) -> bool:
    """A note of a run or side job still at work: `<kind> preparing` or `<kind> running`."""
    words = note.split(" ")
    return len(words) == 2 and words[1] in (PREPARING, RUNNING)


def _kept(owners: Owners, run_id: str) -> bool:
    rec = known_run(owners, run_id).record
    return rec is not None and rec.state == PodState.KEPT


def warn_orphans(client, owners: Owners, run_id: str | None = None, stale: bool = False) -> None:
    """Best effort: a failed list is one warning."""
    try:
        lines = orphan_warnings(client, owners, run_id, stale)
    except OverbrainerError as e:
        log.warning("cannot list the account's pods to look for orphans: %s", e)
        return
    for line in lines:
        log.warning("%s", line)


# --- what the pods cost, from pod.json ----------------------------------------------------------

def pod_summary(run_dir: Path) -> tuple[str, dict] | None:
    """The run's pod for `runs ls` / `runs show`: (its `runs ls` column, its fields: pod ID, state,
    rate in USD/h, spend so far or at deletion); None for a run without pod.json."""
    try:
        pod = PodRecord.load_if_any(PodRecord.path_in(run_dir))
    except (InvalidPodRecord, OSError):
        return "pod record unreadable", {"unreadable": True}
    if pod is None:
        return None
    spend = pod.spend_so_far()
    return pod.summary(), {"pod_id": pod.pod_id, "state": pod.state.value, "rate_per_hour": pod.cost_per_hour,
                           "spend": round(spend, 4) if spend is not None else None,
                           "deleted_by": pod.deleted_by, "stray_pods": list(pod.stray_pods)}


def pod_spend(run_dirs: Iterable[Path]) -> tuple[str, dict] | None:
    """What the pods of the runs in `run_dirs` cost, for `history`: one line and its fields; None
    without pods."""
    runs, total, unknown = 0, 0.0, 0
    for run_dir in run_dirs:
        found = pod_summary(run_dir)
        if found is None or found[1].get("pod_id") is None:
            continue
        runs += 1
        if found[1]["spend"] is None:
            unknown += 1
        else:
            total += found[1]["spend"]
    if not runs:
        return None
    line = f"pods: {runs} run{'s' if runs != 1 else ''}, {fmt.about_usd(total)}"
    if unknown:
        line += f" ({unknown} without a known rate)"
    return line, {"runs": runs, "spend": round(total, 4), "unknown": unknown}


def runpod_spend(runs_dir: Path, now: float | None = None) -> dict[str, float]:
    """USD per run ID: a deleted pod's final estimate, a live one's rate × uptime. A run without a
    pod.json, or whose spend is unknown (no rate yet), has no entry; an unreadable pod.json is
    left out (`runs ls` and `pod ls` say what is wrong with it)."""
    paths = sorted(Path(runs_dir).glob("*/pod.json"))
    if not paths:
        return {}
    now = time.time() if now is None else now
    out: dict[str, float] = {}
    for path in paths:
        try:
            record = PodRecord.load(path)
        except OverbrainerError as e:
            log.debug("metrics: %s", e)
            continue
        spend = record.spend_so_far(now)
        if spend is not None:
            out[record.run_id] = spend
    return out
