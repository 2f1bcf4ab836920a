"""The one dialog of the TUI: a question answered with `y` (or Enter) or `n` (or Escape)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class Confirm(ModalScreen[bool]):
    """`text`, then `y` confirms and `n` declines; dismissed with the answer."""

    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Vertical { width: 76; height: auto; border: thick $warning; background: $surface; padding: 1 2; }
    Confirm #keys { margin-top: 1; color: $text-muted; }
    """
    BINDINGS = [
        Binding("y,enter", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.text, markup=False, id="question")
            yield Static("y: yes   n: no", markup=False, id="keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
