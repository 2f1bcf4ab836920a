"""`pod gpus`, `pod datacenters`, `pod volumes` (catalog listings: only the API key is needed)
and `pod ssh` (the ssh line of a run's pod)."""

from __future__ import annotations

from overbrainer.errors import OverbrainerError
from overbrainer.runpod import catalog
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.cost import format_rate
from overbrainer.runpod.keys import CONFIG, SSH_DIR, alias, ssh_line
from overbrainer.runpod.owners import Owners
from overbrainer.support.columns import table


def _report(session, header: list[str], rows: list[list[str]], data: dict, empty: str) -> None:
    session.report("\n".join(table([header] + rows)) if rows else empty, data)


def gpus_flow(session, config, *, count: int = 1, min_vram=None, max_price=None, in_stock: bool = False,
              data_center=None) -> None:
    with RunpodClient.from_config(config) as client:
        gpus = catalog.for_listing(client.gpu_types(count), min_vram_gb=min_vram, max_price=max_price,
                                   in_stock=in_stock, data_center=data_center)
    rows, data = [], []
    for g in gpus:
        stock = g.stock_at(data_center) if data_center else g.availability
        rate = g.price_per_hour * count if g.price_per_hour is not None else None
        rows.append([g.id, f"{g.memory_gb:g}" if g.memory_gb is not None else "-", format_rate(rate),
                     str(g.max_count), stock])
        data.append({"id": g.id, "memory_gb": g.memory_gb, "price_per_hour": rate,
                     "max_count": g.max_count, "stock": stock})
    _report(session, ["ID", "VRAM GB", "$/H", "MAX COUNT", "STOCK"], rows, {"gpus": data},
            "pod: no GPU type matches")


def datacenters_flow(session, config) -> None:
    with RunpodClient.from_config(config) as client:
        dcs = client.data_centers()
    rows = [[d.id, d.name or "-", d.region or "-", ", ".join(d.gpu_types_in_stock) or "-"] for d in dcs]
    data = [{"id": d.id, "name": d.name, "region": d.region, "gpu_types_in_stock": list(d.gpu_types_in_stock)}
            for d in dcs]
    _report(session, ["ID", "NAME", "REGION", "GPU TYPES IN STOCK"], rows, {"datacenters": data},
            "pod: no data center listed")


def volumes_flow(session, config) -> None:
    with RunpodClient.from_config(config) as client:
        vols = client.volumes()
    rows = [[v.id, v.name or "-", str(v.size_gb) if v.size_gb is not None else "-", v.data_center or "-"]
            for v in vols]
    data = [{"id": v.id, "name": v.name, "size_gb": v.size_gb, "data_center": v.data_center} for v in vols]
    _report(session, ["ID", "NAME", "SIZE GB", "DATA CENTER"], rows, {"volumes": data},
            "pod: no network volume on this account")


def ssh_argv(owners: Owners, run_id: str) -> tuple[list[str], str]:
    """The argv and the printed line of `ssh -F runs/<id>/ssh/config overbrainer-<id>` (a side
    job's ssh/ is in its own directory)."""
    home = owners.find(run_id)
    folder = home.dir if home is not None else owners.run(run_id).dir
    shown = home.shown(owners.project_dir) if home is not None else f"runs/{run_id}"
    config = folder / SSH_DIR / CONFIG
    if not config.is_file():
        raise OverbrainerError(f"{shown}/{SSH_DIR}/{CONFIG} does not exist: {run_id} has no pod to log in to")
    side = home is not None and home.side
    return ["ssh", "-F", str(config), alias(run_id)], ssh_line(run_id, shown if side else None)
