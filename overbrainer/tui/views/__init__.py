"""The TUI's views (Textual widgets), one module each, and the confirmation dialog they share.

Every view has `refresh_view()`, called by the app when the view is shown and, for the live ones
(Pipeline, Training, Logs), on the app's tick while it is shown. Views read the app's state
(`app.workspace`, `app.tasks`, `app.live`, `app.logs`) and start work through `app.start_task`.
"""

from __future__ import annotations

from typing import Any, Callable

from rich.text import Text


def plain(value: object) -> Text:
    """A table cell or tree label shown as it is: what the files hold is never read as markup."""
    return Text(str(value))


def in_background(view: Any, compute: Callable[[], Any], apply: Callable[[Any], None]) -> None:
    """`compute()` on a thread of its own (reading big data files never holds the app up), then
    `apply(result)` on the app's thread; `apply` gets the exception instead when `compute` raised."""
    app = view.app

    def work() -> None:
        try:
            result = compute()
        except Exception as e:  # noqa: BLE001 - shown by `apply`
            result = e
        try:
            app.call_from_thread(apply, result)
        except RuntimeError:  # the app closed meanwhile
            pass

    view.run_worker(work, thread=True, exclusive=True, group="load")
