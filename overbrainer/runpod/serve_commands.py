"""The `serve` commands' flows (docs/serving.md#by-hand): `serve up` brings the served providers'
pods up and leaves them for the commands that follow (kept warm for `keep_warm` minutes of idle
time, or without it until `serve down`, `max_hours` or `max_cost_usd`), `serve ls` shows the
project's serves from their records (no API call), `serve down` deletes their pods and confirms
each delete.

Bringing a serve up runs shielded from Ctrl-C: a stop deletes what was made (confirmed) and the
command exits 130 (143, 129).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from overbrainer.config.model import PriceSetting
from overbrainer.config.secrets import Secret
from overbrainer.errors import ConfigError, Interrupted, OverbrainerError
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.serve import Context, Held, bring_up, down
from overbrainer.runpod.serve_record import DOWN, ServeRecord, all_serves
from overbrainer.support import fmt
from overbrainer.support.fmt import table

log = logging.getLogger(__name__)

EMPTY = "serve: no serve in this project"


def served(config, names: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The served providers named (all of them when none is), or ConfigError naming one that is not."""
    known = [n for n, p in config.providers.items() if p.serve is not None]
    for name in names:
        if name not in known:
            raise ConfigError(f"provider `{name}` is not served (served providers: "
                              f"{', '.join(f'`{n}`' for n in known) or 'none: give one `serve = <target>`'})")
    if not known:
        raise ConfigError("no served provider in overbrainer.toml: give one `serve = \"<runpod target>\"` "
                          "(docs/serving.md)")
    return list(names) or known


def up_flow(session, config, serves_dir: Path, names: tuple[str, ...] = ()) -> None:
    """`serve up [PROVIDER…]`: each provider's serve held by hand, then let go for the next commands."""
    front = session.front
    interrupt = front.interrupt()
    try:
        for name in served(config, names):
            with RunpodClient.from_config(config) as client, front.open_bus() as guard:
                ctx = Context(client, config, name, serves_dir, publish=guard.bus.publish, interrupt=interrupt)
                started = time.monotonic()
                held = interrupt.shield(bring_up, ctx, by_hand=True, note=f"bringing up the pods of provider {name}")
                took = time.monotonic() - started
                kept = interrupt.shield(held.release, end=False, note=f"leaving the pods of provider {name} up")
            if interrupt.caught():
                raise Interrupted(f"interrupted: provider {name} is up ({kept}); `overbrainer serve down {name}` "
                                  "deletes its pods")
            r = held.record
            n = len(held.endpoints())
            session.report(f"serve: {name} up: {n} replica{'s' if n != 1 else ''} of {r.model} ({r.engine}) at "
                           f"{fmt.usd_per_hour(held.rate())} in {fmt.duration(round(took))}; {kept}",
                           {"provider": name, "serve": r.id, "replicas": n, "rate_per_hour": held.rate(),
                            "seconds": round(took, 3), "kept": kept,
                            "endpoints": [base for _, base in held.endpoints()]})
    finally:
        interrupt.restore()


def down_flow(session, config, serves_dir: Path, names: tuple[str, ...] = ()) -> None:
    """`serve down [PROVIDER|SERVE…]`: every pod of those serves (all live ones by default)
    deleted and confirmed."""
    records = [r for r in all_serves(serves_dir) if r.state != DOWN or r.live]
    if names:
        records = [r for r in records if r.provider in names or r.id in names]
    if not records:
        session.report("serve: nothing to take down", {"serves": []})
        return
    front = session.front
    interrupt = front.interrupt()
    lines, data = [], []
    try:
        with RunpodClient.from_config(config) as client, front.open_bus() as guard:
            for record in records:
                if record.provider not in config.providers or config.providers[record.provider].serve is None:
                    log.warning("provider %s of serve %s is no longer served in overbrainer.toml; deleting its "
                                "pods", record.provider, record.id)
                ctx = _context(client, config, record, serves_dir, guard.bus.publish, interrupt)
                done = interrupt.shield(down, ctx, record, note=f"deleting the pods of serve {record.id}")
                lines.append(f"serve: {record.provider} ({record.id}) down: {done}")
                data.append({"provider": record.provider, "serve": record.id, "done": done})
    finally:
        interrupt.restore()
    session.report("\n".join(lines), {"serves": data})


def _context(client, config, record: ServeRecord, serves_dir: Path, publish, interrupt) -> Context:
    """The context of a serve: of its provider as configured, else a bare one that can delete."""
    if record.provider in config.providers and config.providers[record.provider].serve is not None:
        return Context(client, config, record.provider, serves_dir, publish=publish, interrupt=interrupt)
    return Context.bare(client, config, serves_dir, publish=publish, interrupt=interrupt)


def per_million_output(record: ServeRecord) -> float | None:
    """USD per million output tokens the serve gave: its pods' time while commands used them over
    the tokens of their answers (boot and idle time aside: `SPEND` has them)."""
    if not record.output_tokens:
        return None
    return record.serving_usd / record.output_tokens * 1e6


def ls_flow(session, serves_dir: Path) -> None:
    """`serve ls`: every serve of the project from its records (no Runpod call; `pod ls` looks)."""
    rows, data = [], []
    now = time.time()
    for r in all_serves(serves_dir):
        pods = [p for _, p in r.pods() if p is not None]
        live = [p for p in pods if p.live]
        rate = sum(p.cost_per_hour or 0.0 for p in live)
        spend = sum(s for p in pods if (s := p.spend_so_far(now)) is not None)
        per_million = per_million_output(r)
        rows.append([r.id, r.provider, r.state, f"{len(live)}/{r.replicas}", fmt.usd_per_hour(rate or None),
                     r.created, fmt.about_usd(spend), f"{r.output_tokens}",
                     "-" if per_million is None else f"${per_million:,.2f}"])
        data.append({"serve": r.id, "provider": r.provider, "model": r.model, "engine": r.engine, "state": r.state,
                     "replicas": r.replicas, "live": len(live), "rate_per_hour": rate or None, "created": r.created,
                     "spend": round(spend, 4), "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                     "serving_usd": r.serving_usd, "usd_per_million_output": per_million,
                     "pods": [p.pod_id for p in live]})
    if not rows:
        session.report(EMPTY, {"serves": []})
        return
    head = ["SERVE", "PROVIDER", "STATE", "PODS", "$/H", "CREATED", "SPEND", "OUT TOKENS", "$/M OUT"]
    session.report("\n".join(table([head] + rows)), {"serves": data})


class ServedProviders:
    """The served providers of one command's stages (pipeline/context.py): each brought up (or a
    warm serve of the same settings taken over) when a stage first asks for it, and let go when the
    command ends (`close`): deleted, or kept warm for `keep_warm`. `interrupt`: the command's
    (an Interrupt or its Event): a stop while pods come up deletes them. `charge`: a spend cap's
    (support/budget.Budget.charge): the pods' time counts against it."""

    def __init__(self, config, serves_dir: Path, *, publish=None, interrupt=None,
                 charge: Callable[[float], None] | None = None):
        self.config = config
        self.charge = charge  # told the pods' time as it passes, their boot included (a spend cap)
        self.serves_dir = Path(serves_dir)
        self.publish = publish
        self.interrupt = interrupt
        self._client: RunpodClient | None = None
        self._held: dict[str, Held] = {}
        self._lock = threading.Lock()

    def hold(self, name: str) -> Held:
        """Provider `name`'s serve, up and held until `close` (brought up on the first call)."""
        with self._lock:
            held = self._held.get(name)
            if held is not None:
                return held
            if self._client is None:
                self._client = RunpodClient.from_config(self.config)
            ctx = Context(self._client, self.config, name, self.serves_dir, publish=self.publish,
                          interrupt=self.interrupt)
            held = bring_up(ctx)
            if self.charge is not None:  # this command's wait for its pods, then their time as it passes
                self.charge(held.spend_between(held.booted_at, held.held_since))
                held.charge = self.charge
            self._held[name] = held
            log.info("serve %s: %d replica(s) of %s up at %s", name, len(held.endpoints()), held.record.model,
                     fmt.usd_per_hour(held.rate()))
            return held

    def provider(self, name: str):
        """Provider `name` as a client reaches it: (the provider at its first replica's address,
        with the serve's key and a price of 0 per token: its pods are what it costs; the
        addresses of all its replicas)."""
        held = self.hold(name)
        endpoints = tuple(base for _, base in held.endpoints())
        provider = replace(self.config.providers[name], base_url=endpoints[0], api_key=Secret(held.api_key),
                           price=PriceSetting(0.0, 0.0))
        return provider, endpoints

    def on_lost(self, name: str, drop: Callable[[str], None]) -> None:
        """Call `drop(address)` for each replica of provider `name` found lost."""
        held = self._held[name]
        bases = dict(held.endpoints())
        held.on_lost = lambda key: drop(bases[key]) if key in bases else None

    def close(self) -> None:
        """Let every serve go (deleted and confirmed, or kept warm); a pod that could not be
        confirmed deleted is a warning (its watchdog deletes it when its lease runs out)."""
        with self._lock:
            helds, self._held = list(self._held.items()), {}
            client, self._client = self._client, None
        try:
            for name, held in helds:
                try:
                    done = held.release()
                    if held.settled is not None:
                        log.info("serve %s: %s", name, held.settled)
                    log.info("serve %s: %s", name, done)
                except OverbrainerError as e:
                    log.warning("serve %s: %s", name, e)
        finally:
            if client is not None:
                client.close()


@dataclass(frozen=True)
class ServedCost:
    """What a served provider's requests should cost (`run --plan`), from nothing but records:
    `per_million` USD per million output tokens its earlier serves measured (their pods' time
    while commands used them over the tokens they gave), `boot` USD of its last serve's boot at its
    rate, and `at_most` replicas × the target's max_hours × its max_price_per_hour (each pod's
    max_cost_usd when lower); None where unknown."""

    provider: str
    per_million: float | None
    boot: float | None
    at_most: float | None

    def expected(self, output_tokens: int) -> float | None:
        if self.per_million is None:
            return None
        return (self.boot or 0.0) + self.per_million * output_tokens / 1e6

    def unknown(self) -> str:
        cap = "" if self.at_most is None else f"; at most ${self.at_most:.4f} of pod time"
        return f"served by provider {self.provider}: no throughput measured yet (no earlier serve gave tokens){cap}"


def served_cost(config, name: str, serves_dir: Path, pod_rate: float | None) -> ServedCost:
    """Provider `name`'s ServedCost; `pod_rate`: USD per hour of the dearest pod its target may
    land on (Runpod's catalog), else the target's max_price_per_hour counts."""
    serve = config.providers[name].serve
    target = config.target(serve.target)
    records = [r for r in all_serves(serves_dir) if r.provider == name and r.model == serve.model]
    out = sum(r.output_tokens for r in records)
    per_million = sum(r.serving_usd for r in records) / out * 1e6 if out else None
    boot = None
    for r in reversed(records):
        rates = [p.cost_per_hour for _, p in r.pods() if p is not None and p.cost_per_hour]
        if r.boot_secs is not None and rates:
            boot = r.boot_secs / 3600.0 * sum(rates) / len(rates) * serve.replicas
            break
    at_most = None
    rate = pod_rate if pod_rate is not None else target.max_price_per_hour
    if rate is not None and target.max_hours:
        per_pod = rate * target.max_hours
        if target.max_cost_usd is not None:
            per_pod = min(per_pod, target.max_cost_usd)
        at_most = per_pod * serve.replicas
    elif target.max_cost_usd is not None:
        at_most = target.max_cost_usd * serve.replicas
    return ServedCost(name, per_million, boot, at_most)


def history_lines(serves_dir: Path, api_price: Callable[[str], Any]) -> tuple[str, list[dict]] | None:
    """`history`'s lines of the served providers (None without a serve that gave tokens): per
    provider and model, the output tokens its serves gave, their pods' time while commands used
    them, the $ per million output tokens, beside `api_price(model)` (an llm.prices.Price: what
    an API lists for the same model) when it is known."""
    totals: dict[tuple[str, str], list[float]] = {}
    for r in all_serves(serves_dir):
        if r.output_tokens:
            t = totals.setdefault((r.provider, r.model), [0, 0.0])
            t[0] += r.output_tokens
            t[1] += r.serving_usd
    if not totals:
        return None
    lines, data = [], []
    for (provider, model), (out, usd) in totals.items():
        per_million = usd / out * 1e6
        api = api_price(model)
        beside = (f"; an API lists it at ${api.output_per_million:,.2f} ({api.source})" if api is not None
                  else "; no API price known for it")
        lines.append(f"served {provider} ({model}): {int(out)} output tokens for {fmt.about_usd(usd)} of pod time: "
                     f"${per_million:,.2f} per million output tokens{beside}")
        data.append({"provider": provider, "model": model, "output_tokens": int(out), "serving_usd": round(usd, 6),
                     "usd_per_million_output": per_million,
                     "api_usd_per_million_output": api.output_per_million if api is not None else None})
    return "\n".join(lines), data
