"""Help that teaches: every command's --help ends with examples that parse; every option says what it
does; command lists show whole phrases, never cut with `...`; a mistyped command gets `did you
mean`."""

from __future__ import annotations

import shlex

import click
import pytest
from click.testing import CliRunner

from overbrainer.cli.help import EXAMPLES
from overbrainer.cli.main import cli


def _tree() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    found = []

    def walk(cmd: click.Command, path: str) -> None:
        found.append((path, cmd))
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), f"{path} {name}".strip())

    walk(cli, "")
    return found


TREE = _tree()


def _help(args: list[str]) -> click.testing.Result:
    return CliRunner().invoke(cli, [*args, "--help"], catch_exceptions=False)


def test_every_command_has_examples_and_no_stale_ones():
    assert sorted(path for path, _ in TREE) == sorted(EXAMPLES)


@pytest.mark.parametrize("path", [p for p, _ in TREE], ids=lambda p: p or "overbrainer")
def test_help_ends_with_examples_that_parse(path, tmp_path):
    r = _help(path.split())
    assert r.exit_code == 0, r.output
    text = r.output.rstrip()
    tail = text[text.rindex("Examples:"):].splitlines()[1:]
    commands = [line.strip() for line in tail if line.strip() and not line.strip().startswith("#")]
    assert commands == [line for _, line in EXAMPLES[path]]
    for line in commands:
        for part in line.replace("&&", "|").split("|"):
            words = shlex.split(part.replace("/srv/distil", str(tmp_path)))
            if words and words[0] == "overbrainer":
                parsed = _help(words[1:])  # options and sub-commands are parsed before --help answers
                assert parsed.exit_code == 0, f"{line}: {parsed.output}"


@pytest.mark.parametrize("path,cmd", TREE, ids=[p or "overbrainer" for p, _ in TREE])
def test_every_option_is_described(path, cmd):
    silent = [p.name for p in cmd.params if isinstance(p, click.Option) and not p.help]
    assert silent == [], f"`overbrainer {path}`: options without help"


@pytest.mark.parametrize("path", [p for p, c in TREE if isinstance(c, click.Group)], ids=lambda p: p or "overbrainer")
def test_command_lists_show_whole_phrases(path):
    r = _help(path.split())
    listing = r.output.split("Commands:")[1].split("Examples:")[0]
    assert "..." not in listing
    names = [p.rsplit(" ", 1)[-1] for p, _ in TREE if p != path and p.startswith(path) and p.count(" ") == (path.count(" ") + 1 if path else 0)]
    entries: dict[str, str] = {}
    name = None
    for line in listing.splitlines():  # `  name  Phrase…`, wrapped onto deeper-indented lines
        head = line[2:].split(" ", 1)
        if line.startswith("  ") and not line.startswith("   ") and head[0] in names:
            name = head[0]
            entries[name] = head[1].strip()
        elif line.strip():
            entries[name] += " " + line.strip()
    assert sorted(entries) == sorted(names)
    for name, phrase in entries.items():
        assert phrase[0].isupper() and phrase.endswith("."), f"`overbrainer {path}`: {name}: {phrase!r}"


@pytest.mark.parametrize("args,typo,near", [(["trian"], "trian", "train"), (["runs", "lss"], "lss", "ls"),
                                            (["confg", "check"], "confg", "config"), (["pod", "gpu"], "gpu", "gpus")])
def test_a_mistyped_command_gets_did_you_mean(args, typo, near):
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2
    assert f"Error: No such command '{typo}'. Did you mean '{near}'?" in r.output


def test_a_name_far_from_any_command_gets_no_guess():
    r = CliRunner().invoke(cli, ["frobnicate"])
    assert r.exit_code == 2 and "No such command 'frobnicate'." in r.output and "Did you mean" not in r.output
