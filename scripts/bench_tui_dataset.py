#!/usr/bin/env python3
"""Benchmark the TUI's Dataset view: the memory it takes to show a question, at two sizes.

Topics of 50 subtopics of 10 questions, every question answered (~1.5 KB of answer and reasoning),
are written for `--size` answers and for `--factor` times as many: a dataset grows by topics,
each one's shape bounded by its configured counts (the view holds one topic's subtopic IDs and
one page of its children, never the records). For each size, in a fresh child
process, tracemalloc's peak while the view's model reads what it shows first (the topics, the
first topic's first page of subtopics, the first subtopic's questions, and that question's
answer), for this tree and for the model of git revision --baseline (which read every record).

Target (exit 1 when missed): this tree's peak at the larger size is at most 1.5x its peak at the
smaller one (flat in the dataset's size; the baseline's grows with it).

    python3 scripts/bench_tui_dataset.py [--size 5000] [--factor 4] [--baseline REV | --baseline '']
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "0f437e4"  # the model that built the whole tree with every answer in memory
PATH = "overbrainer/tui/dataset_model.py"
MAX_RATIO = 1.5

CHILD = r"""
import json, sys, tracemalloc, types
root, project, source = sys.argv[1:4]
sys.path.insert(0, root)
model = sys.modules["model"] = types.ModuleType("model")
exec(compile(open(source).read(), source, "exec"), model.__dict__)
tracemalloc.start()
if hasattr(model, "build"):  # the baseline: the whole tree at once
    topic = model.build(project)[0]
    shown = model.detail(topic.subtopics[0].questions[0])
else:
    topic = model.topics(project)[0]
    sub = model.subtopics(project, topic).items[0]
    shown = model.detail(project, model.questions(project, sub).items[0])
assert "── answer ──" in shown
print(json.dumps({"peak": tracemalloc.get_traced_memory()[1]}))
"""


def write(project: Path, answers: int) -> None:
    data = project / "data"
    data.mkdir(parents=True)
    body = "The cache and the index decide how the queue behaves under load. " * 16
    thinking = "The user asks about the queue; I should relate it to the cache. " * 6
    with open(data / "subtopics.jsonl", "w") as s, open(data / "questions.jsonl", "w") as q, \
            open(data / "answers.jsonl", "w") as a:
        for i in range(answers):
            sub, topic = f"{i // 10:032x}", f"t{i // 500}"
            qid = f"{i + 1 << 64:032x}"
            if i % 10 == 0:
                s.write(json.dumps({"id": sub, "topic": topic, "name": f"Subtopic {i // 10}"}) + "\n")
            text = f"How does question {i} relate to the cache?"
            q.write(json.dumps({"id": qid, "topic": topic, "subtopic_id": sub, "subtopic": f"Subtopic {i // 10}",
                                "text": text}) + "\n")
            a.write(json.dumps({"id": qid, "topic": topic, "subtopic": f"Subtopic {i // 10}", "messages": [
                {"role": "user", "content": text},
                {"role": "assistant", "content": body, "reasoning_content": thinking}],
                "meta": {"model": "m", "input_tokens": 10, "output_tokens": 400, "finish_reason": "stop",
                         "reasoning_kind": "raw", "excluded": None}}) + "\n")


def peak(project: Path, source: Path) -> int:
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(project), str(source)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{source}: {out.stderr.strip()}")
    return json.loads(out.stdout)["peak"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=5000)
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--baseline", default=BASELINE)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sources = {"this tree": ROOT / PATH}
        if args.baseline:
            old = Path(tmp) / "baseline_model.py"
            old.write_text(subprocess.run(["git", "-C", str(ROOT), "show", f"{args.baseline}:{PATH}"], check=True,
                                          capture_output=True, text=True).stdout)
            sources[f"baseline {args.baseline}"] = old
        sizes = [args.size, args.size * args.factor]
        for n in sizes:
            write(Path(tmp) / str(n), n)
        ok = True
        for name, source in sources.items():
            small, large = (peak(Path(tmp) / str(n), source) for n in sizes)
            ratio = large / small
            print(f"{name}: peak {small / 1e6:.1f} MB at {sizes[0]} answers, {large / 1e6:.1f} MB at {sizes[1]}: "
                  f"{ratio:.2f}x")
            if name == "this tree" and ratio > MAX_RATIO:
                print(f"  target missed: more than {MAX_RATIO}x")
                ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
