"""Off a terminal, ``ouroactors tree`` draws its table itself: byte for byte what rich draws, or rich does it."""

from __future__ import annotations

import io
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from ouroactors.cli import common
from ouroactors.cli.common import say
from ouroactors.cli.render import TREE_COLUMNS, plain_table, print_tree
from ouroactors.cli.visible import visible
from ouroactors.supervision.child_info import ChildInfo


def rich_text(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """What the CLI's console prints off a terminal (see cli.common.make_console)."""
    console = Console(file=io.StringIO(), width=100_000, soft_wrap=True, markup=False, emoji=False)
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    return console.file.getvalue()  # type: ignore[attr-defined]


printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)
likely = st.text(st.sampled_from("abcxyz0189/._-()=,'\"\\ "), max_size=20)  # what trees show, mostly
anything = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(*[printable] * len(TREE_COLUMNS)), max_size=6))
def test_plain_cells_are_drawn_exactly_as_rich_draws_them(rows: list[tuple[str, ...]]) -> None:
    drawn = plain_table("tree", TREE_COLUMNS, rows)
    if drawn is not None:
        assert drawn == rich_text("tree", TREE_COLUMNS, rows)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(*[likely] * len(TREE_COLUMNS)), min_size=1, max_size=8))
def test_cells_like_a_trees_are_drawn_exactly_as_rich_draws_them(rows: list[tuple[str, ...]]) -> None:
    drawn = plain_table("tree", TREE_COLUMNS, rows)
    if drawn is not None:
        assert drawn == rich_text("tree", TREE_COLUMNS, rows)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(*[anything] * len(TREE_COLUMNS)), max_size=4))
def test_any_other_cell_is_either_drawn_as_rich_or_left_to_rich(rows: list[tuple[str, ...]]) -> None:
    drawn = plain_table("tree", TREE_COLUMNS, rows)
    if drawn is not None:
        assert drawn == rich_text("tree", TREE_COLUMNS, rows)


def test_what_a_tree_shows_takes_the_plain_path() -> None:
    rows = [("app/store", "running", "4242", "1.000000000000007", "3", "killed"),
            ("app/pool", "undefined", "-", "-", "0", "shutdown(info: bye)"), ("app/x", "restarting", "-", "-", "1", "")]
    assert plain_table("tree", TREE_COLUMNS, rows) == rich_text("tree", TREE_COLUMNS, rows)
    assert plain_table("tree", TREE_COLUMNS, []) == rich_text("tree", TREE_COLUMNS, [])


def test_markup_emoji_and_wide_text_go_to_rich() -> None:
    for cell in ("crash(E: boom [ab12])", "a :smile: b", "中文", "two  spaces", " edge", "tab\there"):
        assert plain_table("tree", TREE_COLUMNS, [(cell, "running", "1", "-", "0", "-")]) is None


def test_print_tree_on_a_pipe_matches_rich(capsys) -> None:
    info = ChildInfo("store", "running", 4242, (1 << 48) | 7, "worker", "myapp:Store", 2, None)
    print_tree([("app/store", info), ("app/odd", info)])
    rows = [("app/store", "running", "4242", "1.000000000000007", "2", "-"),
            ("app/odd", "running", "4242", "1.000000000000007", "2", "-")]
    assert capsys.readouterr().out == rich_text("tree", TREE_COLUMNS, rows)


def rich_line(text: str) -> str:
    console = Console(file=io.StringIO(), width=100_000, soft_wrap=True, markup=False, emoji=False)
    console.print(text, markup=False)
    return console.file.getvalue()  # type: ignore[attr-defined]


@settings(max_examples=300, deadline=None)
@given(st.one_of(anything, st.text(st.sampled_from("ab:1 —[]\\é中"), max_size=30),
                 st.sampled_from([":smile:", "x :thumbs_up: y", "08:05:35", ":smile-text:", "a\tb", "\x1b[31mred"])))
def test_say_prints_what_rich_prints(text: str) -> None:
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdout", out)
        patch.delenv("FORCE_COLOR", raising=False)
        patch.delenv("TTY_COMPATIBLE", raising=False)
        common.__dict__.pop("console", None)  # a console made for this stdout, if rich is needed
        say(text)
        common.__dict__.pop("console", None)
    assert out.getvalue() == rich_line(visible(text))  # what rich prints, control characters shown (.visible)


def test_status_lines_take_the_plain_path(monkeypatch) -> None:
    monkeypatch.setattr(common, "get_console", lambda **_: pytest.fail("rich was used"))
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    say("system s on multiproc: admin pid 1, port 2, started 2026-12-01 08:05:35 by pid 3, node epoch 4")
    say("tree app: running, pid 5 — 3 running")
