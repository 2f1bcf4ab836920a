"""The body of `POST /pods` for a run's pod: only fields of Runpod's published `CreatePodRequest`
(Runpod refuses any other with a 422 naming it; tests/unit/test_runpod_request_schema.py checks
every body the client can send against the published schema).

`name` (the attempt's `overbrainer-<run>-<n>`), `image`, `args` (one string: the bootstrap's
`sh -c '…'`, runpod/pod_scripts.py), `cloud` `SECURE`, `gpu` `{id, count, minCudaVersion}`,
`disk` (container disk, GB), `ports` `["22/tcp"]`, `startSsh` false (the bootstrap runs its own
sshd with the run's keys), `env` (string → string, at most 50 entries), and when asked for
`dataCenterIds` and `mounts` `{network: [{volumeId, path}]}`. No template, no registry, no
persistent mount, no Jupyter.
"""

from __future__ import annotations

from typing import Any, Iterable

from overbrainer.runpod.catalog import MIN_CUDA
from overbrainer.runpod.pod_scripts import ENV_LIMIT, pod_args

VOLUME_PATH = "/workspace/data"


def create_body(target, *, name: str, gpu_type: str, env: dict[str, str],
                data_center_ids: Iterable[str] = (), volume_gb: int | None = None) -> dict[str, Any]:
    """The create request of one attempt on `target` (a RunpodTarget). `env` is the pod's env
    (runpod.pod_scripts.pod_env); the network volume's variables are added to it here."""
    body: dict[str, Any] = {
        "name": name, "image": target.image, "args": pod_args(), "cloud": "SECURE",
        "gpu": {"id": gpu_type, "count": int(target.gpu_count), "minCudaVersion": MIN_CUDA},
        "disk": int(target.container_disk_gb), "ports": ["22/tcp"], "startSsh": False,
    }
    if data_center_ids:
        body["dataCenterIds"] = list(data_center_ids)
    env = dict(env)
    if target.network_volume_id:
        body["mounts"] = {"network": [{"volumeId": target.network_volume_id, "path": VOLUME_PATH}]}
        env.update(OVERBRAINER_VOLUME_DIR=VOLUME_PATH, OVERBRAINER_VOLUME_GB=str(volume_gb))
    if len(env) > ENV_LIMIT:
        raise ValueError(f"the pod's env has {len(env)} entries, over Runpod's {ENV_LIMIT}")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ValueError("every env value of a pod must be a string")
    body["env"] = env
    return body
