"""The examples that end each command's `--help`: (what it does, the command line) pairs, by the
command's path after `overbrainer` ("" is `overbrainer` itself). Every command has one or two
(tests/unit/test_cli_help.py walks the command tree); each line runs as written in a project."""

from __future__ import annotations

EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "": (("a first project: write it, check it, see what a run costs, run it",
          "overbrainer init demo && cd demo && overbrainer config check --probe && overbrainer run --plan"),
         ("from cron: grow the dataset, train when it changed (75: another run still holds it)",
          "overbrainer -C /srv/distil run")),
    "init": (("a new project in ./demo (never overwrites)", "overbrainer init demo"),),
    "config": (("the resolved configuration, secrets as ***", "overbrainer config check"),),
    "config check": (("what the project will use, secrets as ***", "overbrainer config check"),
                     ("prove keys, models and training targets work before paying for a run",
                      "overbrainer config check --resolve --probe")),
    "subtopics": (("what it would ask and cost, sending nothing", "overbrainer subtopics --plan"),
                  ("one topic, spending at most $0.50", "overbrainer subtopics --topic ownership --max-cost 0.5")),
    "questions": (("what it would ask and cost, sending nothing", "overbrainer questions --plan"),
                  ("one topic's questions again, from scratch", "overbrainer questions --topic ownership --force")),
    "answers": (("the questions still unanswered, spending at most $5", "overbrainer answers --max-cost 5"),
                ("ask again only the answers kept aside (cut, refused, empty)",
                 "overbrainer answers --retry-excluded")),
    "split": (("rewrite data/train.jsonl and data/eval.jsonl", "overbrainer split"),),
    "run": (("what a run would send, train and cost, sending nothing", "overbrainer run --plan"),
            ("every stage, then train only when the data or [training] changed", "overbrainer -C /srv/distil run"),
            ("train again on the same data on purpose", "overbrainer run --retrain")),
    "history": (("totals per stage", "overbrainer history"),
                ("one line per stage execution, as JSON", "overbrainer --json history --all")),
    "dataset": (("per-topic counts, tokens and cost", "overbrainer dataset stats"),),
    "dataset stats": (("per-topic counts, tokens and cost", "overbrainer dataset stats"),),
    "dataset reject": (("drop a question (and its answer) for good; IDs are in data/questions.jsonl",
                        "overbrainer dataset reject 9f86d081884c7d659a2feaa0c55ad015"),),
    "train": (("train on [training] target and follow it to the end", "overbrainer train"),
              ("start on another target, print the run ID and exit", "overbrainer --json train --target gpu --detach")),
    "train attach": (("follow a detached run and bring its results home",
                      "overbrainer train attach demo_20260922-143005"),),
    "train stop": (("save a snapshot and stop (resume with train --resume-from)",
                    "overbrainer train stop demo_20260922-143005"),),
    "train cancel": (("cancel a run's job", "overbrainer train cancel demo_20260922-143005"),),
    "runs": (("every run, oldest first", "overbrainer runs ls"),),
    "runs ls": (("every run, oldest first", "overbrainer runs ls"),
                ("the newest run's ID", "overbrainer --json runs ls | jq -r '.runs[-1].id'")),
    "runs show": (("one run's state, step, loss and time left", "overbrainer runs show demo_20260922-143005"),),
    "runs logs": (("follow a run's job log", "overbrainer runs logs demo_20260922-143005 --follow"),
                  ("its last 50 lines", "overbrainer runs logs demo_20260922-143005 --tail 50")),
    "runs rm": (("delete two ended runs' folders", "overbrainer runs rm demo_20260922-143005 demo_20260923-020000"),),
    "export": (("a run's model to Q4_K_M GGUF and an Ollama model",
                "overbrainer export demo_20260922-143005 --ollama demo"),
               ("export a Runpod-trained run on this machine instead of a new pod",
                "overbrainer export demo_20260922-143005 --target local")),
    "compare": (("the newest run's child against its parent on 50 eval questions", "overbrainer compare --limit 50"),
                ("fail (exit 1) when the child is clearly worse, for CI", "overbrainer compare --min-win-or-tie 0.4"),
                ("the child on this machine's CPU, whatever it trained on", "overbrainer compare --target local")),
    "push": (("see what would be pushed, sending nothing", "overbrainer push demo_20260922-143005 --dry-run"),
             ("push to a repo of your choice", "overbrainer push demo_20260922-143005 --repo me/demo-4b")),
    "pod": (("this project's pods and every overbrainer pod of the account", "overbrainer pod ls"),),
    "pod ls": (("this project's pods and every overbrainer pod of the account", "overbrainer pod ls"),),
    "pod rm": (("delete a run's pods and confirm each delete", "overbrainer pod rm demo_20260922-143005"),),
    "pod gpus": (("GPU types with 24 GB or more, in stock now, cheapest first",
                  "overbrainer pod gpus --min-vram 24 --in-stock"),),
    "pod datacenters": (("data centers and the GPU types in stock in each", "overbrainer pod datacenters"),),
    "pod volumes": (("the account's network volumes", "overbrainer pod volumes"),),
    "pod ssh": (("a shell on a run's pod", "overbrainer pod ssh demo_20260922-143005 --exec"),),
    "tui": (("watch and steer this project full-screen (q quits)", "overbrainer tui"),
            ("the same for a project elsewhere", "overbrainer -C /srv/distil tui")),
}


def epilog(path: str) -> str | None:
    """The `--help` epilog of `overbrainer <path>`: `Examples:`, then each as a shell comment and
    its command line (click keeps a paragraph that starts with \\b as written)."""
    examples = EXAMPLES.get(path)
    if not examples:
        return None
    lines = ["Examples:", "", "\b"]
    for what, line in examples:
        lines += [f"  # {what}", f"  {line}"]
    return "\n".join(lines)
