"""Help that teaches: command lists with whole phrases, `did you mean` for a mistyped command, and
examples at the end of every command's `--help` (EXAMPLES below)."""

from __future__ import annotations

import difflib

import click

_CLOSE = 0.6  # difflib's ratio from which a name counts as a likely typo


class HelpGroup(click.Group):
    """A group whose command list shows each command's short help whole (its `short_help`, else
    its help's first sentence, wrapped but never cut with `...`), and which answers a mistyped
    command with the nearest one: `No such command 'trian'. Did you mean 'train'?` (exit 2)."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, short_help(cmd)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0] if args else ""
        if name and not name.startswith("-") and not ctx.resilient_parsing \
                and name not in self.list_commands(ctx) and self.get_command(ctx, name) is None:
            near = difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=_CLOSE)
            if near:
                ctx.fail(f"No such command '{name}'. Did you mean '{near[0]}'?")
        return super().resolve_command(ctx, args)


def short_help(cmd: click.Command) -> str:
    """The phrase a command list shows: `short_help`, else the help's first sentence, whole."""
    return cmd.get_short_help_str(limit=1 << 16)


def add_examples(cmd: click.Command, path: str) -> click.Command:
    """`cmd` (the command `overbrainer <path>`) and each of its sub-commands with their examples as
    the epilog of `--help`; a command with an epilog of its own keeps it."""
    if cmd.epilog is None:
        cmd.epilog = epilog(path)
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            add_examples(sub, f"{path} {name}".strip())
    return cmd


# The examples that end each command's `--help`: (what it does, the command line) pairs, by the
# command's path after `overbrainer` ("" is `overbrainer` itself). Every command has one or two
# (tests/unit/test_cli_help.py walks the command tree); each line runs as written in a project.
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
    "gate": (("check the new answers against [gate] and roles.grader, spending at most $2",
              "overbrainer gate --max-cost 2"),),
    "split": (("rewrite data/train.jsonl and data/eval.jsonl", "overbrainer split"),),
    "run": (("what a run would send, train and cost, sending nothing", "overbrainer run --plan"),
            ("every stage, then train only when the data or [training] changed", "overbrainer -C /srv/distil run"),
            ("train again on the same data on purpose", "overbrainer run --retrain"),
            ("batch mode: wait for the batches instead of collecting them on the next run",
             "overbrainer run --wait")),
    "batches": (("batch mode's submissions and their status", "overbrainer batches ls"),),
    "batches ls": (("batch mode's submissions and their status", "overbrainer batches ls"),
                   ("the same as JSON", "overbrainer --json batches ls")),
    "batches cancel": (("cancel every open batch (its other questions are sent again by the next run)",
                        "overbrainer batches cancel --all"),),
    "history": (("totals per stage", "overbrainer history"),
                ("one line per stage execution, as JSON", "overbrainer --json history --all")),
    "dataset": (("per-topic counts, tokens and cost", "overbrainer dataset stats"),),
    "dataset stats": (("per-topic counts, tokens and cost", "overbrainer dataset stats"),),
    "dataset gated": (("the answers the gate dropped and why", "overbrainer dataset gated"),
                      ("one topic's, as JSON", "overbrainer --json dataset gated --topic ownership")),
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
    "eval": (("the newest run's child and its parent on the eval split, offline", "overbrainer eval --limit 50"),
             ("lm-eval's GSM8K on both, 100 problems each", "overbrainer eval --tasks gsm8k --limit 100"),
             ("a task of your own: a YAML and its JSONL", "overbrainer eval --tasks my_tasks/colours.yaml")),
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
