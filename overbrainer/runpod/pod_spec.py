"""What a run's pod is created with: the body of `POST /pods`, its container command (`args`), the
bootstrap with the watchdog inside, and the pod's environment.

Runpod's create request has no argv and no entrypoint override: `args` is one string handed to
the image's ENTRYPOINT in place of its CMD (docs/pods.md, "The image"). So the bootstrap travels
base64-encoded in the env variable OVERBRAINER_BOOTSTRAP, and `args` is a short
`sh -c '…'` that decodes it and runs it in that shell. Split like a shell's word list, it is
`sh`, `-c` and the script: the command itself for an image without ENTRYPOINT, and the arguments
of a wrapper ENTRYPOINT that ends in `exec "$@"` (NVIDIA's, Runpod's and axolotl's images).

The scripts ship as package data (`runpod/scripts/*.sh`, POSIX sh); their headers document the
files they write on the pod. No secret goes into the command or the environment: the run's host
key travels as a Runpod account secret, referenced as `{{ RUNPOD_SECRET_<name> }}` and filled in
by Runpod at container start; the watchdog uses the pod-scoped key Runpod itself puts in the pod.
Every time the pod is given is a duration: its watchdog counts them on its own clock.

The body (`create_body`) has only fields of Runpod's published `CreatePodRequest` (Runpod refuses
any other with a 422 naming it; tests/integration/test_runpod_request_schema.py checks every body
the client can send against the published schema): `name` (the attempt's
`overbrainer-<run>-<n>`), `image`, `args`, `cloud` `SECURE`, `gpu` `{id, count, minCudaVersion}`,
`disk` (container disk, GB), `ports` `["22/tcp"]`, `startSsh` false (the bootstrap runs its own
sshd with the run's keys), `env` (string → string, at most 50 entries), and when asked for
`dataCenterIds` and `mounts` `{network: [{volumeId, path}]}`. No template, no registry, no
persistent mount, no Jupyter.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from dataclasses import dataclass
from importlib import resources
from typing import Any, Iterable

from overbrainer import __version__
from overbrainer.runpod.catalog import MIN_CUDA

WORKDIR = "/workspace/overbrainer"
VOLUME_PATH = "/workspace/data"  # where a network volume is mounted
DEFAULT_API_URL = "https://api.runpod.io/v2"
BOOTSTRAP_LIMIT = 100 * 1024  # bytes of the encoded bootstrap (one env value; Linux allows 128 KiB)
ENV_LIMIT = 50  # entries of a pod's env (the Runpod console's limit)
WATCHDOG_MARKER = "WATCHDOG_SH=@OVERBRAINER_WATCHDOG@\n"
BOOTSTRAP_ENV = "OVERBRAINER_BOOTSTRAP"
# The container's command: decode the bootstrap, drop its variable, run it in this shell. No quote
# inside the script and no character a shell-like split would treat specially outside of it.
RUN_BOOTSTRAP = 'b=$(printf %s "$OVERBRAINER_BOOTSTRAP" | base64 -d) || exit 70; unset OVERBRAINER_BOOTSTRAP; eval "$b"'
POD_ARGS = f"sh -c '{RUN_BOOTSTRAP}'"
# The same command for an image whose ENTRYPOINT ignores its arguments (an engine's: `vllm serve`,
# `llama-server`): Runpod's container start command also takes `{"entrypoint": [...], "cmd": [...]}`,
# which replaces the image's ENTRYPOINT (Runpod's "Manage Pod templates": "JSON format with
# entrypoint and cmd").
OWN_ENTRYPOINT_ARGS = json.dumps({"entrypoint": ["sh", "-c"], "cmd": [RUN_BOOTSTRAP]})

# Paces of the pod, in seconds, multiplied by the time scale (support/timescale.py: 1 but in tests).
WATCHDOG_INTERVAL = 60.0
PROBE_WAIT = 10.0
PROBE_TRIES = 5
# Caps on a wait for something that answers (a request, sshd listening): never scaled.
CURL_TIMEOUT_MS = 10_000
SSHD_WAIT_MS = 10_000

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*\Z")
_KEY_LINE = re.compile(r"^(ssh-|ecdsa-|sk-)[A-Za-z0-9@.-]+ [A-Za-z0-9+/=]+( [ -~]*)?\Z")


def script(name: str) -> str:
    """The text of a script shipped in overbrainer/runpod/scripts/."""
    return resources.files("overbrainer.runpod").joinpath("scripts", name).read_text(encoding="utf-8")


def bootstrap_text() -> str:
    """The bootstrap with the watchdog's text in place of its marker line."""
    boot = script("bootstrap.sh")
    if boot.count(WATCHDOG_MARKER) != 1:
        raise RuntimeError("bootstrap.sh must hold the watchdog marker line exactly once")
    return boot.replace(WATCHDOG_MARKER, f"WATCHDOG_SH={shlex.quote(script('watchdog.sh'))}\n")


def pod_args(own_entrypoint: bool = False) -> str:
    """The create request's `args`: `sh -c '…'` running the bootstrap of OVERBRAINER_BOOTSTRAP
    (`own_entrypoint`: in place of the image's ENTRYPOINT, for an image that ignores its args)."""
    return OWN_ENTRYPOINT_ARGS if own_entrypoint else POD_ARGS


def bootstrap_value() -> str:
    """OVERBRAINER_BOOTSTRAP's value: the bootstrap (watchdog inside), base64 on one line."""
    value = base64.b64encode(bootstrap_text().encode()).decode("ascii")
    if len(value) >= BOOTSTRAP_LIMIT:
        raise RuntimeError(f"the pod bootstrap is {len(value)} bytes encoded, over the {BOOTSTRAP_LIMIT} byte limit")
    return value


def host_key_secret_name(run_id: str) -> str:
    return f"overbrainer_host_key_{_check_run_id(run_id)}"


def secret_reference(name: str) -> str:
    """How a pod's env names an account secret; Runpod puts the value in at container start."""
    return "{{ RUNPOD_SECRET_" + name + " }}"


def scaled_ms(seconds: float, time_scale: float) -> int:
    """A timing constant in whole milliseconds (at least 1), multiplied by the time scale."""
    return max(1, round(seconds * 1000 * time_scale))


@dataclass(frozen=True)
class PodSettings:
    """What the pod needs to know about its run. Every time is a duration in seconds, counted by
    the watchdog from its own first start on the pod (its own clock: the client's and the pod's
    wall clocks need not agree); graces are never scaled (they are the user's); `max_seconds` and
    `max_cost_usd` are dropped when kept."""

    run_id: str
    authorized_key: str          # the run's client public key, one authorized_keys line
    max_seconds: int | None      # max_hours; None when kept
    boot_grace_secs: int
    retrieve_grace_secs: int
    keep: bool = False
    gpu_count: int = 1
    max_cost_usd: float | None = None
    api_url: str = DEFAULT_API_URL
    workdir: str = WORKDIR
    time_scale: float = 1.0

    @property
    def run_dir(self) -> str:
        return f"{self.workdir.rstrip('/')}/{self.run_id}"


def pod_env(s: PodSettings) -> dict[str, str]:
    """The create request's `env` (every value a string), the bootstrap included."""
    _check_run_id(s.run_id)
    if not _KEY_LINE.match(s.authorized_key.strip()):
        raise ValueError("the client key must be one OpenSSH public key line")
    if not s.api_url.startswith(("https://", "http://")):
        raise ValueError("the API URL must be http(s)")
    if s.gpu_count < 1 or s.boot_grace_secs < 0 or s.retrieve_grace_secs < 0:
        raise ValueError("gpu_count must be ≥ 1 and the graces ≥ 0")
    env = {
        "OVERBRAINER_RUN_ID": s.run_id,
        "OVERBRAINER_WORKDIR": s.workdir,
        "OVERBRAINER_RUN_DIR": s.run_dir,
        "OVERBRAINER_BOOT_GRACE": str(int(s.boot_grace_secs)),
        "OVERBRAINER_RETRIEVE_GRACE": str(int(s.retrieve_grace_secs)),
        "OVERBRAINER_KEEP_POD": "1" if s.keep else "0",
        "OVERBRAINER_GPU_COUNT": str(int(s.gpu_count)),
        "OVERBRAINER_API_URL": s.api_url.rstrip("/"),
        "OVERBRAINER_AUTHORIZED_KEY": s.authorized_key.strip(),
        "OVERBRAINER_HOST_KEY": secret_reference(host_key_secret_name(s.run_id)),
        "OVERBRAINER_VERSION": __version__,
        "OVERBRAINER_WATCHDOG_INTERVAL_MS": str(scaled_ms(WATCHDOG_INTERVAL, s.time_scale)),
        "OVERBRAINER_WATCHDOG_PROBE_TRIES": str(PROBE_TRIES),
        "OVERBRAINER_WATCHDOG_PROBE_WAIT_MS": str(scaled_ms(PROBE_WAIT, s.time_scale)),
        "OVERBRAINER_WATCHDOG_CURL_MS": str(CURL_TIMEOUT_MS),
        "OVERBRAINER_SSHD_WAIT_MS": str(SSHD_WAIT_MS),
        "JUPYTER_DISABLE": "1",
        BOOTSTRAP_ENV: bootstrap_value(),
    }
    if not s.keep:
        if s.max_seconds is not None:
            env["OVERBRAINER_MAX_SECONDS"] = str(max(int(s.max_seconds), 0))
        if s.max_cost_usd is not None:
            env["OVERBRAINER_MAX_COST_USD"] = f"{float(s.max_cost_usd):.4f}"
    return env


SSH_PORT = "22/tcp"


def create_body(target, *, name: str, gpu_type: str, env: dict[str, str],
                data_center_ids: Iterable[str] = (), volume_gb: int | None = None,
                ports: Iterable[str] = (SSH_PORT,), own_entrypoint: bool = False) -> dict[str, Any]:
    """The create request of one attempt on `target` (a RunpodTarget). `env` is the pod's env
    (`pod_env`); the network volume's variables are added to it here. `ports`: SSH, and a served
    engine's HTTP port; `own_entrypoint`: see `pod_args`."""
    body: dict[str, Any] = {
        "name": name, "image": target.image, "args": pod_args(own_entrypoint), "cloud": "SECURE",
        "gpu": {"id": gpu_type, "count": int(target.gpu_count), "minCudaVersion": MIN_CUDA},
        "disk": int(target.container_disk_gb), "ports": list(ports), "startSsh": False,
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


def cluster_body(target, *, name: str, gpu_type: str, env: dict[str, str],
                 data_center_ids: Iterable[str] = (), volume_gb: int | None = None) -> dict[str, Any]:
    """The create request of an Instant Cluster (`POST /clusters`, `CreateClusterRequest`): the
    pod's container configuration for every member, `type` TRAINING and `compute` (`nodes` pods
    of `gpu_count` GPUs each). A cluster's create has no `cloud` and no `gpu` (the CUDA floor is
    the catalog's filter instead, `product=CLUSTER`)."""
    pod = create_body(target, name=name, gpu_type=gpu_type, env=env, data_center_ids=data_center_ids,
                      volume_gb=volume_gb)
    body = {k: v for k, v in pod.items() if k not in ("cloud", "gpu")}
    body.update(type="TRAINING", compute={"gpuTypeId": gpu_type, "gpuCountPerPod": int(target.gpu_count),
                                          "podCount": int(target.nodes)})
    return body


def _check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise ValueError(f"invalid run id for a pod: {run_id!r}")
    return run_id
