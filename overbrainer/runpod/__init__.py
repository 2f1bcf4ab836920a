"""Everything Runpod: a GPU pod per training run or side job, created through Runpod's REST API v2
and deleted once its results are home (docs/pods.md).

- The API: `api` (the client), `transport` (HTTP and retries), `objects` (typed answers),
  `errors` (how the API and provisioning fail); `catalog` (which GPU types to ask for), `cost`
  (rates, spend, the cost cap).
- A pod: `pod_record` (`pod.json`), `pod_spec` (what it is created with: the body, the bootstrap
  and watchdog of `scripts/`, its env), `keys` (its SSH keys), `provision` (from nothing to a
  ready pod), `gone` (whether it is gone: looks only), `remove` (deleting it), `waits` (how long
  for what).
- For the job layer: `target` (the `runpod` target kind) and `records` (its read-only face), the
  two modules jobs/ imports; `lease` (a run's or side job's pod and its job's steps), `owners`
  (the runs and side jobs jobs/ hands in), `ledger` (whose each pod is, what the pods cost),
  `side_pods` (a side job's pod settings).
- For the command line: `commands` (the `pod` commands' flows).

A new use of Runpod lands here beside these: another target kind (an Instant Cluster of several
pods for one job: a kind in `target`, its lease beside `lease`), or a pod serving a parent model
(built on `provision` and `remove`, with its own record and watchdog), without jobs/ or the flows
learning what a pod is.
"""
