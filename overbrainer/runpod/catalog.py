"""Which GPU types a run asks Runpod for, in which order, and in which data centers.

A target lists its `gpu_types`, walked in that order without reading the catalog; or it says
`"auto"`, and ONE catalog read (availability scoped to `gpu_count`) is filtered and ranked:
Secure Cloud types with a Secure price (> 0), at least `gpu_count` GPUs per pod, at least
`min_vram_gb` of VRAM, a pod price (list price × `gpu_count`) at most `max_price_per_hour`, and in
stock (availability LOW or better) — anywhere, or in one of the listed `data_center_ids`.
Cheapest first; ties go to more VRAM, then to the id. `data_center_ids = "auto"` sends each type
the data centers where the catalog shows it in stock (a type in stock nowhere goes without a
list). Nothing here talks to the network: the API client produces `GpuType`s (parsed once, by
runpod/objects.parse_gpu: a type without `"secure": true` or without a price above $0 is not on
Secure Cloud), these functions decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from overbrainer.errors import OverbrainerError
from overbrainer.runpod.objects import GpuType

AUTO = "auto"
MIN_CUDA = "13.0"


class NotInStock(OverbrainerError):
    """Nothing in the catalog fits the target: no pod is created."""


@dataclass(frozen=True)
class Candidate:
    """One create to try: the type, what its pod costs by the list (None unknown), and the
    `dataCenterIds` to send (empty: anywhere)."""

    gpu_type: str
    price_per_gpu: float | None = None
    memory_gb: float | None = None
    data_center_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Wanted:
    """What the target asks for (the keys of `[targets.<name>]` of kind runpod)."""

    gpu_types: list[str] | str
    gpu_count: int = 1
    min_vram_gb: float | None = None
    max_price_per_hour: float | None = None
    data_center_ids: list[str] | str = field(default_factory=list)

    @classmethod
    def of(cls, target: Any) -> "Wanted":
        return cls(gpu_types=target.gpu_types, gpu_count=target.gpu_count, min_vram_gb=target.min_vram_gb,
                   max_price_per_hour=target.max_price_per_hour, data_center_ids=target.data_center_ids)

    @property
    def needs_catalog(self) -> bool:
        """Only `"auto"` (types or data centers) reads the catalog; a plain list never does."""
        return self.gpu_types == AUTO or self.data_center_ids == AUTO


def vram_floor(model_bytes: int | float) -> int:
    """The VRAM (GB) a side job's pod asks `"auto"` for, from what its model weighs:
    ceil(1.2 × bytes / 1e9) + 2 (the weights, a fifth more for the work, 2 GB for CUDA)."""
    return math.ceil(1.2 * float(model_bytes) / 1e9) + 2


# --- ranking and picking ------------------------------------------------------------------------

def rank_key(gpu: GpuType) -> tuple:
    """Cheapest first, no price last; ties: more VRAM first, then the id."""
    price = gpu.price_per_hour
    return (price is None, price if price is not None else 0.0, -(gpu.memory_gb or 0.0), gpu.id)


def _why_not(gpu: GpuType, w: Wanted) -> str | None:
    """The first limit `gpu` fails for `w` (a key of _REASONS), or None when it fits."""
    if not gpu.secure or gpu.price_per_hour is None:
        return "secure"
    if gpu.max_count < w.gpu_count:
        return "count"
    if w.min_vram_gb is not None and (gpu.memory_gb or 0) < w.min_vram_gb:
        return "vram"
    if w.max_price_per_hour is not None and gpu.price_per_hour * w.gpu_count > w.max_price_per_hour:
        return "price"
    listed = w.data_center_ids if isinstance(w.data_center_ids, list) and w.data_center_ids else None
    if not (gpu.stocked_in(listed) if listed else gpu.in_stock):
        return "stock"
    return None


_REASONS = {
    "secure": "not offered on Secure Cloud",
    "count": "with fewer than {count} GPUs per pod",
    "vram": "less VRAM than min_vram_gb",
    "price": "above max_price_per_hour (the list price times gpu_count)",
    "stock": "out of stock",
}


def _limits(w: Wanted) -> str:
    parts = [f"gpu_count = {w.gpu_count}"]
    if w.min_vram_gb is not None:
        parts.append(f"min_vram_gb = {w.min_vram_gb:g}")
    if w.max_price_per_hour is not None:
        parts.append(f"max_price_per_hour = {w.max_price_per_hour:g}")
    if isinstance(w.data_center_ids, list) and w.data_center_ids:
        parts.append("data_center_ids = [" + ", ".join(f'"{d}"' for d in w.data_center_ids) + "]")
    return ", ".join(parts)


def _dc_order(chosen: list[GpuType]) -> dict[str, int]:
    """Data centers where a chosen type is in stock, ranked by their cheapest in-stock type."""
    order: dict[str, int] = {}
    for gpu in sorted(chosen, key=rank_key):
        for dc in gpu.stock_dcs():
            order.setdefault(dc, len(order))
    return order


def _dcs_for(gpu: GpuType | None, w: Wanted, order: dict[str, int]) -> tuple[str, ...]:
    if w.data_center_ids == AUTO:
        if gpu is None:
            return ()
        return tuple(sorted(gpu.stock_dcs(), key=lambda d: order.get(d, len(order))))
    return tuple(w.data_center_ids or ())


def pick(w: Wanted, catalog: list[GpuType] | None = None, *, tried: Iterable[str] = ()) -> list[Candidate]:
    """The creates to try, in order, leaving out the types in `tried`.

    A listed `gpu_types` keeps its order and needs no catalog (unless `data_center_ids` is
    `"auto"`). `"auto"` needs the catalog read for `w.gpu_count`. Raises NotInStock, saying
    why, when no type fits; ValueError when the catalog is needed and not given.
    """
    done = set(tried)
    if w.needs_catalog and catalog is None:
        raise ValueError("this target needs the GPU catalog")
    by_id = {g.id: g for g in catalog or []}
    if w.gpu_types != AUTO:
        names = [t for t in w.gpu_types if t not in done]
        known = [by_id[t] for t in names if t in by_id]
        if w.data_center_ids == AUTO and not any(g.stock_dcs() for g in known):
            raise NotInStock(f"no data center has {_either(names)} in stock for data_center_ids = "
                             f'"auto" (gpu_count = {w.gpu_count})')
        order = _dc_order(known)
        return [Candidate(t, by_id[t].price_per_hour if t in by_id else None,
                          by_id[t].memory_gb if t in by_id else None,
                          _dcs_for(by_id.get(t), w, order)) for t in names]

    fits: list[GpuType] = []
    dropped: dict[str, int] = {}
    for gpu in catalog or []:
        if gpu.id in done:
            continue
        why = _why_not(gpu, w)
        if why is None:
            fits.append(gpu)
        else:
            dropped[why] = dropped.get(why, 0) + 1
    if not fits:
        seen = sum(dropped.values())
        detail = "; ".join(f"{dropped[k]} {text.format(count=w.gpu_count)}" for k, text in _REASONS.items()
                           if k in dropped)
        why = f": of {seen} types, {detail}" if seen else ": the catalog lists no GPU type"
        if done:
            why += f" ({len(done)} tried already)"
        raise NotInStock(f'no GPU type in stock on Runpod\'s Secure Cloud for gpu_types = "auto" '
                         f"({_limits(w)}){why}")
    fits.sort(key=rank_key)
    order = _dc_order(fits)
    return [Candidate(g.id, g.price_per_hour, g.memory_gb, _dcs_for(g, w, order)) for g in fits]


def _either(names: list[str]) -> str:
    if len(names) <= 1:
        return names[0] if names else "any listed type"
    return ", ".join(names[:-1]) + " or " + names[-1]


def for_listing(catalog: list[GpuType], *, min_vram_gb: float | None = None, max_price: float | None = None,
                in_stock: bool = False, data_center: str | None = None) -> list[GpuType]:
    """The rows of `pod gpus` (1 GPU): Secure types, cheapest first, no price last. With a
    data center, only types it lists (its own stock then decides `in_stock`)."""
    rows = []
    for gpu in catalog:
        if not gpu.secure:
            continue
        if min_vram_gb is not None and (gpu.memory_gb or 0) < min_vram_gb:
            continue
        if max_price is not None and (gpu.price_per_hour is None or gpu.price_per_hour > max_price):
            continue
        if data_center is not None:
            if not any(dc == data_center for dc, _ in gpu.data_centers):
                continue
            if in_stock and not gpu.stocked_in([data_center]):
                continue
        elif in_stock and not gpu.in_stock:
            continue
        rows.append(gpu)
    return sorted(rows, key=rank_key)
