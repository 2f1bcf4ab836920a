"""Prometheus metrics of a project (docs/metrics.md): `[metrics] listen` serves them over HTTP while
a locking command runs, `[metrics] textfile` writes them for node_exporter's textfile collector.

Imported by cli/ only when `[metrics]` is set (prometheus_client: the `metrics` extra):

- `tally`: the numbers (pure): seeded from history.jsonl, moved by the command's bus events;
- `families`: the tally (and the Runpod spend of `pods`) as prometheus_client metric families;
- `server`: the HTTP endpoint (`GET /metrics`, 404 elsewhere);
- `exporter`: one bus subscriber per bus the command's front end opens, the textfile, the server.
"""
