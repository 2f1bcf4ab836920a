"""The Dataset view: the topic → subtopic → question tree (markers: [a] answered, [x] excluded,
[ ] not answered, [o] an answer whose question is gone), the selected question's answer and
reasoning beside it, and `x` to reject the selected subtopic, question or orphaned answer (the
same code as `overbrainer dataset reject ID`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static, Tree

from overbrainer.tui import dataset_model as model
from overbrainer.tui.tasks import DATASET
from overbrainer.tui.views import in_background, plain

if TYPE_CHECKING:  # pragma: no cover
    from textual import getters

    from overbrainer.tui.app import OverbrainerApp

HINT = "arrows move, Enter opens a topic or subtopic; the selected question's answer shows here; x rejects"


class DatasetView(Horizontal):
    if TYPE_CHECKING:  # a view lives in the OverbrainerApp (textual's typed `app`)
        app = getters.app(OverbrainerApp)

    DEFAULT_CSS = """
    DatasetView Tree { width: 1fr; }
    DatasetView VerticalScroll { width: 1fr; border-left: solid $primary; padding: 0 1; }
    """
    BINDINGS = [Binding("x", "reject", "Reject")]

    stale = True

    def compose(self) -> ComposeResult:
        yield Tree(plain("dataset"), id="tree")
        with VerticalScroll():
            yield Static("", id="item", markup=False)

    def refresh_view(self) -> None:
        if not self.stale:
            return
        self.stale = False
        ws = self.app.workspace
        names = [t.name for t in ws.config.topics] if ws.config is not None else []
        in_background(self, lambda: model.build(ws.project_dir, names), self.show)

    def show(self, topics) -> None:
        tree = self.query_one("#tree", Tree)
        tree.clear()
        tree.root.expand()
        detail = self.query_one("#item", Static)
        if isinstance(topics, Exception):
            detail.update(f"cannot read the data files: {topics}")
            return
        for topic in topics:
            tree.root.add(plain(topic.label()), data=topic, allow_expand=bool(topic.subtopics))
        detail.update(HINT if topics else "no topic yet: run the pipeline (3)")

    def focus_main(self) -> None:
        self.query_one("#tree", Tree).focus()

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        node = event.node
        if node.children:
            return
        item = node.data
        if isinstance(item, model.TopicNode):
            for s in item.subtopics:
                node.add(plain(s.label()), data=s, allow_expand=bool(s.questions or s.orphans))
        elif isinstance(item, model.SubtopicNode):
            for q in item.questions:
                node.add_leaf(plain(q.label()), data=q)
            for a in item.orphans:
                node.add_leaf(plain(f"{model.ORPHAN} {model.one_line(model.question_of(a))}"), data=a)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        self.query_one("#item", Static).update(model.detail(event.node.data))

    def selected(self) -> Any:
        node = self.query_one("#tree", Tree).cursor_node
        return node.data if node is not None else None

    def action_reject(self) -> None:
        found = model.rejectable(self.selected())
        if found is None:
            self.app.notify("select a subtopic, a question or an orphaned answer to reject", severity="warning")
            return
        item_id, what = found
        from overbrainer.tui import work

        ws = self.app.workspace
        self.app.confirm(f"Reject {what}?\n\nIt is recorded in data/rejected.jsonl and never generated again; "
                         "run split to update train and eval.",
                         lambda: self.app.start_task(f"dataset reject {item_id}", DATASET, work.reject(ws, item_id)))
