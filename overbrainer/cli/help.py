"""Help that teaches: command lists with whole phrases, `did you mean` for a mistyped command, and
examples at the end of every command's `--help` (cli/examples.py holds them)."""

from __future__ import annotations

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
            import difflib

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
    from overbrainer.cli.examples import epilog

    if cmd.epilog is None:
        cmd.epilog = epilog(path)
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            add_examples(sub, f"{path} {name}".strip())
    return cmd
