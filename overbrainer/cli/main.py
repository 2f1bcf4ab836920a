"""The `overbrainer` command: global options, lazy sub-commands, and the one place that turns
exceptions into `error: …` lines and exit codes."""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys

import click

from overbrainer import __version__
from overbrainer.cli.help import HelpGroup, add_examples, epilog
from overbrainer.errors import EXIT_FAILURE, EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED, OverbrainerError
from overbrainer.support import stop_signals
from overbrainer.support.redact import redact, strip_controls

# name -> (module, attribute, short help). Modules are imported only when their command runs,
# so `overbrainer --help` stays close to a bare interpreter's start-up time.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": ("overbrainer.cli.init_cmd", "init", "Create a project: overbrainer.toml, .env.example, prompts/."),
    "config": ("overbrainer.cli.config_cmd", "config", "Show and check the resolved configuration."),
    "subtopics": ("overbrainer.cli.stages", "subtopics", "Generate the subtopics of each topic."),
    "questions": ("overbrainer.cli.stages", "questions", "Generate questions for each subtopic."),
    "answers": ("overbrainer.cli.stages", "answers", "Ask the parent model to answer every question."),
    "gate": ("overbrainer.cli.stages", "gate", "Check every answer ([gate] rules, roles.grader) before split."),
    "split": ("overbrainer.cli.stages", "split", "Write data/train.jsonl and data/eval.jsonl."),
    "run": ("overbrainer.cli.stages", "run", "Run every stage in order, then train when [training] is set."),
    "history": ("overbrainer.cli.history_cmd", "history", "Show what each stage did and spent."),
    "batches": ("overbrainer.cli.batches_cmd", "batches", "Batch mode's submissions: list them, cancel them."),
    "dataset": ("overbrainer.cli.dataset_cmd", "dataset", "Inspect and prune the dataset."),
    "train": ("overbrainer.cli.train_cmd", "train", "Fine-tune the child model with Axolotl."),
    "runs": ("overbrainer.cli.runs_cmd", "runs", "List training runs, show one, read its log."),
    "export": ("overbrainer.cli.export_cmd", "export", "Turn a run's model into a GGUF file for llama.cpp and Ollama."),
    "compare": ("overbrainer.cli.compare_cmd", "compare", "Judge the child against its parent on the eval set."),
    "eval": ("overbrainer.cli.eval_cmd", "eval_", "Run lm-eval benchmarks on the child and its parent."),
    "push": ("overbrainer.cli.push_cmd", "push", "Push a run's model (--dataset: the split) to the Hugging Face Hub."),
    "pod": ("overbrainer.cli.pod_cmd", "pod", "Runpod pods: list, delete, the GPU catalog, ssh."),
    "tui": ("overbrainer.cli.tui_cmd", "tui", "Full-screen terminal UI: watch and steer the pipeline and training."),
}

# Global options that may stand anywhere on the line (as in the original).
_GLOBAL_WITH_VALUE = ("-C", "--project-dir")
_GLOBAL_FLAGS = ("--json",)


class LazyGroup(HelpGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        spec = COMMANDS.get(name)
        if spec is None:
            return None
        module = importlib.import_module(spec[0])
        return add_examples(getattr(module, spec[1]), name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _hoist_globals(args: list[str]) -> list[str]:
    """Move -C/--project-dir/--json found after the sub-command to the front (-C spelled
    --project-dir)."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest.extend(args[i:])
            break
        # -C is passed on as --project-dir: click tries a short option as a long one first, and
        # the miss costs an exception at every start.
        if a in _GLOBAL_WITH_VALUE and i + 1 < len(args):
            front += ["--project-dir", args[i + 1]]
            i += 2
            continue
        if a.startswith("--project-dir="):
            front.append(a)
        elif a.startswith("-C") and len(a) > 2 and not a.startswith("-C-"):
            front.append("--project-dir=" + a[2:])
        elif a in _GLOBAL_FLAGS:
            front.append(a)
        else:
            rest.append(a)
        i += 1
    return front + rest


def _color() -> bool | None:
    if os.environ.get("NO_COLOR"):
        return False
    return None  # click decides: colour only on a terminal


@click.group(cls=LazyGroup, epilog=epilog(""),
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "--project-dir", default=".", metavar="DIR", show_default=True,
              type=click.Path(file_okay=False), help="The project directory (where .env is read).")
@click.option("--json", "json_mode", is_flag=True,
              help="Machine output: JSON objects on stdout, JSON events on stderr.")
@click.version_option(__version__, "--version", prog_name="overbrainer")
@click.pass_context
def cli(ctx: click.Context, project_dir: str, json_mode: bool) -> None:
    """Distil a large parent LLM into a small open-weights child model.

    Results go to stdout, progress and logs to stderr. Exit codes: 0 success, 1 failure,
    2 usage or configuration error, 75 project busy (another overbrainer holds it), 130
    interrupted (Ctrl-C), 143 stopped by SIGTERM, 129 by SIGHUP. `overbrainer COMMAND --help`
    explains each command, with examples.
    """
    ctx.color = _color()  # the project is opened by the command (cli/context.py's pass_app)


def _print_error(message: str, code: int, json_mode: bool) -> None:
    message = strip_controls(redact(message))
    if json_mode:
        sys.stderr.write(json.dumps({"event": "error", "message": message, "exit_code": code}) + "\n")
    else:
        click.echo(f"error: {message}", err=True, color=_color())
    sys.stderr.flush()


def stopped_code() -> int:
    """The exit code of a command stopped by a signal (SIGTERM and SIGHUP are handled like
    Ctrl-C): 143 for SIGTERM, 129 for SIGHUP, else 130; the first signal that came decides."""
    first = stop_signals.first()
    return {signal.SIGTERM.value: EXIT_TERMINATED, signal.SIGHUP.value: EXIT_HANGUP}.get(first or 0, EXIT_INTERRUPTED)


def quiet_stdout() -> None:
    """The one broken-pipe handler: a reader such as `head` closed stdout, so stdout now goes to
    /dev/null (nothing written later, not even the flush at exit, fails or prints a traceback).
    The caller picks the exit code: 1 here, 0 for `runs logs`."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> None:
    args = _hoist_globals(list(sys.argv[1:] if argv is None else argv))
    json_mode = "--json" in args[: args.index("--")] if "--" in args else "--json" in args
    code = 0
    if json_mode and "--version" in args and not any(a in COMMANDS for a in args):
        sys.stdout.write(json.dumps({"name": "overbrainer", "version": __version__}) + "\n")
        sys.exit(0)
    try:
        rv = cli.main(args=args, prog_name="overbrainer", standalone_mode=False)
        if isinstance(rv, int):
            code = rv
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.exceptions.Abort as e:
        if isinstance(e.__cause__, EOFError):  # click turns an escaped EOFError into Abort: a failure
            code = _failure(e.__cause__, json_mode)
        else:
            code = stopped_code()
            _print_error("interrupted", code, json_mode)
    except click.ClickException as e:
        if json_mode:
            _print_error(e.format_message(), e.exit_code, True)
        else:
            e.show()
        code = e.exit_code
    except KeyboardInterrupt:
        code = stopped_code()
        _print_error("interrupted", code, json_mode)
    except Exception as e:  # noqa: BLE001 - ours, a closed stdout, and the last line of defence
        code = _failure(e, json_mode)
    finally:
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
    _exit_deaf_if_stopped()
    sys.exit(code)


def _exit_deaf_if_stopped() -> None:
    """A command a stop signal ended (its resume line and code decided) ignores further stops
    while it exits: the same stop delivered again (GNU `timeout`, a CI runner signalling the
    process group) would otherwise meet the default action that Python puts back as it
    finalizes, and end the process by the signal instead of with its code."""
    if stop_signals.first() is None:
        return
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(signum, signal.SIG_IGN)
        except (OSError, ValueError):
            pass


def _failure(e: Exception, json_mode: bool) -> int:
    """The exit code of a command that raised `e`, its message printed: an OverbrainerError's own
    (130, 143 or 129 for Interrupted, as the signal decides); 1 for a closed stdout (quietly) and
    for anything else (an internal error, whose traceback cli/context.pass_app logged at debug
    level: `--help` and a usage error never set up the log, nor import logging)."""
    if isinstance(e, OverbrainerError):
        code = stopped_code() if e.exit_code == EXIT_INTERRUPTED else e.exit_code
        _print_error(str(e), code, json_mode)
        return code
    if isinstance(e, BrokenPipeError):
        quiet_stdout()
        return EXIT_FAILURE
    _print_error(f"internal error: {type(e).__name__}: {e}", EXIT_FAILURE, json_mode)
    return EXIT_FAILURE


__all__ = ["cli", "main"]
