"""`compare.json` and `compare.md` in the compare directory, each written atomically.

Neither file holds a secret: the judge is named `provider/model` (the provider's name in
overbrainer.toml, never its URL or key).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overbrainer.compare.plan import question_text
from overbrainer.compare.stats import ERROR, LOSS, WIN
from overbrainer.compare.answers import strip_reasoning
from overbrainer.errors import OverbrainerError
from overbrainer.support.atomic import atomic_write_text
from overbrainer.support.record_file import RecordFile

COMPARE_JSON = RecordFile("compare report")
HARDWARE_JSON = RecordFile("hardware record")  # written by the job (compare_client.py)

EXAMPLES = 5
FEW = 100
CPU_BUILDS = ("ubuntu-x64", "ubuntu-arm64")


def build(setup: dict, answers: dict[str, dict], verdicts: list[dict], summary: dict, costs: dict, *,
          judge: str, judge_is_parent: bool, verdicts_file: str, hardware: dict | None,
          created: str) -> dict:
    """The content of compare.json: questions in eval order, those without a verdict left out."""
    by_id = {v["id"]: v for v in verdicts}
    questions = []
    for q in setup["questions"]:
        v = by_id.get(q["id"])
        if v is None:
            continue
        a = answers.get(q["id"]) or {"error": "no answer"}
        questions.append({
            "id": q["id"], "topic": q.get("topic"), "question": question_text(q),
            "child": strip_reasoning(a["answer"]) if a.get("error") is None else None,
            "parent": q.get("parent"), "verdict": v["verdict"], "reason": v.get("reason"),
            "seconds": a.get("seconds"), "first_token_seconds": a.get("first_token_seconds"),
            "tokens_per_second": a.get("tokens_per_second"), "error": a.get("error"),
        })
    return {
        "run": setup["run"], "compare": setup["compare"], "base_model": setup.get("base_model"),
        "quantize": setup.get("quantize"), "gguf_sha256": setup.get("gguf_sha256"),
        "llama_cpp": setup.get("llama_cpp"), "hardware": hardware, "judge": judge,
        "judge_is_parent": judge_is_parent, "verdicts_file": verdicts_file, "created": created,
        "seed": setup["seed"], "summary": summary, "costs": costs, "child_price_from_pod": False,
        "questions": questions,
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def hardware_line(hardware: dict | None) -> str:
    if not isinstance(hardware, dict):
        return "-"
    build = hardware.get("build") or "-"
    gpus = [g for g in hardware.get("gpus") or [] if isinstance(g, str)]
    if not gpus:
        return f"{hardware.get('cpu') or 'unknown CPU'}, CPU ({build})"
    counted: dict[str, int] = {}
    for g in gpus:
        counted[g] = counted.get(g, 0) + 1
    return " + ".join(f"{n} x {g}" for g, n in counted.items()) + f" ({build})"


def _one_line(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def _quote(text: str | None) -> str:
    lines = (text or "").splitlines() or [""]
    return "\n".join(f"> {line}".rstrip() for line in lines)


def _examples(title: str, rows: list[dict]) -> list[str]:
    if not rows:
        return []
    out = [f"## {title} (first {min(EXAMPLES, len(rows))} of {len(rows)})", ""]
    for r in rows[:EXAMPLES]:
        out += [f"### {r['id']}: {_one_line(r['question'])}", "", "Child:", ""]
        out.append(_quote(r["child"]) if r["error"] is None else f"> (no answer: {r['error']})")
        out += ["", "Parent:", "", _quote(r["parent"]), ""]
        out += [f"Judge: {r['reason'] or '-'}", ""]
    return out


def markdown(doc: dict) -> str:
    s, c = doc["summary"], doc["costs"]
    gguf = f"{doc.get('quantize') or '-'}, llama.cpp {doc.get('llama_cpp') or '-'}, " \
           f"SHA-256 {(doc.get('gguf_sha256') or '-')[:12]}"
    judge = doc["judge"] + (" (the parent)" if doc["judge_is_parent"] else "")
    interval = s.get("win_or_tie_interval")
    rate = _pct(s["win_or_tie"])
    if interval:
        rate += f" (95 % interval {_pct(interval[0])} to {_pct(interval[1])})"
    lines = [f"# Compare of run {doc['run']}", ""]
    if s["errors"]:
        lines += [f"**The child could not answer {s['errors']} of {s['questions']} questions** (counted as "
                  f"losses; see server.log).", ""]
    lines += [
        "| | |", "|---|---|",
        f"| Compare | {doc['compare']} |", f"| Base model | {doc.get('base_model') or '-'} |",
        f"| GGUF | {gguf} |", f"| Hardware | {hardware_line(doc.get('hardware'))} |",
        f"| Judge | {judge} |", f"| Questions | {s['questions']} |", f"| Date | {doc['created']} |", "",
        "## Summary", "", "| | |", "|---|---|",
        f"| Win or tie | {rate} |",
        f"| Wins / ties / losses | {s['wins']} / {s['ties']} / {s['losses'] + s['errors']} |",
    ]
    if s.get("both_orders"):
        lines.append(f"| Order flips (both orders judged; a flip counts as a tie) | "
                     f"{s['flips']} of {s['order_pairs']} ({_pct(s['flip_rate'])}) |")
    ratio = "-" if c.get("ratio") is None else f"{c['ratio'] * 100:.1f}%"
    tps = "-" if s["tokens_per_second"] is None else f"{s['tokens_per_second']:.1f}"
    lines += [
        f"| Unparsed verdicts (not counted) | {s['unparsed']} |",
        f"| Child errors (counted as losses) | {s['errors']} |",
        f"| Child answers cut at the token limit | {s['truncated']} |",
        f"| Latency p50 / p95 | {_secs(s['latency_p50'])} / {_secs(s['latency_p95'])} |",
        f"| Time to first token p50 | {_secs(s['first_token_p50'])} |",
        f"| Output tokens per second | {tps} |",
        f"| Parent cost per 1,000 requests | {_cost(c['parent_per_1k'])} |",
        f"| Child cost per 1,000 requests | {_cost(c['child_per_1k'], ' (upper bound)')} |",
        f"| Child cost / parent cost | {ratio} |", "",
    ]
    rows = doc["questions"]
    losses = [r for r in rows if r["verdict"] == ERROR] + [r for r in rows if r["verdict"] == LOSS]
    lines += _examples("Losses", losses) + _examples("Wins", [r for r in rows if r["verdict"] == WIN])
    lines += ["## Limits", ""] + [f"- {x}" for x in limits(doc)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _cost(value: float | None, suffix: str = "") -> str:
    return "not computed: set [compare] prices" if value is None else _usd(value) + suffix


def limits(doc: dict) -> list[str]:
    s = doc["summary"]
    out = []
    if doc["judge_is_parent"]:
        out.append("The judge is the parent, which may favour its own answers: set `roles.judge`, "
                   f"then `overbrainer compare --rejudge {doc['compare']}`.")
    if s["questions"] < FEW:
        out.append(f"Only {s['questions']} questions: read the rate with its interval.")
    out.append("The child answered one request at a time: its cost is an upper bound.")
    if doc.get("child_price_from_pod"):
        out.append("The child's price is the pod's hourly rate.")
    if s["truncated"]:
        out.append(f"Child answers cut at the token limit: {s['truncated']} (raise `[compare] max_tokens`).")
    build = (doc.get("hardware") or {}).get("build") if isinstance(doc.get("hardware"), dict) else None
    if build in CPU_BUILDS:
        out.append(f"The child ran on a CPU (build {build}): its speed is not a GPU's.")
    return out


def write(compare_dir: Path, doc: dict) -> tuple[Path, Path]:
    """Write compare.json then compare.md; returns their paths."""
    compare_dir = Path(compare_dir)
    json_path, md_path = compare_dir / "compare.json", compare_dir / "compare.md"
    COMPARE_JSON.write(json_path, doc)
    atomic_write_text(md_path, markdown(doc))
    return json_path, md_path


def read_hardware(compare_dir: Path) -> dict[str, Any] | None:
    try:
        return HARDWARE_JSON.read_if_any(Path(compare_dir) / "hardware.json")
    except OverbrainerError:
        return None
