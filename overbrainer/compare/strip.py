"""The reasoning strip applied to both answers before they are judged or reported.

Every `<think>…</think>` block is removed. An unclosed `<think>` drops the rest of the text; a
`</think>` with no opening tag drops everything before it (the chat template opened the block in
the prompt). The doubled space left where two pieces join is collapsed to one, indentation is
kept, and the result is trimmed.
"""

from __future__ import annotations

OPEN, CLOSE = "<think>", "</think>"


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
