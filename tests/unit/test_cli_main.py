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
