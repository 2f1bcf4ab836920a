"""The resolved configuration: dataclasses whose attribute names are the TOML keys.

Built by `overbrainer.config.read.read_config`; every value here was validated already.
Secrets are `overbrainer.config.secrets.Secret` objects and are resolved only when used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from overbrainer.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from overbrainer.config.secrets import Secret

PROTOCOLS = ("openai", "anthropic")
MODES = ("online", "batch")  # [pipeline] mode, answers_mode
DIALECTS = ("openai", "openrouter", "llamacpp", "ollama", "vllm", "generic")  # llm/dialects.py
THINKING_MODES = ("adaptive", "enabled")  # llm/thinking.py
EFFORTS = ("none", "low", "medium", "high")
ADAPTERS = ("lora", "qlora", "full")
# [training] distributed: how the training processes share the model (train/axolotl_config.py)
DISTRIBUTED = ("ddp", "fsdp", "deepspeed_zero2", "deepspeed_zero3")
# A runpod target with `nodes` >= 2 is a Runpod Instant Cluster of that many pods (its podCount)
MAX_NODES = 250
RUNTIMES = ("native", "docker")
ENGINES = ("docker", "podman")
TARGET_KINDS = ("local", "ssh", "runpod")
QUANTIZE_TYPES = ("Q4_K_M", "Q4_K_S", "Q5_K_M", "Q5_K_S", "Q6_K", "Q8_0", "Q3_K_M", "Q2_K", "F16", "BF16")

# Axolotl 0.19 for CUDA 13 (driver >= 580). The container runs training code and receives
# secrets such as HF_TOKEN: users who need reproducible runs set `image` pinned by digest.
DEFAULT_IMAGE = "axolotlai/axolotl:0.19.0-py3.12-cu130-2.12.1"
DEFAULT_RUNPOD_IMAGE = "axolotlai/axolotl-cloud-term:0.19.0-py3.12-cu130-2.12.1"
DEFAULT_RUNPOD_VENV = "/workspace/axolotl-venv"
# The image of a compare pod: the training image (see docs/compare.md#on-runpod for why, and what
# another image must provide). llama-server is built with CUDA on the pod's first compare.
DEFAULT_COMPARE_IMAGE = DEFAULT_RUNPOD_IMAGE
DEFAULT_SIDE_HOURS = 1.0  # [export] / [compare] max_hours: a side job's pod deletes itself then
DEFAULT_RUNPOD_BASE_URL = "https://api.runpod.io/v2"
# Runpod's HTTP proxy: a pod's `<port>/http` port from the internet (a served provider's engine).
DEFAULT_RUNPOD_PROXY_URL = "https://{pod_id}-{port}.proxy.runpod.net"
DEFAULT_HUB_BASE_URL = "https://huggingface.co"
DEFAULT_WORKDIR = "overbrainer"
DEFAULT_QUANTIZE = "Q4_K_M"
# Read by nothing: SSH is always paramiko. Still accepted (with a warning) for old projects.
SSH_CLIENT_ENV = "OVERBRAINER_SSH_CLIENT"
DEFAULT_MAX_TOKENS = 16384  # roles.<name>.max_tokens: a request's output limit

# A served provider's engine (docs/serving.md): its pinned image (the provider's `image` overrides
# it), the engine argument that says how many requests one replica batches, and that batch's
# default (what overbrainer passes when `engine_args` does not set it: the requests in flight per
# replica).
SERVE_ENGINES = ("vllm", "sglang", "llamacpp")
SERVE_IMAGES = {
    "vllm": "vllm/vllm-openai:v0.12.0",
    "sglang": "lmsysorg/sglang:v0.5.6.post2-cu130",
    "llamacpp": "ghcr.io/ggml-org/llama.cpp:server-cuda-b11382",
}
SERVE_BATCH = {"vllm": ("max_num_seqs", 256), "sglang": ("max_running_requests", 256),
               "llamacpp": ("parallel", 4)}
SERVE_DIALECTS = {"vllm": "vllm", "sglang": "vllm", "llamacpp": "llamacpp"}
MAX_REPLICAS = 16


@dataclass(frozen=True)
class Project:
    """[project]: the project's name (runs, repos and pods are named after it)."""

    name: str


@dataclass(frozen=True)
class Topic:
    """One [topics.<name>]: what the generator writes subtopics, then questions, about."""

    name: str
    description: str | None
    subtopics: int
    questions_per_subtopic: int


@dataclass(frozen=True)
class PriceSetting:
    """`price` of a provider or a role (docs/llm-requests.md#prices): USD per million tokens;
    `price = 0` is all zero (a self-hosted server, free). Batch prices: both or none."""

    input: float
    output: float
    cached_input: float | None = None
    batch_input: float | None = None
    batch_output: float | None = None


@dataclass(frozen=True)
class Provider:
    """One [providers.<name>]: an LLM API (its protocol, dialect, URL, key and prices)."""

    name: str
    protocol: str  # openai | anthropic
    base_url: str | None = None  # env only
    api_key: "Secret | None" = None  # env only; None = no auth header
    dialect: str | None = None  # openai protocol: one of DIALECTS (as set, else guessed); anthropic: None
    dialect_guessed: bool = False  # dialect was guessed from base_url (not set)
    price: PriceSetting | None = None  # the price of its models (a role's own price wins)
    serve: "Serve | None" = None  # a served provider: its model on rented GPUs (docs/serving.md)
    # Rate limits of each of its models (docs/llm-requests.md#rate-limits): set them where the
    # provider publishes none, lower them where it does. None: as published.
    max_requests_per_minute: int | None = None
    max_tokens_per_minute: int | None = None
    # OpenAI's batch queue limit of each model: the input tokens its batches in progress may hold
    # (docs/batch.md#limits). None: as a refused batch states it.
    batch_queue_tokens: int | None = None


EngineArg = tuple[str, "str | int | float | bool"]


@dataclass(frozen=True)
class Serve:
    """`[providers.<name>] serve = "<runpod target>"`: `model` (a Hub repository; for `llamacpp`
    `<repo>[:quant]`, or a path inside the image) served by `engine` on `replicas` pods of the
    target, each from `image`; `engine_args` (name -> value, in order) are the engine's own flags;
    `keep_warm_minutes`: how long idle pods wait for the next command (None: deleted with the
    command's last stage that uses them)."""

    target: str
    model: str
    engine: str = "vllm"
    image: str = SERVE_IMAGES["vllm"]
    replicas: int = 1
    engine_args: tuple[EngineArg, ...] = ()
    keep_warm_minutes: float | None = None

    def arg(self, name: str) -> "str | int | float | bool | None":
        """The value `engine_args` gives `name` (`max_num_seqs` or `max-num-seqs`), or None."""
        want = name.replace("-", "_")
        for key, value in self.engine_args:
            if key.replace("-", "_") == want:
                return value
        return None

    @property
    def per_replica(self) -> int:
        """Requests one replica takes at once: what the engine batches (`engine_args`, else the
        batch overbrainer passes it)."""
        flag, default = SERVE_BATCH[self.engine]
        value = self.arg(flag)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default

    @property
    def concurrency(self) -> int:
        """Requests in flight to the whole provider: replicas × per replica."""
        return self.replicas * self.per_replica


@dataclass(frozen=True)
class Role:
    """One [roles.<name>]: the model a stage sends to, on which provider, with what settings."""

    provider: str
    model: str
    reasoning: bool = False
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = None
    reasoning_effort: str | None = None  # none | low | medium | high
    thinking_budget: int | None = None
    thinking: str | None = None  # anthropic: adaptive | enabled (None: by model family)
    price: PriceSetting | None = None  # its model's price (wins over the provider's)


ROLE_NAMES = ("generator", "parent", "embedder", "judge", "grader")


@dataclass(frozen=True)
class Roles:
    """[roles]: generator and parent always; embedder, judge and grader when set."""

    generator: Role
    parent: Role
    embedder: Role | None = None
    judge: Role | None = None
    grader: Role | None = None  # the gate's LLM grader (none: no grading)

    def all(self) -> list[tuple[str, Role]]:
        """Every configured role with its name, in the order generator, parent, embedder, judge,
        grader."""
        return [(n, getattr(self, n)) for n in ROLE_NAMES if getattr(self, n) is not None]


@dataclass(frozen=True)
class Benchmark:
    """A benchmark file of `pipeline.decontaminate`: its path (relative to the project) and the
    fields whose text is read (empty: every string of a record)."""

    path: str
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pipeline:
    """[pipeline]: how the dataset stages send, retry, deduplicate, split and decontaminate."""

    concurrency: int = 8
    max_retries: int = 5
    dedup_threshold: float = 0.8
    embedding_threshold: float = 0.9
    question_batch_size: int = 10
    request_timeout_secs: int = 600
    eval_ratio: float = 0.1
    seed: int = 42
    include_system_prompt: bool = False
    stop_grace_secs: int = 30  # on a stop, how long the requests in flight may take to come back
    max_cost_usd: float | None = None  # the LLM spend cap of one command (None: no cap)
    decontaminate: tuple[Benchmark, ...] = ()  # benchmark files no example may overlap
    decontaminate_ngram: int = 13  # n of the n-gram overlap rule (lm-evaluation-harness's 13)
    decontaminate_eval: bool = True  # drop from train the examples whose question overlaps eval
    mode: str = "online"  # online | batch: how the batchable stages send (docs/batch.md)
    answers_mode: str | None = None  # the answers stage's own mode (None: `mode`)

    def stage_mode(self, stage: str) -> str:
        """`batch` when `stage` sends through the provider's batch API (only answers can)."""
        if stage != "answers":
            return "online"
        return self.answers_mode or self.mode


@dataclass(frozen=True)
class Gate:
    """[gate] (docs/stages.md#gate): the rule checks on answers (None: not checked), the
    grader's threshold, and the early stop of `answers` and `gate`."""

    min_chars: int | None = None
    max_chars: int | None = None
    min_tokens: int | None = None
    max_tokens: int | None = None
    language: str | None = None  # dataset/quality/language.LANGUAGES
    format_regex: str | None = None
    json_schema: dict[str, Any] | None = None
    grader_threshold: float = 7.0  # roles.grader's score (0-10) an answer needs to be kept
    stop_after: int = 50  # the first N answers of a stage execution the early stop watches (0: off)
    stop_share: float = 0.5  # stop when more than this share of them is rejected


@dataclass(frozen=True)
class Training:
    """[training]: the child's base model, where it trains and Axolotl's values."""

    target: str
    base_model: str
    adapter: str  # lora | qlora | full
    epochs: int = 3
    learning_rate: float = 2e-4
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    sequence_len: int = 4096
    micro_batch_size: int = 2
    gradient_accumulation_steps: int = 4
    optimizer: str = "adamw_torch_fused"
    lr_scheduler: str = "cosine"
    sample_packing: bool = True
    evals_per_epoch: int = 4
    saves_per_epoch: int = 1
    merge: bool = False
    hub_model_id: str | None = None  # deprecated: [hub] repo
    distributed: str | None = None  # one of DISTRIBUTED; None: one process per GPU as Axolotl launches
    axolotl_extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """Common part of every target; see LocalTarget, SshTarget, RunpodTarget."""

    name: str
    kind: str


@dataclass(frozen=True)
class LocalTarget(Target):
    """A `kind = "local"` target: this machine, natively or in a container."""

    runtime: str = "native"
    venv: str | None = None  # native only: directory holding bin/axolotl
    engine: str = "docker"  # docker runtime only
    image: str = DEFAULT_IMAGE  # docker runtime only
    llama_cpp_dir: str | None = None  # a llama.cpp already on the target (export, compare)
    llama_cpp_url: str | None = None  # where the pinned llama.cpp is downloaded from (a mirror)


@dataclass(frozen=True)
class SshTarget(Target):
    """A `kind = "ssh"` target: a machine reached over SSH (its host from the environment)."""

    runtime: str = "native"
    host: str | None = None  # env only: OVERBRAINER_TARGETS__<NAME>__HOST
    workdir: str = DEFAULT_WORKDIR
    venv: str | None = None
    engine: str = "docker"
    image: str = DEFAULT_IMAGE
    llama_cpp_dir: str | None = None
    llama_cpp_url: str | None = None


@dataclass(frozen=True)
class RunpodTarget(Target):
    """A `kind = "runpod"` target: a Runpod GPU pod created for the job and deleted after."""

    gpu_types: list[str] | str = field(default_factory=list)  # a list, or "auto"
    max_hours: float = 0.0
    min_vram_gb: int | None = None
    max_price_per_hour: float | None = None
    max_cost_usd: float | None = None
    gpu_count: int = 1  # per pod (per node of a cluster)
    nodes: int = 1  # 2..MAX_NODES: an Instant Cluster of that many pods, one torchrun each
    image: str = DEFAULT_RUNPOD_IMAGE
    venv: str = DEFAULT_RUNPOD_VENV
    container_disk_gb: int = 50
    boot_grace_minutes: int = 30
    retrieve_grace_minutes: int = 60
    data_center_ids: list[str] | str = field(default_factory=list)  # [] = any, or "auto"
    network_volume_id: str | None = None
    max_volume_gb: int | None = None
    llama_cpp_dir: str | None = None  # a llama.cpp inside the pod's image (export, compare)
    llama_cpp_url: str | None = None

    @property
    def cluster(self) -> bool:
        """Several pods for one job (an Instant Cluster), not one pod."""
        return self.nodes >= 2


@dataclass(frozen=True)
class Runpod:
    """[runpod]: the API's key and URL (both from the environment)."""

    api_key: "Secret | None" = None  # env only
    base_url: str | None = None  # env only; DEFAULT_RUNPOD_BASE_URL when unset
    proxy_url: str | None = None  # env only; DEFAULT_RUNPOD_PROXY_URL when unset

    @property
    def url(self) -> str:
        return self.base_url or DEFAULT_RUNPOD_BASE_URL

    @property
    def proxy(self) -> str:
        """The address of a pod's HTTP port, `{pod_id}` and `{port}` in it."""
        return self.proxy_url or DEFAULT_RUNPOD_PROXY_URL


@dataclass(frozen=True)
class Export:
    """[export]: the GGUF export after training or by `export` (docs/export.md)."""

    after_training: bool = False
    quantize: str = DEFAULT_QUANTIZE
    ollama_name: str | None = None
    target: str | None = None  # where `export` runs (default: the run's own target)
    max_hours: float = DEFAULT_SIDE_HOURS  # an export pod's life at most


@dataclass(frozen=True)
class Hub:
    """[hub]: the Hugging Face Hub repos `push` writes to."""

    repo: str | None = None
    private: bool = True
    after_training: bool = False
    base_url: str | None = None  # env only; DEFAULT_HUB_BASE_URL when unset
    dataset_repo: str | None = None  # `push --dataset`'s repo (default: <repo>-data)
    dataset_license: str | None = None  # a Hub license ID (hub_licenses.LICENSES), the dataset card's

    @property
    def url(self) -> str:
        return self.base_url or DEFAULT_HUB_BASE_URL


@dataclass(frozen=True)
class Compare:
    """[compare]: the judged child-against-parent comparison (docs/compare.md)."""

    parent_price_in: float | None = None
    parent_price_out: float | None = None
    child_price_per_hour: float | None = None
    max_tokens: int = 4096
    temperature: float = 0.0
    server_start_secs: int = 300
    image: str = DEFAULT_COMPARE_IMAGE  # a compare pod's image
    target: str | None = None  # where `compare` serves the child (default: the run's own target)
    max_hours: float = DEFAULT_SIDE_HOURS  # a compare pod's life at most


@dataclass(frozen=True)
class Metrics:
    """[metrics] (docs/metrics.md): served while a locking command runs, and/or written to a
    textfile at the end of each stage and run."""

    listen: str | None = None  # "IP:PORT" as written
    host: str | None = None  # the IP, without brackets
    port: int | None = None
    textfile: str | None = None  # as written (a `.prom` file); relative to the project directory

    @property
    def enabled(self) -> bool:
        return self.listen is not None or self.textfile is not None


@dataclass
class Config:
    """The whole configuration of a project (one per command)."""

    project: Project
    roles: Roles
    topics: list[Topic] = field(default_factory=list)
    providers: dict[str, Provider] = field(default_factory=dict)
    pipeline: Pipeline = field(default_factory=Pipeline)
    gate: Gate = field(default_factory=Gate)
    training: Training | None = None
    targets: dict[str, Target] = field(default_factory=dict)
    runpod: Runpod = field(default_factory=Runpod)
    export: Export = field(default_factory=Export)
    hub: Hub = field(default_factory=Hub)
    compare: Compare = field(default_factory=Compare)
    metrics: Metrics = field(default_factory=Metrics)
    hf_token: "Secret | None" = None  # env only
    log: str | None = None  # env only (OVERBRAINER_LOG), read by the log set-up
    warnings: list[str] = field(default_factory=list)  # deprecations, already logged once

    def topic(self, name: str) -> Topic:
        """The topic called `name`; ConfigError (exit 2) naming the valid ones otherwise."""
        for t in self.topics:
            if t.name == name:
                return t
        valid = ", ".join(t.name for t in self.topics) or "none: add a [[topics]] table to overbrainer.toml"
        raise ConfigError(f"unknown topic `{name}` (topics: {valid})")

    def role(self, role_name: str) -> Role | None:
        if role_name not in ROLE_NAMES:
            raise ConfigError(f"unknown role `{role_name}`")
        role: Role | None = getattr(self.roles, role_name)  # role_name: one of ROLE_NAMES
        return role

    def provider_for(self, role_name: str) -> tuple[Provider, Role]:
        """(Provider, Role) of a configured role. The judge falls back to the parent.

        Raises ConfigError when the role is not configured (embedder is optional).
        """
        role = self.role(role_name)
        if role is None and role_name == "judge":
            role = self.roles.parent
        if role is None:
            raise ConfigError(f"roles.{role_name} is not set in overbrainer.toml")
        return self.providers[role.provider], role

    def target(self, name: str, run_id: str | None = None) -> Target:
        """The target called `name` (`run_id`: the run that ran on it). The one lookup of a target
        by name: a missing one is a ConfigError (exit 2) naming it and listing the targets there are."""
        found = self.targets.get(name)
        if found is not None:
            return found
        if run_id is not None:
            head = f"target `{name}` of run {run_id} is no longer in overbrainer.toml"
        else:
            head = f"unknown target `{name}`: add [targets.{name}] to overbrainer.toml"
        known = ", ".join(f"`{n}`" for n in self.targets) or "none"
        raise ConfigError(f"{head} (targets: {known})")

    def secrets(self) -> list[tuple[str, "Secret"]]:
        """Every secret that is set, with its key: provider keys, runpod.api_key, hf_token."""
        out = [(f"providers.{n}.api_key", p.api_key) for n, p in self.providers.items() if p.api_key]
        if self.runpod.api_key is not None:
            out.append(("runpod.api_key", self.runpod.api_key))
        if self.hf_token is not None:
            out.append(("hf_token", self.hf_token))
        return out
