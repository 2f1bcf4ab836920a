"""`overbrainer pod ls`: the ledger's rows (runpod/ledger.py) as a table, and the spend so far."""

from __future__ import annotations

from overbrainer.runpod.ledger import EMPTY, account_rows
from overbrainer.runpod import cost
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.gone import look_up_all
from overbrainer.runpod.owners import Owners
from overbrainer.runpod.waits import Timing
from overbrainer.support.columns import table
from overbrainer.support.lock import holder_alive


def ls_flow(session, config, owners: Owners) -> None:
    """`pod ls`: every overbrainer pod of the account and every recorded pod the list lacks (looked
    at by the gone rule), then the spend so far; never deletes a pod. `owners`: the project's
    runs and side jobs."""
    timing = Timing.default()
    stale = not holder_alive(session.project_dir)
    with RunpodClient.from_config(config) as client:
        rows = account_rows(client, owners,
                            look=lambda c, pod_ids: look_up_all(c, pod_ids, timing), stale=stale)
    total = sum(r.spend for r in rows if r.spend is not None and r.status != "GONE")
    data = {"pods": [r.to_dict() for r in rows], "spend": round(total, 4)}
    if not rows:
        session.report(EMPTY, data)
        return
    lines = table([["RUN", "POD", "STATUS", "GPU", "$/H", "CREATED", "NOTE"]] + [r.cells() for r in rows])
    lines.append(f"spend so far: {cost.format_spend(total)}")
    session.report("\n".join(lines), data)

