"""A batch's results are read a line at a time, never whole in memory: a results file of ~24 MB,
served by the fake Message Batches API in a process of its own (its memory is not measured),
goes through the real client (llm/client.py, llm/http.py) to disk and is parsed line by line,
every answer read by the online parser, while Python's allocations stay a small fraction of the
file. Reading the same file as one body (how it was read before) costs at least its size: the
measure tells the two apart."""

from __future__ import annotations

import tracemalloc

import pytest

from overbrainer.dataset.batch_journal import Submission
from overbrainer.llm.batch_anthropic import AnthropicBatches
from overbrainer.llm.batch_types import tag_of
from tests.fixtures.project import Project
from tests.fixtures.provider_process import ProviderProcess

LINES = 12_000
SUB_ID = "s20260101T000000-abcdef"
MODEL = "claude-sonnet-4-5"
# One ended batch of LINES succeeded requests of ~2 KB each (their outcomes set, not run).
SETUP = f"""
from tests.fixtures.batch_state import Item
msg = {{"id": "msg_1", "type": "message", "role": "assistant", "model": "{MODEL}",
       "content": [{{"type": "text", "text": "An answer. " * 180}}], "stop_reason": "end_turn",
       "stop_sequence": None, "usage": {{"input_tokens": 20, "output_tokens": 500}}}}
items = [Item("{tag_of(SUB_ID)}-%032x" % i, {{"model": "{MODEL}"}}, ("ok", 200, msg)) for i in range({LINES})]
fake.batches.finish(fake.batches.new("anthropic", items, {{}}, model="{MODEL}").id)
fake.record = False
"""


@pytest.fixture
def server():
    s = ProviderProcess(setup=SETUP)
    yield s
    s.close()


def _peak(fn):
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_results_are_read_a_line_at_a_time(server, tmp_path):
    project = Project(tmp_path / "p", server.url)
    project.write(protocol="anthropic", parent_model=MODEL, generator_model=MODEL)
    api = AnthropicBatches(project.context().client("parent"))
    (listed,) = api.client.call("GET", "/messages/batches")["data"]
    sub = Submission(id=SUB_ID, stage="answers", api="anthropic", provider="fake", model=MODEL, created_at=0.0,
                     items=["%032x" % i for i in range(LINES)], tag=tag_of(SUB_ID), batch_id=listed["id"])
    status = api.status(sub)
    assert status.ended

    whole, whole_peak = _peak(lambda: api.client.call("GET", f"/messages/batches/{sub.batch_id}/results",
                                                      decode=False))
    size = len(whole)
    del whole
    assert size > 20 * 2**20 and whole_peak >= size  # the control: a body read at once is all there

    def read():
        with api.results(sub, status) as results:
            ids = sum(1 for custom, _ in results.lines() if sub.item_of(custom) is not None)
            answers = sum(1 for o in results.outcomes() if o.response is not None and o.response.content)
        return ids, answers

    (ids, answers), peak = _peak(read)
    assert ids == answers == LINES
    assert peak < size / 10, f"peak {peak} bytes for a {size}-byte results file"
