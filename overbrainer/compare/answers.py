"""The answers of a compare: the child's, in `child_answers.jsonl`, and the reasoning strip
applied to both answers (the child's and the parent's) before they are judged or reported.

`child_answers.jsonl`: one JSON line per question, written by the job that serves the child on the
run's target (llama-server, questions asked serially, streamed) and read here by the judge and the
statistics.

A line is either an answer

    {"id": "...", "answer": "<content deltas only>", "finish": "stop|length|…",
     "input_tokens": 12, "output_tokens": 80, "seconds": 1.9,
     "first_token_seconds": 0.21, "tokens_per_second": 47.3}

(`first_token_seconds`: until the first delta with content or reasoning; `tokens_per_second` =
output tokens / (seconds − first_token_seconds); numbers may be null when unknown), or a failed
request `{"id": "...", "error": "<one line>"}`. A later line for the same ID wins.

The reasoning strip (`strip_reasoning`): every `<think>…</think>` block is removed. An unclosed
`<think>` drops the rest of the text; a `</think>` with no opening tag drops everything before it
(the chat template opened the block in the prompt). The doubled space left where two pieces join
is collapsed to one, indentation is kept, and the result is trimmed.
"""

from __future__ import annotations

from pathlib import Path

from overbrainer.dataset.jsonl import json_lines
from overbrainer.errors import OverbrainerError

ANSWERS = "child_answers.jsonl"
NUMBERS = ("input_tokens", "output_tokens", "seconds", "first_token_seconds", "tokens_per_second")
OPEN, CLOSE = "<think>", "</think>"


def _check(path: Path, lineno: int, doc) -> dict:
    def bad(why: str) -> OverbrainerError:
        return OverbrainerError(f"{path}:{lineno}: invalid answer: {why}")

    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str) or not doc["id"]:
        raise bad("`id` must be a non-empty string")
    if doc.get("error") is not None:
        if not isinstance(doc["error"], str):
            raise bad("`error` must be a string")
        return {"id": doc["id"], "error": doc["error"]}
    if not isinstance(doc.get("answer"), str):
        raise bad("`answer` must be a string (or the line needs an `error`)")
    for key in NUMBERS:
        value = doc.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise bad(f"`{key}` must be a number or null")
    finish = doc.get("finish")
    if finish is not None and not isinstance(finish, str):
        raise bad("`finish` must be a string or null")
    return {"id": doc["id"], "answer": doc["answer"], "finish": finish, **{k: doc.get(k) for k in NUMBERS}}


def read_answers(compare_dir: Path) -> dict[str, dict] | None:
    """The answers by question ID, or None when the file does not exist."""
    path = Path(compare_dir) / ANSWERS
    if not path.is_file():
        return None
    return {a["id"]: a for a in (_check(path, n, doc) for n, doc in json_lines(path))}


def strip_reasoning(text: str | None) -> str:
    if not text:
        return ""
    first_close = text.find(CLOSE)
    first_open = text.find(OPEN)
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        text = text[first_close + len(CLOSE):]  # the block was opened by the prompt
    pieces: list[str] = []
    rest = text
    while True:
        start = rest.find(OPEN)
        if start == -1:
            pieces.append(rest)
            break
        pieces.append(rest[:start])
        end = rest.find(CLOSE, start + len(OPEN))
        if end == -1:
            break  # unclosed: the rest is reasoning
        rest = rest[end + len(CLOSE):]
    out = pieces[0]
    for piece in pieces[1:]:
        out = _join(out, piece)
    return out.strip()


def _join(left: str, right: str) -> str:
    """`left + right` with the doubled space at the seam collapsed (never touching a newline,
    so the indentation of the next line is kept)."""
    if left.endswith(" ") and right.startswith(" "):
        return left.rstrip(" ") + " " + right.lstrip(" ")
    return left + right
