import signal

import pytest

from overbrainer.cli import stops
from overbrainer.cli.main import _hoist_globals, stopped_code
from overbrainer.support import stop_signals


def test_global_options_may_stand_after_the_subcommand():
    assert _hoist_globals(["answers", "-C", "p", "--topic", "x", "--json"]) == [
        "--project-dir", "p", "--json", "answers", "--topic", "x"]
    assert _hoist_globals(["-Cp", "config", "check"]) == ["--project-dir=p", "config", "check"]
    assert _hoist_globals(["split", "--project-dir=p"]) == ["--project-dir=p", "split"]
    assert _hoist_globals(["runs", "logs", "--", "-C", "x"]) == ["runs", "logs", "--", "-C", "x"]


def test_version_and_help_exit_zero(cli):
    r = cli(["--version"])
    assert r.returncode == 0 and "overbrainer" in r.stdout
    r = cli(["--help"])
    assert r.returncode == 0 and "subtopics" in r.stdout


def test_unknown_command_is_a_usage_error(cli):
    r = cli(["nope"])
    assert r.returncode == 2
    assert "No such command" in r.stderr


def test_json_version_is_a_json_object(cli):
    import json

    r = cli(["--json", "--version"])
    assert r.returncode == 0
    assert json.loads(r.stdout) == {"name": "overbrainer", "version": __import__("overbrainer").__version__}


def _main_with(monkeypatch, command) -> int:
    """overbrainer's main() over a real click group holding `command` (named `boom`)."""
    import click

    from overbrainer.cli import main as main_module

    group = click.Group("overbrainer")
    group.add_command(click.command("boom")(command))
    monkeypatch.setattr(main_module, "cli", group)
    try:
        main_module.main(["boom"])
    except SystemExit as e:
        return e.code
    raise AssertionError("main() did not exit")


def test_an_escaped_eof_error_is_a_failure_not_an_interrupt(monkeypatch, capsys):
    """click turns an EOFError out of a command into Abort, as it does Ctrl-C; it is a failure
    (exit 1, an internal error), never "interrupted" (130)."""
    def boom():
        raise EOFError("the connection closed")

    assert _main_with(monkeypatch, boom) == 1
    assert "error: internal error: EOFError: the connection closed" in capsys.readouterr().err


def test_ctrl_c_in_a_command_still_exits_130(monkeypatch, capsys):
    def boom():
        raise KeyboardInterrupt

    assert _main_with(monkeypatch, boom) == 130
    assert "error: interrupted" in capsys.readouterr().err


def test_one_record_of_stop_signals_and_the_first_decides_the_exit_code():
    stop_signals.forget()
    try:
        with pytest.raises(KeyboardInterrupt):
            stops._on_stop_signal(signal.SIGHUP, None)  # outside every Interrupt
        stop_signals.note(signal.SIGTERM)  # as an Interrupt's handler notes it
        assert stop_signals.first() == signal.SIGHUP and stopped_code() == 129
    finally:
        stop_signals.forget()
    assert stopped_code() == 130


CRASHING_COMMAND = """
import sys

import click

from overbrainer.cli import main
from overbrainer.cli.context import pass_app


@click.group()
@click.option("--project-dir", default=".")
@click.option("--json", "json_mode", is_flag=True)
def group(project_dir, json_mode):
    pass


@group.command("config")  # a read-only command: its log starts with OVERBRAINER_LOG set
@pass_app
def crash(app):
    {}[sys.argv[1]]


main.cli = group
main.main(["--project-dir", sys.argv[2], "config"])
"""


def test_an_internal_error_logs_its_traceback_at_debug_and_help_imports_no_logging(tmp_path):
    """The traceback of an internal error goes to the log the command set up (cli/context.py's
    pass_app); cli/main.py only prints its line, so `--help` never imports logging (start-up)."""
    import subprocess
    import sys

    from tests.fixtures.cli import clean_env

    r = subprocess.run([sys.executable, "-c", CRASHING_COMMAND, "the-missing-key", str(tmp_path)],
                       env=clean_env({"OVERBRAINER_LOG": "debug"}), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "error: internal error: KeyError: 'the-missing-key'" in r.stderr
    assert "internal error" in r.stderr.split("error: internal error")[0]  # the log line, before it
    assert "Traceback (most recent call last)" in r.stderr and 'line 20, in crash' in r.stderr
    quiet = subprocess.run([sys.executable, "-c", CRASHING_COMMAND, "k", str(tmp_path)], env=clean_env(),
                           capture_output=True, text=True, timeout=60)
    assert quiet.returncode == 1 and "Traceback" not in quiet.stderr
    probe = "import sys; from overbrainer.cli.main import main; sys.argv[1:] = ['--help']\ntry:\n    main()\n" \
            "except SystemExit:\n    pass\nprint('logging' in sys.modules, file=sys.stderr)"
    helped = subprocess.run([sys.executable, "-c", probe], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert helped.stderr.strip().splitlines()[-1] == "False", helped.stderr
