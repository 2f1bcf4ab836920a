"""What a project's pods cost, for the read-only views: the pod column and fields of `runs ls` /
`runs show` (`pod_summary`), and the spend line of `history` (`pod_spend`)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from overbrainer.runpod import cost
from overbrainer.runpod.pod_record import InvalidPodRecord, PodRecord


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
    line = f"pods: {runs} run{'s' if runs != 1 else ''}, {cost.format_spend(total)}"
    if unknown:
        line += f" ({unknown} without a known rate)"
    return line, {"runs": runs, "spend": round(total, 4), "unknown": unknown}
