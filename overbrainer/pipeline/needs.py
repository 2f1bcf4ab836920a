"""What the LLM stages still have to ask, read from the data files without sending anything: the
requests, the items they are for, the size of their prompts. `--plan` prices it
(pipeline/plan.py), and a command under a spend cap learns from it which roles will send.

A stage whose input an earlier stage of the same command has not generated yet (questions of
subtopics still to come, answers of questions still to come) counts from the configured numbers
(`subtopics`, `questions_per_subtopic`, `question_batch_size`): such a count is `estimated`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from overbrainer.config.model import Topic
from overbrainer.dataset import state as dataset_state
from overbrainer.dataset.figures import Figures
from overbrainer.pipeline.ask_list import items_per_request, request_counts
from overbrainer.pipeline.context import StageContext
from overbrainer.pipeline.gate import TEMPLATE, to_grade
from overbrainer.pipeline.held import Held, fills
from overbrainer.pipeline.subtopics import EXISTING_BYTES, EXISTING_NAMES

ROLES = {"subtopics": "generator", "questions": "generator", "answers": "parent", "gate": "grader"}
# A question's size in bytes when the project has none to measure yet.
QUESTION_BYTES = 100
# An answer's size in bytes when it is still to come: a typical 1,000 tokens (pipeline/plan.py).
ANSWER_BYTES = 4000


@dataclass
class Need:
    """`requests` still to send for `items` items (topics, subtopics, questions), their prompts'
    bytes in all, and for the list stages the items their answers should hold."""

    stage: str
    requests: int = 0
    items: int = 0
    prompt_bytes: int = 0
    list_items: int = 0
    estimated: bool = False
    held: int = 0  # items held back: their last round added nothing (pipeline/held.py)

    @property
    def role(self) -> str:
        return ROLES[self.stage]


@dataclass
class _Coming:
    """What the earlier stages of the command will add, per topic (configured counts)."""

    subtopics: dict[str, int] = field(default_factory=dict)
    questions: dict[str, int] = field(default_factory=dict)
    answers: int = 0


def needs(ctx: StageContext, stages: list[str], topics: list[Topic], *, force: bool = False,
          retry_excluded: bool = False, figures: Figures | None = None) -> list[Need]:
    """The needs of `stages` (in order; `split` has none) for `topics`, each counting what the
    stages before it in the list will add. `force`: as if the selected topics' output of each
    stage were gone. Computed from the dataset's figures (dataset/state.py: the saved ones, or
    one streaming pass), in closed form: the time does not grow with the configured counts."""
    if figures is None:
        figures = dataset_state.current(ctx.paths)
    coming = _Coming()
    forced = {t.name for t in topics} if force else set()
    out = []
    for stage in stages:
        if stage == "subtopics":
            out.append(_subtopics(ctx, figures, topics, forced, coming))
        elif stage == "questions":
            out.append(_questions(ctx, figures, topics, forced, coming))
        elif stage == "answers":
            out.append(_answers(ctx, figures, topics, forced, retry_excluded, coming))
        elif stage == "gate" and ctx.config.roles.grader is not None:
            out.append(_gate(ctx, figures, topics, coming))
    return out


def _subtopics(ctx: StageContext, figures: Figures, topics: list[Topic], forced: set[str], coming: _Coming) -> Need:
    """A topic missing subtopics asks for them in requests of at most `items_per_request` names
    (pipeline/ask_list.request_counts): all of that size but the last. A topic held back
    (its last round added nothing) asks nothing. Each prompt lists the names so far, counted
    at their mean size up to the prompt's bound (subtopics.EXISTING_NAMES, EXISTING_BYTES)."""
    need = Need("subtopics")
    per = items_per_request(ctx.role("generator").max_tokens)
    held = Held(ctx, "subtopics", bool(forced))
    templates = None
    for t in topics:
        f = figures.get(t.name)
        have = 0 if t.name in forced else f.subtopics
        missing = t.subtopics - have
        if missing <= 0:
            continue
        if held.stall(t) is not None:
            need.held += 1
            continue
        templates = templates or ctx.templates("subtopics.txt")
        name_bytes = _mean(f.subtopic_bytes, f.subtopics, 30) + 3
        counts = request_counts(missing, per)
        for count, k in Counter(counts).items():
            prompt = templates.render("subtopics.txt", topic=t.name, description=t.description, count=count,
                                      existing=[])
            need.prompt_bytes += k * len(prompt.encode())
            need.requests += k
        need.prompt_bytes += name_bytes * _listed(have, per, len(counts),
                                                  min(EXISTING_NAMES, EXISTING_BYTES // name_bytes))
        need.items += 1
        need.list_items += missing
        coming.subtopics[t.name] = missing
    return need


def _questions(ctx: StageContext, figures: Figures, topics: list[Topic], forced: set[str], coming: _Coming) -> Need:
    stored = [f for name, f in figures.topics.items() if name not in forced]
    size = _mean(sum(f.question_bytes for f in stored), sum(f.questions for f in stored), QUESTION_BYTES) + 3
    batch = max(1, min(ctx.pipeline.question_batch_size, items_per_request(ctx.role("generator").max_tokens)))
    need = Need("questions")
    held = Held(ctx, "questions", bool(forced))
    templates = None
    for t in topics:
        f = figures.get(t.name)
        fill = {0: f.subtopics} if t.name in forced else dict(f.fill)
        for have, k in fills(held.of_topic(t)).items():  # subtopics held back ask nothing
            if have < t.questions_per_subtopic and fill.get(have, 0) > 0:
                need.held += min(k, fill[have])
                fill[have] -= min(k, fill[have])
        extra = coming.subtopics.get(t.name, 0)
        if extra:
            fill[0] = fill.get(0, 0) + extra
            need.estimated = True
        bases: dict[int, int] = {}
        for have, k in fill.items():
            missing = t.questions_per_subtopic - have
            if missing <= 0 or k <= 0:
                continue
            count = min(batch, missing)
            if count not in bases:
                templates = templates or ctx.templates("questions.txt")
                bases[count] = len(templates.render("questions.txt", topic=t.name, description=t.description,
                                                    subtopic="", count=count, accepted=[]).encode())
            n = -(-missing // batch)  # batches of one subtopic; each prompt lists the questions so far
            listed = _listed(have, batch, n, min(EXISTING_NAMES, EXISTING_BYTES // size))  # up to the bound
            need.prompt_bytes += k * (n * bases[count] + size * listed)
            need.requests += k * n
            need.items += k
            need.list_items += k * missing
            coming.questions[t.name] = coming.questions.get(t.name, 0) + k * missing
    return need


def _answers(ctx: StageContext, figures: Figures, topics: list[Topic], forced: set[str], retry_excluded: bool,
             coming: _Coming) -> Need:
    names = [t.name for t in topics]
    need = Need("answers", estimated=any(coming.questions.get(n) for n in names))
    pending: dict[str, tuple[int, int]] = {}
    for name in names:
        f = figures.get(name)
        if name in forced:
            pending[name] = (f.distinct, f.distinct_bytes)
        elif retry_excluded:
            pending[name] = (f.retry, f.retry_bytes)
        else:
            pending[name] = (f.unanswered, f.unanswered_bytes)
    if not any(n for n, _ in pending.values()) and not need.estimated:
        return need
    templates = ctx.templates("answer_system.txt")
    systems = {t.name: len(templates.render("answer_system.txt", topic=t.name, description=t.description).encode())
               for t in topics}
    selected = [figures.get(n) for n in names]
    size = _mean(sum(f.question_bytes for f in selected), sum(f.questions for f in selected), QUESTION_BYTES)
    need.requests = need.items = sum(n for n, _ in pending.values()) + sum(coming.questions.get(n, 0) for n in names)
    need.prompt_bytes = sum(systems[n] * count + size_ for n, (count, size_) in pending.items())
    need.prompt_bytes += sum((systems[n] + size) * coming.questions.get(n, 0) for n in names)
    coming.answers = need.requests
    return need


def _gate(ctx: StageContext, figures: Figures, topics: list[Topic], coming: _Coming) -> Need:
    """The grader's requests: one per answer it has not graded (pipeline/gate.to_grade), and one
    per answer the command's answers stage will add (estimated, at a typical size): at most, as
    the rule checks of [gate] and the answers stage's exclusions may keep some from it."""
    count, size = to_grade(ctx, {t.name for t in topics})
    need = Need("gate", estimated=bool(coming.answers))
    need.requests = need.items = count + coming.answers
    if not need.requests:
        return need
    templates = ctx.templates(TEMPLATE)
    base = max(len(templates.render(TEMPLATE, topic=t.name, subtopic="", question="", answer="").encode())
               for t in topics)
    selected = [figures.get(t.name) for t in topics]
    question = _mean(sum(f.question_bytes for f in selected), sum(f.questions for f in selected), QUESTION_BYTES)
    subtopic = _mean(sum(f.subtopic_bytes for f in selected), sum(f.subtopics for f in selected), 30)
    need.prompt_bytes = ((base + subtopic) * need.requests + size
                         + coming.answers * (question + ANSWER_BYTES))
    return need


def _listed(have: int, per: int, n: int, cap: int) -> int:
    """The names the `n` requests of a topic list in all: request i lists min(cap, have + i·per)
    (every request but the last adds `per`), in closed form."""
    m = min(n, max(0, -(-(cap - have) // per)))  # requests listing fewer than `cap`
    return m * have + per * m * (m - 1) // 2 + (n - m) * cap


def _mean(total: int, count: int, default: int) -> int:
    return total // count if count else default
