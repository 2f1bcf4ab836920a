"""The TUI's views (Textual widgets), one module each, and the confirmation dialog they share.

Every view has `refresh_view()`, called by the app when the view is shown and, for the live ones
(Pipeline, Training, Logs), on the app's tick while it is shown. Views read the app's state
(`app.workspace`, `app.tasks`, `app.live`, `app.logs`) and start work through `app.start_task`.
"""

from __future__ import annotations

from rich.text import Text


def plain(value: object) -> Text:
    """A table cell or tree label shown as it is: what the files hold is never read as markup."""
    return Text(str(value))
