"""The Dataset view: the topic → subtopic → question tree (markers: [a] answered, [x] excluded,
[ ] not answered, [o] an answer whose question is gone), the selected question's answer and
reasoning beside it, and `x` to reject the selected subtopic, question or orphaned answer (the
same code as `overbrainer dataset reject ID`)."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static, Tree

from overbrainer.errors import OverbrainerError
from overbrainer.tui import dataset_model as model
from overbrainer.tui import work
from overbrainer.tui.tasks import DATASET
from overbrainer.tui.views import in_background, plain

HINT = ("arrows move, Enter opens a topic or subtopic (and `… more` the next page); the selected question's "
        "answer shows here; x rejects")


class DatasetView(Horizontal):
    DEFAULT_CSS = """
    DatasetView Tree { width: 1fr; }
    DatasetView VerticalScroll { width: 1fr; border-left: solid $primary; padding: 0 1; }
    """
    BINDINGS = [Binding("x", "reject", "Reject")]

    stale = True
    generation = 0  # the tree's build: a page read for an older one is dropped

    def compose(self) -> ComposeResult:
        yield Tree(plain("dataset"), id="tree")
        with VerticalScroll():
            yield Static("", id="item", markup=False)

    def refresh_view(self) -> None:
        if not self.stale:
            return
        self.stale = False
        self.generation += 1
        ws = self.app.workspace
        names = [t.name for t in ws.config.topics] if ws.config is not None else []
        in_background(self, lambda: model.topics(ws.project_dir, names), self.show)

    def show(self, topics) -> None:
        tree = self.query_one("#tree", Tree)
        tree.clear()
        tree.root.expand()
        detail = self.query_one("#item", Static)
        if isinstance(topics, Exception):
            detail.update(f"cannot read the data files: {topics}")
            return
        for topic in topics:
            tree.root.add(plain(topic.label()), data=topic, allow_expand=bool(topic.subtopics or topic.questions))
        detail.update(HINT if topics else "no topic yet: run the pipeline (3)")

    def focus_main(self) -> None:
        self.query_one("#tree", Tree).focus()

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        node = event.node
        if not node.children and isinstance(node.data, (model.TopicNode, model.SubtopicNode)):
            self._load(node, node.data, 0)

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        node = event.node
        if isinstance(node.data, model.More) and node.parent is not None:
            more = node.data
            node.set_label(plain("loading…"))
            node.data = None  # loaded once
            self._load(node.parent, more.parent, more.start, replacing=node)

    def _load(self, node, item, start: int, replacing=None) -> None:
        """Read `item`'s children from `start` (one page) off the app's thread, then add them to
        `node` (in place of the `More` node `replacing`), unless the tree was rebuilt meanwhile."""
        project_dir, generation = self.app.workspace.project_dir, self.generation
        if replacing is None:
            replacing = node.add_leaf(plain("loading…"))
        read = model.subtopics if isinstance(item, model.TopicNode) else model.questions

        def add(page) -> None:
            if generation != self.generation:
                return
            replacing.remove()
            if isinstance(page, Exception):
                self.query_one("#item", Static).update(f"cannot read the data files: {page}")
                return
            for child in page.items:
                if isinstance(child, model.SubtopicNode):
                    node.add(plain(child.label()), data=child, allow_expand=bool(child.questions or child.orphans))
                else:
                    node.add_leaf(plain(child.label()), data=child)
            if page.more is not None:
                node.add_leaf(plain(page.more.label()), data=page.more)

        in_background(self, lambda: read(project_dir, item, start), add)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        try:
            text = model.detail(self.app.workspace.project_dir, event.node.data)
        except OverbrainerError as e:  # the file changed under the tree: read it again
            text = f"{e}; the tree is read again"
            self.stale = True
            self.refresh_view()
        self.query_one("#item", Static).update(text)

    def selected(self) -> Any:
        node = self.query_one("#tree", Tree).cursor_node
        return node.data if node is not None else None

    def action_reject(self) -> None:
        found = model.rejectable(self.selected())
        if found is None:
            self.app.notify("select a subtopic, a question or an orphaned answer to reject", severity="warning")
            return
        item_id, what = found

        ws = self.app.workspace
        self.app.confirm(f"Reject {what}?\n\nIt is recorded in data/rejected.jsonl and never generated again; "
                         "run split to update train and eval.",
                         lambda: self.app.start_task(f"dataset reject {item_id}", DATASET, work.reject(ws, item_id)))
