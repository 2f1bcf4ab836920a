"""The judge: `[roles] judge`, else the parent, reads each question with the child's and the
parent's answers (both reasoning-stripped) and says which serves the asker better.

- Order: the child is answer A iff `xxh3_64_intdigest(<question id as UTF-8>, seed) & 1 == 1`,
  the seed being setup.json's (`[pipeline] seed`): about half each way, stable across rejudges.
  With both orders, each question is also asked with the other order; when the two verdicts
  disagree the question is a tie (FastChat's rule) and the disagreement counts as a flip.
- Prompt: the `judge.txt` template (`prompts/judge.txt` overrides the built-in) with `question`
  (the last user message), `answer_a`, `answer_b`; one user message, no system prompt.
- Parsing: the text from the first `{` to the last `}` as JSON; `verdict` (A, B or tie, any case)
  and an optional `reason`. An unparsable reply is asked once more (support/retry.py), then
  recorded `unparsed`. Each request goes through the stage's processor (pipeline/common.ask):
  the spend cap holds its upper bound.
- Verdicts file: `verdicts-<key>.jsonl` in the compare directory, key = 16 hex digits of XXH3-64
  of `provider \\x1f model \\x1f <template source>`, so another judge or prompt starts a new file.
  Lines `{id, verdict (win|tie|loss|unparsed|error), reason?, child_first}` are appended (one
  flushed line each) by the request processor's one writing thread (support/processor.py: a
  stop keeps the verdicts that already came back); a line already there for an
  (id, child_first) pair is never asked again, so an interrupted judge resumes where it stopped.
- A question whose child answer is missing or failed is `error` without asking the judge.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import xxhash

from overbrainer.compare.plan import question_text
from overbrainer.compare.stats import ERROR, LOSS, TIE, UNPARSED, WIN
from overbrainer.compare.answers import strip_reasoning
from overbrainer.dataset.jsonl import json_lines
from overbrainer.llm.types import ChatRequest
from overbrainer.pipeline.common import ask
from overbrainer.support import retry
from overbrainer.support.retry import Again, Policy
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

TEMPLATE = "judge.txt"
TRIES = 2  # an unparsable verdict is asked once more


def verdicts_key(provider: str, model: str, template_source: str) -> str:
    text = "\x1f".join((provider, model, template_source))
    return f"{xxhash.xxh3_64_intdigest(text.encode()):016x}"


def child_first(question_id: str, seed: int) -> bool:
    return xxhash.xxh3_64_intdigest(question_id.encode(), seed) & 1 == 1


def parse_verdict(text: str | None) -> tuple[str, str | None] | None:
    """("A" | "B" | "tie", reason or None), or None when the reply is not a verdict."""
    text = strip_reasoning(text)
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end <= start:
        return None
    try:
        doc = json.loads(text[start:end + 1])
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("verdict"), str):
        return None
    verdict = {"a": "A", "b": "B", "tie": "tie"}.get(doc["verdict"].strip().lower())
    if verdict is None:
        return None
    reason = doc.get("reason")
    reason = reason.strip() or None if isinstance(reason, str) else None
    return verdict, reason


def for_child(verdict: str, first: bool) -> str:
    """The judge's A/B/tie seen from the child: win, tie or loss."""
    if verdict == "tie":
        return TIE
    return WIN if (verdict == "A") == first else LOSS


def combine(one: dict | None, other: dict | None) -> tuple[dict | None, bool | None]:
    """One question's verdict from its two orders, and whether they flipped (None: not a pair).
    Disagreeing verdicts make a tie; an unparsed side leaves the other's verdict."""
    present = [v for v in (one, other) if v is not None]
    if not present:
        return None, None
    if len(present) == 1:
        return present[0], None
    a, b = present
    if a["verdict"] == ERROR or b["verdict"] == ERROR:
        return (a if a["verdict"] == ERROR else b), None
    parsed = [v for v in present if v["verdict"] != UNPARSED]
    if len(parsed) < 2:
        return (parsed[0] if parsed else a), None
    if a["verdict"] == b["verdict"]:
        return a, False
    reasons = " / ".join(r for r in (a.get("reason"), b.get("reason")) if r)
    return {"id": a["id"], "verdict": TIE, "reason": f"the two orders disagree: {reasons}".rstrip(": "),
            "child_first": a["child_first"]}, True


@dataclass(frozen=True)
class Task:
    id: str
    child_first: bool
    prompt: str


class _Asking:
    """One task's requests, and what their replies used and cost."""

    def __init__(self, client, task: Task, proc, spend, on_retry):
        self.client, self.task, self.proc, self.spend, self.on_retry = client, task, proc, spend, on_retry
        self.usage = Usage(0, 0)
        self.cost: float | None = None

    def attempt(self) -> dict:
        task = self.task
        request = ChatRequest(user=task.prompt, structured=True, schema="verdict")
        response, spent = ask(self.proc, self.client, request, self.on_retry)
        self.usage = self.usage + response.usage
        if spent.cost is not None:
            self.cost = (self.cost or 0.0) + spent.cost
        if self.spend is not None:
            self.spend(response.usage, spent.cost, spent.estimate, spent.billed)
        parsed = parse_verdict(response.content)
        if parsed is None:
            raise Again(f"judge: {task.id}: the verdict could not be read; asking again")
        line: dict[str, Any] = {"id": task.id, "verdict": for_child(parsed[0], task.child_first)}
        if parsed[1]:
            line["reason"] = parsed[1]
        line["child_first"] = task.child_first
        return line


def _unreadable(error: BaseException, _seconds: float) -> None:
    log.info("%s", error)


def read_verdicts(path: Path) -> dict[tuple[str, bool], dict]:
    out: dict[tuple[str, bool], dict] = {}
    for _, doc in json_lines(path, lenient=True):
        if isinstance(doc, dict) and isinstance(doc.get("id"), str) and isinstance(doc.get("child_first"), bool) \
                and doc.get("verdict") in (WIN, TIE, LOSS, UNPARSED, ERROR):
            out[(doc["id"], doc["child_first"])] = doc
    return out


class Judge:
    """Judges the questions of one compare with one client and template."""

    def __init__(self, client, templates, compare_dir: Path, setup: dict, answers: dict[str, dict], *,
                 both_orders: bool = False):
        self.client = client
        self.templates = templates
        self.setup = setup
        self.answers = answers
        self.both_orders = both_orders
        key = verdicts_key(client.provider_name, client.model, templates.source(TEMPLATE))
        self.path = Path(compare_dir) / f"verdicts-{key}.jsonl"
        self.seed = int(setup["seed"])

    @property
    def label(self) -> str:
        return f"{self.client.provider_name}/{self.client.model}"

    def orders(self, question_id: str) -> list[bool]:
        first = child_first(question_id, self.seed)
        return [first, not first] if self.both_orders else [first]

    def prompt(self, question: dict, answer: str, first: bool) -> str:
        child, parent = strip_reasoning(answer), strip_reasoning(question.get("parent"))
        a, b = (child, parent) if first else (parent, child)
        return self.templates.render(TEMPLATE, question=question_text(question), answer_a=a, answer_b=b)

    def pending(self, done: dict[tuple[str, bool], dict]) -> tuple[list[Task], list[dict]]:
        """(tasks for the judge, `error` lines to write without asking) for what the file lacks."""
        tasks: list[Task] = []
        errors: list[dict] = []
        for q in self.setup["questions"]:
            answer = self.answers.get(q["id"])
            for first in self.orders(q["id"]):
                if (q["id"], first) in done:
                    continue
                if answer is None or answer.get("error") is not None:
                    errors.append({"id": q["id"], "verdict": ERROR, "child_first": first})
                else:
                    tasks.append(Task(q["id"], first, self.prompt(q, answer["answer"], first)))
        return tasks, errors

    def ask(self, task: Task, proc, *, spend: Callable[..., None] | None = None,
            on_retry: Callable[[str], None] | None = None) -> tuple[dict, Usage, float | None]:
        """One verdict line (asked at most twice: support/retry.py), the usage of every reply and
        what they cost (the provider's bills where it reports them, else the listed-price
        estimate). Each request goes through the stage's processor `proc` (pipeline/common.ask:
        Interrupted once the judge is stopping, its upper bound held under the spend cap);
        `spend(usage, cost, estimate, billed)` after each reply."""
        asking = _Asking(self.client, task, proc, spend, on_retry)
        try:
            line = retry.retrying(Policy(TRIES), _unreadable)(asking.attempt)
        except Again:
            line = {"id": task.id, "verdict": UNPARSED, "child_first": task.child_first}
        return line, asking.usage, asking.cost

    def final(self, done: dict[tuple[str, bool], dict]) -> tuple[list[dict], int | None, int | None]:
        """The verdict of each question in setup order, plus (flips, pairs) with both orders."""
        out: list[dict] = []
        flips = pairs = 0
        for q in self.setup["questions"]:
            first = child_first(q["id"], self.seed)
            line = done.get((q["id"], first))
            if self.both_orders:
                line, flipped = combine(line, done.get((q["id"], not first)))
                if flipped is not None:
                    pairs += 1
                    flips += int(flipped)
            if line is not None:
                out.append(line)
        return out, (flips if self.both_orders else None), (pairs if self.both_orders else None)
