from overbrainer.cli.main import _hoist_globals


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
