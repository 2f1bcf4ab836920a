"""What llm/ reads of the configuration, as protocols: `config.model.Role`, `Provider` and
`Pipeline` match them (config/ imports llm/, so llm/ names none of its classes). The values and
their defaults are config/model's: llm/ keeps no default of its own."""

from __future__ import annotations

from typing import Protocol


class Key(Protocol):
    """An API key (`config.secrets.Secret`): resolved only when a client is made."""

    def resolve(self) -> str: ...


class RoleSettings(Protocol):
    """A role (`[roles.<name>]`): its model and how it is asked."""

    @property
    def model(self) -> str: ...
    @property
    def reasoning(self) -> bool: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def temperature(self) -> float | None: ...
    @property
    def reasoning_effort(self) -> str | None: ...
    @property
    def thinking_budget(self) -> int | None: ...
    @property
    def thinking(self) -> str | None: ...


class ProviderSettings(Protocol):
    """A provider (`[providers.<name>]`): where and how its models are reached."""

    @property
    def name(self) -> str: ...
    @property
    def protocol(self) -> str: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def api_key(self) -> Key | None: ...
    @property
    def dialect(self) -> str | None: ...
    @property
    def dialect_guessed(self) -> bool: ...
    @property
    def max_requests_per_minute(self) -> int | None: ...
    @property
    def max_tokens_per_minute(self) -> int | None: ...


class PipelineSettings(Protocol):
    """The `[pipeline]` settings a client is made with."""

    @property
    def concurrency(self) -> int: ...
    @property
    def max_retries(self) -> int: ...
    @property
    def request_timeout_secs(self) -> int: ...
