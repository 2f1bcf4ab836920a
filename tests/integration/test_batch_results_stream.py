"""A batch's results are read a line at a time, never whole in memory: a results file of ~24 MB,
served by the fake Message Batches API in a process of its own (its memory is not measured),
goes through the real client (llm/client.py, llm/http.py) to disk and is parsed line by line,
every answer read by the online parser, while Python's allocations stay a small fraction of the
file. Reading the same file as one body (how it was read before) costs at least its size: the
measure tells the two apart."""

from __future__ import annotations

import tracemalloc

import pytest

from tests.fixtures.batch_big import reach, setup
from tests.fixtures.provider_process import ProviderProcess

LINES = 12_000


@pytest.fixture
def server():
    s = ProviderProcess(setup=setup(LINES))
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
    api, sub, status = reach(server.url, tmp_path / "p", LINES)
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
