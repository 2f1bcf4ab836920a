"""Reasoning extraction: `reasoning` / `reasoning_content` fields,
typed `reasoning_details[]`, inline `<think>` blocks, and Anthropic thinking blocks."""

from __future__ import annotations

from typing import Any

from overbrainer.llm.types import NONE, RAW, REDACTED, SUMMARY


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def from_details(details: Any) -> tuple[str | None, str | None]:
    """(text, kind) implied by an OpenRouter `reasoning_details` array; kind None when nothing
    known is in it."""
    if not isinstance(details, list):
        return None, None
    raw: list[str] = []
    summaries: list[str] = []
    known = False
    for entry in details:
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        if kind == "reasoning.text":
            known = True
            if _text(entry.get("text")):
                raw.append(entry["text"])
        elif kind == "reasoning.summary":
            known = True
            if _text(entry.get("summary")):
                summaries.append(entry["summary"])
        elif kind == "reasoning.encrypted":
            known = True
    if raw:
        return "\n".join(raw), RAW
    if summaries:
        return "\n".join(summaries), SUMMARY
    if known:
        return None, REDACTED
    return None, None


def split_think(content: str) -> tuple[str, str | None, str]:
    """(content, reasoning, kind) for content that may open with a `<think>…</think>` block."""
    end = content.find("</think>")
    if end < 0:
        return content, None, NONE
    thought = content[:end].strip()
    if thought.startswith("<think>"):
        thought = thought[len("<think>"):].strip()
    rest = content[end + len("</think>"):].strip()
    if not thought:
        return rest, None, NONE
    return rest, thought, RAW


def from_openai_message(message: dict, content: str) -> tuple[str, str | None, str]:
    """(content, reasoning, kind) from an OpenAI-compatible `choices[0].message`."""
    text = _text(message.get("reasoning")) or _text(message.get("reasoning_content"))
    detail_text, detail_kind = from_details(message.get("reasoning_details"))
    if text is not None:
        return content, text, detail_kind or RAW
    if detail_kind is not None:
        return content, detail_text, detail_kind
    return split_think(content)


def from_anthropic_blocks(blocks: Any) -> tuple[str, str | None, str]:
    """(content, reasoning, kind) from a Messages API `content[]`. Anthropic never shows raw
    thoughts: non-empty thinking is a `summary`; empty or redacted thinking is `redacted`."""
    texts: list[str] = []
    thoughts: list[str] = []
    redacted = False
    for block in blocks if isinstance(blocks, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking":
            if _text(block.get("thinking")):
                thoughts.append(block["thinking"])
            else:
                redacted = True
        elif kind == "redacted_thinking":
            redacted = True
    content = "".join(texts)
    if thoughts:
        return content, "\n".join(thoughts), SUMMARY
    if redacted:
        return content, None, REDACTED
    return content, None, NONE
