"""The Runpod target: a GPU pod per run, created through Runpod's REST API v2 and deleted once
the results are home. `api` is the API client (typed results in `objects`, failures in `errors`);
`record` is `runs/<id>/pod.json`, `catalog` the GPU pick, `keys` the run's SSH keys and config,
`cost` rates and spend."""
