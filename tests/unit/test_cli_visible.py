"""What the CLI prints shows control characters; the terminal never obeys them (``ouroactors.cli.visible``).

The attack: a model asks to run ``rm -rf ~ <ESC>[2K<CR>echo hello``. On a terminal, ``session show`` and
``approvals list`` printed the command as it is, and the terminal erased the line and drew ``echo hello`` in its place:
the operator approved a command they were not shown. Rich strips a carriage return but writes ESC through, and a
Unicode right-to-left override (U+202E) reorders what is shown.
"""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st
from rich.table import Table

from ouroactors.cli import common
from ouroactors.cli.visible import visible

ATTACK = "rm -rf ~ \x1b[2K\recho hello"


def test_control_characters_and_direction_overrides_are_written_as_escapes() -> None:
    assert visible(ATTACK) == "rm -rf ~ \\x1b[2K\\recho hello"
    assert visible("ls \u202egnp.exe") == "ls \\u202egnp.exe"
    assert visible("title \x1b]0;pwned\x07 \x9b") == "title \\x1b]0;pwned\\x07 \\x9b"
    assert visible("a\tb\nc — ünïcode ✓") == "a\tb\nc — ünïcode ✓"  # layout and ordinary text unchanged


@given(st.text())
def test_every_character_shown_prints_as_itself(text: str) -> None:
    shown = visible(text)
    assert all(c.isprintable() or c in "\t\n" for c in shown), repr(shown)
    if all(c.isprintable() or c in "\t\n" for c in text):
        assert shown == text
    assert visible("r\u200bm") == "r\\u200bm" and visible("\U000e0041") == "\\U000e0041"
    assert visible("a\tb\nc", keep="") == "a\\tb\\nc"  # one line


def test_every_cli_console_prints_strings_and_table_cells_visibly(monkeypatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    console = common.make_console()
    console.print(f"{'approval':>17}: a1 shell {{'command': {ATTACK!r}}}", highlight=False)
    table = Table()
    table.add_column("arguments")
    table.add_row(ATTACK)
    console.print(table)
    printed = out.getvalue()
    assert "\x1b" not in printed  # (a pipe: rich adds no styles of its own)
    assert printed.count("\\x1b[2K") == 2 and "rm -rf ~" in printed
