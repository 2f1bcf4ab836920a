"""The help formatter of overbrainer's groups (cli/help.py's HelpContext): click's own, its text
wrapped without importing `textwrap` (start-up time: `overbrainer --help`) wherever the result
is provably textwrap's; by click's wrap_text otherwise."""

from __future__ import annotations

from gettext import gettext as _

import click
from click.formatting import wrap_text as click_wrap_text

# What our wrapping leaves to click's: whitespace other than spaces (textwrap keeps it in its
# chunks) and ANSI escapes (click measures text without them).
_NOT_PLAIN = ("\t", "\n", "\r", "\x0b", "\x0c", "\033")


def _fill(text: str, width: int, initial: str, subsequent: str) -> str | None:
    """What click's TextWrapper(width, initial_indent=, subsequent_indent=,
    replace_whitespace=False).fill(text) gives (textwrap's greedy filling: words and runs of
    spaces are chunks; a line drops the spaces it starts after a break or ends with). None where
    the result could differ: a chunk too long for a line (textwrap cuts it), or a word with a
    hyphen that does not fit where it stands (textwrap may break it after the hyphen)."""
    if width <= 0 or any(c in text or c in initial or c in subsequent for c in _NOT_PLAIN):
        return None
    chunks: list[str] = []
    spaces = 0
    for i, word in enumerate(text.split(" ")):
        spaces += i > 0
        if word:
            if spaces:
                chunks.append(" " * spaces)
                spaces = 0
            chunks.append(word)
    if spaces:
        chunks.append(" " * spaces)
    chunks.reverse()
    lines: list[str] = []
    while chunks:
        indent = subsequent if lines else initial
        room = width - len(indent)
        if lines and not chunks[-1].strip():  # textwrap's test: a word of only non-breaking spaces too
            chunks.pop()
        line: list[str] = []
        used = 0
        while chunks and used + len(chunks[-1]) <= room:
            used += len(chunks[-1])
            line.append(chunks.pop())
        if chunks and (len(chunks[-1]) > room or "-" in chunks[-1]):
            return None
        if line and not line[-1].strip():
            line.pop()
        if line:
            lines.append(indent + "".join(line))
    return "\n".join(lines)


def wrap_text(text: str, width: int = 78, initial_indent: str = "", subsequent_indent: str = "",
              preserve_paragraphs: bool = False) -> str:
    """click.formatting.wrap_text, without importing textwrap where `_fill` can tell the result
    (every help text of overbrainer); click's own otherwise."""
    plain = text.expandtabs()
    if "\033" in plain + initial_indent + subsequent_indent:
        filled = None
    elif not preserve_paragraphs:
        filled = _fill(plain, width, initial_indent, subsequent_indent)
    else:
        filled = _paragraphs(plain, width, initial_indent, subsequent_indent)
    if filled is None:
        return click_wrap_text(text, width, initial_indent, subsequent_indent, preserve_paragraphs)
    return filled


def _paragraphs(text: str, width: int, initial: str, subsequent: str) -> str | None:
    """click's paragraphs: split at empty lines, each indented as its first line is; one that
    starts with a `\\b` line is kept as written, the others are filled."""
    paragraphs: list[tuple[int, list[str]]] = []
    for line in text.splitlines():
        if not line:
            paragraphs.append((0, []))
        elif not paragraphs or not paragraphs[-1][1]:
            stripped = line.lstrip()
            paragraphs.append((len(line) - len(stripped), [stripped]))
        else:
            paragraphs[-1][1].append(line)
    out = []
    for indent, lines in paragraphs:
        if not lines:
            continue
        first, rest = initial + " " * indent, subsequent + " " * indent
        if lines[0].strip() == "\b":  # click's TextWrapper.indent_only
            kept = "\n".join(lines[1:]).splitlines()
            out.append("\n".join((rest if i else first) + line for i, line in enumerate(kept)))
            continue
        filled = _fill(" ".join(lines), width, first, rest)
        if filled is None:
            return None
        out.append(filled)
    return "\n\n".join(out)


class HelpFormatter(click.HelpFormatter):
    """click's help formatter, its text wrapped by `wrap_text` above: the same pages (a test
    compares every command's), without textwrap's import."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        if prefix is None:
            prefix = f"{_('Usage:')} "
        usage_prefix = f"{prefix:>{self.current_indent}}{prog} "
        text_width = self.width - self.current_indent
        if not args:
            self.write(usage_prefix.rstrip(" ") + "\n")
            return
        if text_width >= len(click.unstyle(usage_prefix)) + 20:
            indent = " " * len(click.unstyle(usage_prefix))
            self.write(wrap_text(args, text_width, initial_indent=usage_prefix, subsequent_indent=indent))
        else:
            self.write(usage_prefix + "\n")
            indent = " " * (max(self.current_indent, len(click.unstyle(prefix))) + 4)
            self.write(wrap_text(args, text_width, initial_indent=indent, subsequent_indent=indent))
        self.write("\n")

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        self.write(wrap_text(text, self.width, initial_indent=indent, subsequent_indent=indent,
                             preserve_paragraphs=True) + "\n")

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        rows = [tuple(row) for row in rows]
        if not rows or any(len(row) != 2 for row in rows):
            return super().write_dl(rows, col_max, col_spacing)  # click's own errors and padding
        first_col = min(max(len(click.unstyle(row[0])) for row in rows), col_max) + col_spacing
        margin = first_col + self.current_indent
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            width = len(click.unstyle(first))
            self.write(" " * (first_col - width) if width <= first_col - col_spacing else "\n" + " " * margin)
            lines = wrap_text(second, max(self.width - first_col - 2, 10), preserve_paragraphs=True).splitlines()
            self.write(f"{lines[0]}\n" if lines else "\n")
            for line in lines[1:]:
                self.write(f"{'':>{margin}}{line}\n")
