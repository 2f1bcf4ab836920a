"""The training domain: the Axolotl config (axolotl_config), the job chain and env (job), the
metrics plugin shipped to every run (plugin/overbrainer_metrics.py), reading its lines (metrics)
and the resume check (resume)."""
