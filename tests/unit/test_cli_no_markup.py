"""The CLI prints what actors and models wrote as text, never as rich markup.

A worker crashed with ``RuntimeError("closing [/x] tag")``: ``ouroactors tree`` then failed as a whole with rich's
``MarkupError`` (the crash reason is a cell of its table), and every crash reason lost its ``[digest]`` (an unknown
tag to rich). A path a model chose (``session artifacts``) or a session id could carry a style the same way.
"""

from __future__ import annotations

import io

from rich.table import Table

from ouroactors.cli import common, render
from ouroactors.supervision.child_info import ChildInfo

HOSTILE = "crash(builtins.RuntimeError: closing [/x] tag and [bold red]red[/bold red] at a.py:3 in f [0123abcd])"


def _info(last_exit: str) -> ChildInfo:
    return ChildInfo(id="w", status="running", pid=12, generation=1, type="worker", actor="m:W", restarts=1,
                     last_exit=last_exit)


def test_a_crash_reason_with_brackets_prints_as_written_in_the_tree_table(monkeypatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    console = common.make_console()
    console.print(render.tree_table([("app/w", _info(HOSTILE))]))  # raised MarkupError before
    printed = out.getvalue()
    assert HOSTILE in printed.replace("\n", "")


def test_every_cli_console_reads_no_markup(monkeypatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    console = common.make_console()
    table = Table()
    table.add_column("path")
    table.add_row("notes/[/x].md")
    console.print(table)
    console.print("[bold]not a style[/bold]")
    assert "notes/[/x].md" in out.getvalue() and "[bold]not a style[/bold]" in out.getvalue()


def test_emoji_codes_print_as_written(monkeypatch) -> None:
    # `echo :smile:` asked for approval read `echo 😄`: what is shown is not what runs
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    common.make_console().print("echo :smile: :thumbs_up:")
    assert out.getvalue() == "echo :smile: :thumbs_up:\n"
