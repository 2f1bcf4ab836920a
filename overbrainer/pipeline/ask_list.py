"""List requests: ask the generator for a JSON list of strings.

Structured output first, dropped when the provider refuses it (a 400/422 naming response_format,
or an answer that is not JSON at all), a token limit doubled up to 4× when the list was cut short,
lenient parsing, and re-asks up to `max_retries` times (support/retry.py, on `Again`).

A list request never asks for more items than fit its token limit (`items_per_request`): the
stages split larger counts over several requests (subtopics.py, questions.py), and `--plan`
counts them the same way.
"""

from __future__ import annotations

import json
import logging
from typing import Callable

from overbrainer.config.model import DEFAULT_MAX_TOKENS
from overbrainer.llm.client import LlmClient
from overbrainer.llm.errors import LlmError
from overbrainer.llm.listparse import string_array
from overbrainer.llm.types import LENGTH, ChatRequest
from overbrainer.pipeline.common import ask
from overbrainer.support import retry
from overbrainer.support.processor import Processor
from overbrainer.support.retry import Again, Policy
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

CUT_SHORT = "the answer was cut short by the token limit; retrying with a higher limit"
NOT_A_LIST = "the answer is not a list of strings"
NO_LIST = "no list of strings after all retries"
# The limit a list needs at least: a provider that can afford no more than this (OpenRouter's
# 402 names the limit the balance covers) stops the stage rather than cut every list short.
LIST_NEEDS = 2048
# The tokens one list item may take in an answer: a subtopic name or a question (often 20-40
# tokens) with its JSON quoting and separator, and room to spare. A request asks for at most
# max_tokens // ITEM_TOKENS items.
ITEM_TOKENS = 64


def items_per_request(max_tokens: int | None) -> int:
    """The most items one list request may ask for under the role's `max_tokens` (None: the
    roles' default, config/model.DEFAULT_MAX_TOKENS): max(1, max_tokens // ITEM_TOKENS)."""
    limit = int(max_tokens or DEFAULT_MAX_TOKENS)
    return max(1, limit // ITEM_TOKENS)


def request_counts(missing: int, per_request: int) -> list[int]:
    """The counts of the list requests asking for `missing` items, at most `per_request` each: as
    many full requests as fit, then the rest (10 at 4 a request: 4, 4, 2)."""
    per_request = max(1, per_request)
    return [min(per_request, missing - k) for k in range(0, max(0, missing), per_request)]


Spent = Callable[[Usage, float | None, float | None, bool], None]  # llm.spend.Spend's fields


def ask_list(
    client: LlmClient,
    prompt: str,
    *,
    max_tokens: int,
    max_retries: int,
    spend: Spent,
    retrying: Callable[[str], None],
    proc: Processor,
    refused: Callable[[], None] | None = None,
) -> tuple[list[str], Usage, float | None]:
    """Return (items, usage of every attempt, cost or None). Raises LlmError: fatal, or an item
    error after the last attempt. Each attempt goes through the stage's processor `proc`
    (common.ask: it raises Interrupted once the stage is stopping, and holds the attempt's upper
    bound under the spend cap); `spend(usage, cost, estimate, billed)` (llm.spend.Spend's fields)
    after each attempt that got an answer; `retrying(message)` before each re-ask (and on HTTP
    retries); `refused()` before the item error of a prompt the provider's moderation flagged
    (it would be flagged again: StageRun.item_refused)."""
    asking = _Asking(client, prompt, max_tokens, spend, retrying, proc, refused)
    policy = Policy(max(0, int(max_retries)) + 1)  # re-asked on `Again` only
    try:
        items = retry.retrying(policy, lambda e, _seconds: retrying(str(e)))(asking.attempt)
    except Again:
        raise LlmError(f"invalid response: {NO_LIST}") from None
    return items, asking.usage, asking.cost


class _Asking:
    """One list request's attempts: the token limit (doubled when the list was cut short, up to
    4×), and the usage and cost of every attempt."""

    def __init__(self, client: LlmClient, prompt: str, max_tokens: int, spend: Spent,
                 retrying: Callable[[str], None], proc: Processor, refused: Callable[[], None] | None = None):
        self.client, self.prompt, self.max_tokens, self.proc = client, prompt, max_tokens, proc
        self.spend, self.retrying, self.refused = spend, retrying, refused
        self.limit, self.cap = max_tokens, max_tokens * 4
        self.usage = Usage()
        self.cost: float | None = None

    def attempt(self) -> list[str]:
        """The list, or Again (why) for another attempt; LlmError when none would help."""
        # The client sends a structured request once more without response_format when the
        # provider rejects it (and says so through `retrying`); its error is final here.
        request = ChatRequest(user=self.prompt, max_tokens=self.limit, structured=True,
                              min_tokens=min(self.max_tokens, LIST_NEEDS))
        response, spent = ask(self.proc, self.client, request, self.retrying)
        if response.flagged is not None:  # the same prompt would be flagged again
            if self.refused is not None:
                self.refused()
            raise LlmError(f"the provider's moderation flagged the prompt ({response.flagged})")
        self.usage = self.usage + response.usage
        if spent.cost is not None:
            self.cost = (self.cost or 0.0) + spent.cost
        self.spend(response.usage, spent.cost, spent.estimate, spent.billed)
        items = string_array(response.content or "")
        if items:
            return items
        if response.finish_reason != LENGTH and not _is_json(response.content or ""):
            self.client.drop_structured("the answer is not the asked-for JSON")
        if response.finish_reason == LENGTH and self.limit < self.cap:
            self.limit = min(self.limit * 2, self.cap)
            raise Again(CUT_SHORT)
        raise Again(NOT_A_LIST)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
