"""The job layer, under the flows: a job of any kind on a target (the target lease, start, follow,
retrieve, side jobs, run records and IDs). It knows no job kind: training (runs/), export/ and
compare/ plug into it."""
