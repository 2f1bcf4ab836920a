"""cli/help.py's HelpFormatter writes the pages click's own formatter writes, without importing
textwrap (start-up time): compared on every command's help, then on generated text."""

from __future__ import annotations

import random
import subprocess
import sys

import click
import click.formatting
import pytest

from overbrainer.cli import help as helpmod
from overbrainer.cli import help_format
from overbrainer.cli.main import cli
from tests.fixtures.cli import clean_env
from tests.unit.test_cli_help import TREE


def _page(path: str, context_class: type[click.Context], width: int) -> str:
    ctx = context_class(cli, info_name="overbrainer", terminal_width=width)
    cmd: click.Command = cli
    for name in path.split():
        cmd = cmd.get_command(ctx, name)
        ctx = context_class(cmd, info_name=name, parent=ctx, terminal_width=width)
    return cmd.get_help(ctx)


@pytest.mark.parametrize("width", [30, 50, 62, 78, 120])
def test_every_help_page_is_clicks_own(width):
    pages = {path: _page(path, click.Context, width) for path, _ in TREE}
    assert {path: _page(path, helpmod.HelpContext, width) for path, _ in TREE} == pages


def test_help_does_not_import_textwrap():
    """`overbrainer --help` off a terminal (78 columns) is all our own wrapping (a page with a
    hyphenated word at a line's end goes through click's, and imports textwrap)."""
    probe = ("import sys\nfrom overbrainer.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n"
             "    pass\nsys.stderr.write('\\nLOADED ' + str('textwrap' in sys.modules))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert "Usage: overbrainer [OPTIONS] COMMAND [ARGS]..." in r.stdout
    assert r.stderr.strip().splitlines()[-1] == "LOADED False"


PLAIN = ["a", "word", "longer", "overbrainer", "(unset)", "`code`", "e.g.", "é", "日本", "\xa0", "\b"]
ODD = ["open-weights", "--help", "-C", "x--y", "re-run", "1-token", "-", "--", "a-",
       "averyveryverylongwordthatwillnotfit", "\t", "\x1b[1mbold", "\r", "\x0b"]  # an ANSI escape alone loops click


def _text(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(0, 6)):
        if rng.random() < 0.2:
            lines.append(rng.choice(["", "\b", "  \b", " "]))
            continue
        lead = " " * rng.choice([0, 0, 0, 1, 2, 4])
        words = [rng.choice(PLAIN) if rng.random() < 0.97 else rng.choice(ODD) for _ in range(rng.randint(1, 14))]
        lines.append(lead + "".join(w + " " * rng.choice([1, 1, 1, 1, 2, 0]) for w in words))
    return "\n".join(lines)


def test_wrap_text_is_clicks_on_generated_text(monkeypatch):
    fell_back = []

    def counted(*args, **kwargs):
        fell_back.append(args)
        return click.formatting.wrap_text(*args, **kwargs)

    monkeypatch.setattr(help_format, "click_wrap_text", counted)
    rng = random.Random(16)
    cases = 3000
    for _ in range(cases):
        paragraphs = rng.random() < 0.6
        text = _text(rng) if paragraphs else _text(rng).replace("\n", " ")  # a usage line is one line
        width = rng.choice([10, 20, 30, 40, 50, 60, 78, 100])
        # indents narrower than the width, as a help page's are (textwrap can loop forever on others)
        initial = " " * rng.choice([n for n in (0, 2, 4, 12) if n < width - 1])
        subsequent = rng.choice([initial, initial, " " * rng.choice([n for n in (0, 2, 8) if n < width - 1]), "\t"])
        args = (text, width, initial, subsequent, paragraphs)
        try:
            expected = click.formatting.wrap_text(*args)
        except ValueError as e:
            with pytest.raises(ValueError, match=str(e).split("(")[0]):
                help_format.wrap_text(*args)
            continue
        assert help_format.wrap_text(*args) == expected, args
    assert len(fell_back) < cases // 2  # most cases ran our own wrapping (about 1,900 of 3,000)


def test_write_dl_keeps_clicks_errors():
    with pytest.raises(TypeError):
        help_format.HelpFormatter(width=78).write_dl([])
    with pytest.raises(TypeError):
        click.HelpFormatter(width=78).write_dl([])
