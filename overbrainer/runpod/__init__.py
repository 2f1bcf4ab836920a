"""The Runpod target: a GPU pod per run, created through Runpod's REST API v2 and deleted once
the results are home. `api` is the API client (typed results in `objects`, failures in
`errors`); provisioning, the pod record and the scripts run on the pod build on it."""
