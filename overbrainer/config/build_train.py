"""Sections of the training area: [training], [targets.<name>], [runpod], [export], [hub],
[compare], [metrics]. Same conventions as build.py: every problem is collected."""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Mapping

from overbrainer.config.fields import NAME_RULE, EnvStr, Table, coerce_scalar, is_name, misnamed, origin
from overbrainer.config.hub_licenses import LICENSES
from overbrainer.config.model import (
    ADAPTERS,
    DEFAULT_COMPARE_IMAGE,
    DEFAULT_IMAGE,
    DEFAULT_QUANTIZE,
    DEFAULT_RUNPOD_IMAGE,
    DEFAULT_RUNPOD_VENV,
    DEFAULT_SIDE_HOURS,
    DEFAULT_WORKDIR,
    DISTRIBUTED,
    ENGINES,
    MAX_NODES,
    QUANTIZE_TYPES,
    RUNTIMES,
    SSH_CLIENT_ENV,
    TARGET_KINDS,
    Compare,
    Export,
    Hub,
    LocalTarget,
    Metrics,
    Runpod,
    RunpodTarget,
    SshTarget,
    Target,
    Training,
)
from overbrainer.config.values import secret, url

HUB_REPO = r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z"  # compiled when [hub] repo is set
U32 = 2**32 - 1

# Axolotl keys written from a typed [training] setting (axolotl key -> training key).
TYPED_EXTRA = {
    "base_model": "base_model", "adapter": "adapter", "num_epochs": "epochs",
    "learning_rate": "learning_rate", "lora_r": "lora_r", "lora_alpha": "lora_alpha",
    "lora_dropout": "lora_dropout", "sequence_len": "sequence_len",
    "micro_batch_size": "micro_batch_size", "gradient_accumulation_steps": "gradient_accumulation_steps",
    "optimizer": "optimizer", "lr_scheduler": "lr_scheduler", "sample_packing": "sample_packing",
    "evals_per_epoch": "evals_per_epoch", "saves_per_epoch": "saves_per_epoch",
    "hub_model_id": "hub_model_id",
}
# Axolotl keys that `[training] distributed` writes (train/axolotl_config.py): axolotl_extra may set
# them only when `distributed` is not set.
DISTRIBUTED_EXTRA = ("deepspeed", "fsdp", "fsdp_config", "fsdp_version")
MANAGED_EXTRA = ("datasets", "test_datasets", "val_set_size", "output_dir", "dataset_prepared_path",
                 "plugins", "resume_from_checkpoint")

_POSITIVE = (lambda x: x > 0, "must be greater than 0")
_NON_NEGATIVE = (lambda x: x >= 0, "must be at least 0")


def training(root: Table) -> Training | None:
    t = root.table("training")
    if t is None:
        return None
    target = t.str("target", required=True, nonempty=True)
    base_model = t.str("base_model", required=True, nonempty=True)
    adapter = t.choice("adapter", ADAPTERS, required=True)
    d = dict(
        epochs=t.int("epochs", 3, min=1, max=U32),
        learning_rate=t.float("learning_rate", 2e-4, rule=_POSITIVE),
        lora_r=t.int("lora_r", 16, min=1, max=U32),
        lora_alpha=t.int("lora_alpha", 32, min=1, max=U32),
        lora_dropout=t.float("lora_dropout", 0.05, rule=(lambda x: 0 <= x < 1, "must be in [0, 1)")),
        sequence_len=t.int("sequence_len", 4096, min=1, max=U32),
        micro_batch_size=t.int("micro_batch_size", 2, min=1, max=U32),
        gradient_accumulation_steps=t.int("gradient_accumulation_steps", 4, min=1, max=U32),
        optimizer=t.str("optimizer", "adamw_torch_fused", nonempty=True),
        lr_scheduler=t.str("lr_scheduler", "cosine", nonempty=True),
        sample_packing=t.bool("sample_packing", True),
        evals_per_epoch=t.int("evals_per_epoch", 4, min=1, max=U32),
        saves_per_epoch=t.int("saves_per_epoch", 1, min=1, max=U32),
        merge=t.bool("merge", False),
        hub_model_id=t.str("hub_model_id"),
        distributed=t.choice("distributed", DISTRIBUTED),
    )
    extra = _extra(t)
    t.finish()
    if d["distributed"] is not None:
        for key in DISTRIBUTED_EXTRA:
            if key in extra:
                t.problem(f"axolotl_extra.{key}", f"set by training.distributed = \"{d['distributed']}\": remove it")
    if d["merge"] and adapter == "full":
        t.problem("merge", 'only with adapter = "lora" or "qlora"')
    if target is None or base_model is None or adapter is None:
        return None
    return Training(target=target, base_model=base_model, adapter=adapter, axolotl_extra=extra, **d)


def _extra(t: Table) -> dict[str, Any]:
    sub = t.table("axolotl_extra")
    if sub is None:
        return {}
    extra: dict[str, Any] = _plain(sub.data)
    sub.used.update(sub.data)
    for k, v in extra.items():
        if k in TYPED_EXTRA:
            sub.problem(k, f"set it with training.{TYPED_EXTRA[k]}, not in axolotl_extra", sub.data[k])
        elif k in MANAGED_EXTRA:
            sub.problem(k, "managed by overbrainer, it cannot be set", sub.data[k])
        elif k == "save_only_model" and v is True:
            sub.problem(k, "true is refused: a stopped run could not be resumed", sub.data[k])
    return extra


def _plain(v: Any) -> Any:
    """Free-form values: env text coerced (true/false, numbers), tables and arrays kept."""
    if isinstance(v, EnvStr):
        return coerce_scalar(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


# `ssh_client` chose between OpenSSH and a built-in client; every SSH connection is paramiko's now.
IGNORED_CLIENT = "is ignored: overbrainer always uses its built-in SSH client (paramiko)"


def targets(root: Table, environ: Mapping[str, str], warnings: list[str]) -> dict[str, Target]:
    """The [targets.<name>] tables; what is accepted but read by nothing goes to `warnings`."""
    if (environ.get(SSH_CLIENT_ENV) or "").strip():
        warnings.append(f"{SSH_CLIENT_ENV} {IGNORED_CLIENT}; unset it")
    out: dict[str, Target] = {}
    tables = root.tables("targets")
    for name, t in tables.items():
        if not is_name(name):
            root.problems.append(f"targets.{name}: name must match {NAME_RULE}")
        if misnamed(t, name, "target", [n for n, o in tables.items() if "kind" in o.data], "kind"):
            continue
        kind = t.choice("kind", TARGET_KINDS, required=True)
        if kind is None:
            t.used.update(t.data)  # the kind decides the keys: report only the kind
            continue
        client = t.raw("ssh_client")
        if client is not None:
            src = origin(client)
            warnings.append(f"{t.key('ssh_client')}{f' (from {src})' if src else ''} {IGNORED_CLIENT}; remove it")
        if kind == "runpod":
            target = _runpod_target(t, name)
        else:
            target = _machine_target(t, name, kind)
        t.finish()
        if target is not None:
            out[name] = target
    return out


def _machine_target(t: Table, name: str, kind: str) -> Target | None:
    runtime = t.choice("runtime", RUNTIMES, required=True)
    venv = t.str("venv", nonempty=True)
    engine = t.choice("engine", ENGINES)
    image = t.str("image", nonempty=True)
    if runtime == "docker" and venv is not None:
        t.problem("venv", 'only with runtime = "native"')
    if runtime == "native":
        for k, v in (("engine", engine), ("image", image)):
            if v is not None:
                t.problem(k, 'only with runtime = "docker"')
    common = dict(name=name, kind=kind, runtime=runtime, venv=venv, engine=engine or "docker",
                  image=image or DEFAULT_IMAGE, llama_cpp_dir=t.str("llama_cpp_dir", nonempty=True),
                  llama_cpp_url=url(t, "llama_cpp_url"))
    if kind == "local":
        return LocalTarget(**common) if runtime else None
    host = t.str("host", nonempty=True)
    workdir = t.str("workdir", DEFAULT_WORKDIR, nonempty=True)
    if not runtime:
        return None
    return SshTarget(**common, host=host.strip() if host else None, workdir=workdir)


def _nodes(t: Table) -> int:
    """`nodes`: 1 (one pod) to MAX_NODES (an Instant Cluster of that many pods)."""
    nodes = t.int("nodes", 1, min=1, max=U32)
    if nodes is not None and nodes > MAX_NODES:
        t.problem("nodes", f"must be at most {MAX_NODES}: an Instant Cluster holds 2 to {MAX_NODES} pods "
                           "(Runpod's podCount)", t.raw("nodes"))
        return 1
    return nodes or 1


def _runpod_target(t: Table, name: str) -> Target | None:
    gpu_types = t.str_list_or_auto("gpu_types", required=True)
    max_hours = t.float("max_hours", required=True,
                        rule=(lambda x: 0 < x <= 720, "must be greater than 0 and at most 720"))
    min_vram = t.int("min_vram_gb", min=1, max=U32)
    max_price = t.float("max_price_per_hour", rule=_POSITIVE)
    max_cost = t.float("max_cost_usd", rule=_POSITIVE)
    gpu_count = t.int("gpu_count", 1, min=1, max=U32)
    nodes = _nodes(t)
    image = t.str("image", DEFAULT_RUNPOD_IMAGE, nonempty=True)
    venv = t.str("venv", DEFAULT_RUNPOD_VENV, nonempty=True)
    disk = t.int("container_disk_gb", 50, min=20, max=U32)
    boot = t.int("boot_grace_minutes", 30, min=5, max=U32)
    retrieve = t.int("retrieve_grace_minutes", 60, min=1, max=U32)
    dcs = t.str_list_or_auto("data_center_ids", [])
    volume = t.str("network_volume_id", nonempty=True)
    max_volume = t.int("max_volume_gb", min=1, max=U32)
    llama_dir = t.str("llama_cpp_dir", nonempty=True)
    llama_url = url(t, "llama_cpp_url")
    if llama_dir is not None and not llama_dir.startswith("/"):
        t.problem("llama_cpp_dir", "must be an absolute path inside the pod's image")
    if isinstance(gpu_types, list):
        if gpu_types == ["auto"]:
            t.problem("gpu_types", 'write "auto", not ["auto"]')
        elif not gpu_types or not all(gpu_types):
            t.problem("gpu_types", 'must name at least one GPU type (no empty item), or be "auto"')
    if gpu_types != "auto":
        for k, v in (("min_vram_gb", min_vram), ("max_price_per_hour", max_price)):
            if v is not None:
                t.problem(k, 'only with gpu_types = "auto"')
    if venv is not None and not venv.startswith("/"):
        t.problem("venv", "must be an absolute path")
    if isinstance(dcs, list) and not all(dcs):
        t.problem("data_center_ids", "must not hold an empty item")
    if volume is not None and (dcs == "auto" or len(dcs or []) != 1):
        t.problem("network_volume_id", "needs exactly one data_center_ids entry (not \"auto\"): the volume's")
    if max_volume is not None and volume is None:
        t.problem("max_volume_gb", "only with network_volume_id")
    if gpu_types is None or max_hours is None:
        return None
    return RunpodTarget(
        name=name, kind="runpod", gpu_types=gpu_types, max_hours=max_hours, min_vram_gb=min_vram,
        max_price_per_hour=max_price, max_cost_usd=max_cost, gpu_count=gpu_count, nodes=nodes, image=image,
        venv=venv, container_disk_gb=disk, boot_grace_minutes=boot, retrieve_grace_minutes=retrieve,
        data_center_ids=dcs if dcs is not None else [], network_volume_id=volume,
        max_volume_gb=max_volume, llama_cpp_dir=llama_dir, llama_cpp_url=llama_url,
    )


def runpod(root: Table, environ: Mapping[str, str]) -> Runpod:

    t = root.table("runpod")
    if t is None:
        return Runpod()
    proxy = url(t, "proxy_url", loopback_http=True)
    if proxy is not None and not all(f"{{{k}}}" in proxy for k in ("pod_id", "port")):
        t.problem("proxy_url", "must hold {pod_id} and {port} (Runpod's is https://{pod_id}-{port}.proxy.runpod.net)")
        proxy = None
    r = Runpod(api_key=secret(t, "api_key", environ), base_url=url(t, "base_url", loopback_http=True),
               proxy_url=proxy)
    t.finish()
    return r


_SIDE_HOURS = (lambda x: 0 < x <= 720, "must be greater than 0 and at most 720")


def export(root: Table) -> Export:
    t = root.table("export")
    if t is None:
        return Export()
    after = t.bool("after_training", False)
    quantize = t.choice("quantize", QUANTIZE_TYPES, DEFAULT_QUANTIZE)
    name = t.str("ollama_name")
    if name is not None and not is_ollama_name(name):
        t.problem("ollama_name", "not a valid Ollama model name ([host/][namespace/]model[:tag])")
        name = None
    target = t.str("target", nonempty=True)
    hours = t.float("max_hours", DEFAULT_SIDE_HOURS, rule=_SIDE_HOURS)
    t.finish()
    return Export(after_training=after, quantize=quantize, ollama_name=name, target=target,
                  max_hours=hours if hours is not None else DEFAULT_SIDE_HOURS)


def _hub_repo(t: Table, key: str) -> str | None:
    repo: str | None = t.str(key)
    if repo is not None and not re.match(HUB_REPO, repo):
        t.problem(key, "must be exactly NAMESPACE/NAME")
        return None
    return repo


def _hub_license(license: str) -> bool:
    return license in LICENSES


def hub(root: Table) -> Hub:
    t = root.table("hub")
    if t is None:
        return Hub()
    repo, dataset_repo = (_hub_repo(t, k) for k in ("repo", "dataset_repo"))
    license = t.str("dataset_license")
    if license is not None and not _hub_license(license):
        t.problem("dataset_license", "not a Hugging Face license ID (apache-2.0, mit, cc-by-4.0, other…: "
                  "https://huggingface.co/docs/hub/repositories-licenses)", license)
        license = None
    h = Hub(repo=repo, private=t.bool("private", True), after_training=t.bool("after_training", False),
            base_url=url(t, "base_url", loopback_http=True), dataset_repo=dataset_repo, dataset_license=license)
    t.finish()
    return h


def compare(root: Table) -> Compare:
    t = root.table("compare")
    if t is None:
        return Compare()
    c = Compare(
        parent_price_in=t.float("parent_price_in", rule=_NON_NEGATIVE),
        parent_price_out=t.float("parent_price_out", rule=_NON_NEGATIVE),
        child_price_per_hour=t.float("child_price_per_hour", rule=_NON_NEGATIVE),
        max_tokens=t.int("max_tokens", 4096, min=1, max=U32),
        temperature=t.float("temperature", 0.0, rule=(lambda x: 0 <= x <= 2, "must be in [0, 2]")),
        server_start_secs=t.int("server_start_secs", 300, min=1, max=U32),
        image=t.str("image", DEFAULT_COMPARE_IMAGE, nonempty=True) or DEFAULT_COMPARE_IMAGE,
        target=t.str("target", nonempty=True),
        max_hours=t.float("max_hours", DEFAULT_SIDE_HOURS, rule=_SIDE_HOURS) or DEFAULT_SIDE_HOURS,
    )
    t.finish()
    return c


def metrics(root: Table) -> Metrics:
    t = root.table("metrics")
    if t is None:
        return Metrics()
    listen = t.str("listen")
    textfile = t.str("textfile", nonempty=True)
    t.finish()
    if textfile is not None and not textfile.endswith(".prom"):
        # node_exporter's textfile collector reads only *.prom files: any other name is never seen
        t.problem("textfile", "must end in .prom (node_exporter's textfile collector reads only *.prom files)",
                  t.data["textfile"])
        textfile = None
    if listen is None:
        return Metrics(textfile=textfile)
    parsed = parse_listen(listen.strip())
    if parsed is None:
        t.problem("listen", "expected IP:PORT, e.g. 127.0.0.1:9464 or [::1]:9464 (no host name)", t.data["listen"])
        return Metrics(textfile=textfile)
    return Metrics(listen=listen.strip(), host=parsed[0], port=parsed[1], textfile=textfile)


def parse_listen(text: str) -> tuple[str, int] | None:
    """("127.0.0.1", 9464) from "127.0.0.1:9464", ("::1", 9464) from "[::1]:9464"; None if not."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        version = 6
    else:
        version = 4
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if address.version != version:
        return None
    return str(address), int(port)


def _ollama_part(kind: str, text: str) -> bool:
    limit = 350 if kind == "host" else 80
    if not 1 <= len(text) <= limit or not (text[0].isascii() and (text[0].isalnum() or text[0] == "_")):
        return False
    for c in text:
        ok = (c.isascii() and c.isalnum()) or c in "_-" or (c == "." and kind != "namespace") \
            or (c == ":" and kind == "host")
        if not ok:
            return False
    return True


def is_ollama_name(name: str) -> bool:
    """Ollama's own rule for `[host/][namespace/]model[:tag]` (types/model/name.go)."""
    rest, tag = name, None
    colon, slash = name.rfind(":"), name.rfind("/")
    if colon >= 0 and colon > slash:
        rest, tag = name[:colon], name[colon + 1:]
    head, _, model = rest.rpartition("/")
    host = namespace = None
    if "/" in rest:
        if "/" in head:
            host, _, namespace = head.rpartition("/")
            host = host.split("://", 1)[1] if "://" in host else host
        else:
            namespace = head
    return (_ollama_part("model", model)
            and (tag is None or _ollama_part("tag", tag))
            and (namespace is None or _ollama_part("namespace", namespace))
            and (host is None or _ollama_part("host", host)))
