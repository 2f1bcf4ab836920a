"""`overbrainer tui`: the full-screen terminal app, on Textual.

Only `cli/tui_cmd.py` imports this package (and Textual), so no other command pays for it at
start-up. The modules without Textual hold what the app shows and does, and are tested on their
own: `logbuf` (the log records captured for the Logs view), `tasks` (the work the app starts: a
flow on a thread of its own, on an `Embedded` front end publishing on the app's one bus), `work`
(which flows, called as the command line calls them), `live` (the bus's events folded into
progress), and the view models `project_model`, `dataset_model`, `runs_model`. The Textual side
is `app` and `views/`.
"""
