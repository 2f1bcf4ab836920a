"""compare_client.py (the script the compare job runs next to llama-server) reads llama-server's
streamed answers: the parts, the finish reason, tokens from usage or else from llama.cpp's
timings, the speed after the first token; an error in the stream or a refused request becomes
the question's one-line error."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import overbrainer.compare

SCRIPT = Path(overbrainer.compare.__file__).with_name("scripts") / "compare_client.py"
spec = importlib.util.spec_from_file_location("compare_client", SCRIPT)
client = importlib.util.module_from_spec(spec)
spec.loader.exec_module(client)


def events(*chunks) -> list[bytes]:
    lines = [b": keep-alive\n"]
    for c in chunks:
        lines += [b"data: " + json.dumps(c).encode() + b"\n", b"\n"]
    return lines + [b"data: [DONE]\n"]


def delta(content=None, reasoning=None, finish=None) -> dict:
    d = {k: v for k, v in (("content", content), ("reasoning_content", reasoning)) if v is not None}
    return {"choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


def test_parts_finish_and_usage_make_the_answer_line():
    stream = client.read_stream(events(delta(reasoning="hm"), delta("Par"), delta("is", finish="stop"),
                                       {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 4}}),
                                start=0.0)
    assert stream["parts"] == ["Par", "is"] and stream["finish"] == "stop" and stream["error"] is None
    assert stream["first"] is not None  # the reasoning token counts as the first
    stream["first"] = 1.0
    line = client.answer_line("q01", stream, seconds=3.0)
    assert line == {"id": "q01", "answer": "Paris", "finish": "stop", "input_tokens": 12, "output_tokens": 4,
                    "seconds": 3.0, "first_token_seconds": 1.0, "tokens_per_second": 2.0}


def test_tokens_come_from_timings_when_usage_is_missing_and_no_token_means_no_speed():
    stream = client.read_stream(events(delta(finish="length"), {"timings": {"prompt_n": 7, "predicted_n": 0}}),
                                start=0.0)
    line = client.answer_line("q02", stream, seconds=0.5)
    assert (line["answer"], line["finish"], line["input_tokens"], line["output_tokens"]) == ("", "length", 7, 0)
    assert line["first_token_seconds"] is None and line["tokens_per_second"] is None


def test_an_error_in_the_stream_is_one_line_and_stops_reading():
    stream = client.read_stream(events(delta("a"), {"error": {"code": 500, "message": "context\n  full"}},
                                       delta("never")), start=0.0)
    assert stream["error"] == "llama-server: context full" and stream["parts"] == ["a"]
    assert client.read_stream(events({"error": "plain text"}), 0.0)["error"] == "llama-server: plain text"


class Refused:
    def __init__(self, status: int, body: bytes):
        self.status, self._body = status, body

    def read(self, n: int) -> bytes:
        return self._body[:n]


def test_a_refused_request_gives_the_servers_message_or_its_body():
    body = json.dumps({"error": {"code": 400, "message": "unordered_map::at", "type": "invalid_request_error"}})
    assert client.http_error(Refused(400, body.encode())) == "HTTP 400 from llama-server: unordered_map::at"
    assert client.http_error(Refused(503, b"Loading   model\n")) == "HTTP 503 from llama-server: Loading model"
    assert client.http_error(Refused(500, b"x" * 5000)) == "HTTP 500 from llama-server: " + "x" * 300
