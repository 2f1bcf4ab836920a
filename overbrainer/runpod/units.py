"""What a run rents on Runpod and deletes as one: a pod, or a cluster (an Instant Cluster: its
member pods are made with it, shown through it and deleted with it; each answers 409 to its own
DELETE). The rules that decide whether something is gone or deleted (runpod/gone.py,
runpod/remove.py) are the same for both; only the calls differ, and they are here.

A pod carries its run's marker in its env (`OVERBRAINER_RUN_ID`); a cluster shows no env, so its
run is read from its name (`overbrainer-<run>-<n>`, pod_record.run_of_name), which is unique to
the create attempt that made it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from overbrainer.runpod.pod_record import run_of_name


@dataclass(frozen=True)
class Unit:
    word: str  # `pod` or `cluster`: how messages name it
    get: Callable[[Any, str], Any]  # (client, id) -> its object (with `.terminated`); NotFound when gone
    delete: Callable[[Any, str], bool]  # (client, id) -> False on Runpod's 404
    listing: Callable[[Any], list]  # (client) -> what the account shows (`.id`, `.name`, `.terminated`)
    marker: Callable[[Any], str | None]  # an object -> the run (or side job) it belongs to

    def of_run(self, client, run_id: str) -> list:
        """Everything of this kind the account shows for `run_id` (one list)."""
        return [x for x in self.listing(client) if self.marker(x) == run_id]


POD = Unit("pod", lambda c, i: c.get_pod(i), lambda c, i: c.delete_pod(i), lambda c: c.list_pods(),
           lambda p: p.run_marker)
CLUSTER = Unit("cluster", lambda c, i: c.get_cluster(i), lambda c, i: c.delete_cluster(i),
               lambda c: c.list_clusters(), lambda x: run_of_name(x.name))


def unit_of(record) -> Unit:
    """The unit a pod.json records (a runpod.pod_record.PodRecord)."""
    return CLUSTER if record.is_cluster else POD
