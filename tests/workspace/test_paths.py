"""Canonical roots on a real filesystem: escapes, symlinks, loops, ``..`` after resolution."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ouroactors.authorities.workspace.paths import (
    InvalidPath,
    NotADirectory,
    NotFound,
    PathError,
    PathEscapes,
    SymlinkLoop,
    canonicalize,
    canonicalize_roots,
    is_canonical_form,
    overlaps,
    under,
)


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """tmp/allowed/{a/b/c, sub}, tmp/outside/{deep/dir}, tmp/allowed/file.txt"""
    base = Path(os.path.realpath(tmp_path))
    allowed = base / "allowed"
    (allowed / "a" / "b" / "c").mkdir(parents=True)
    (allowed / "sub").mkdir()
    (allowed / "file.txt").write_text("x")
    outside = base / "outside"
    (outside / "deep" / "dir").mkdir(parents=True)
    return {"base": base, "allowed": allowed, "outside": outside}


def roots(t: dict[str, Path]) -> tuple[str, ...]:
    return (str(t["allowed"]),)


def test_plain_directory_and_relative_path(tree):
    allowed = tree["allowed"]
    assert canonicalize(str(allowed / "a" / "b"), allowed_roots=roots(tree)) == str(allowed / "a" / "b")
    assert canonicalize("a/./b/", allowed_roots=roots(tree), cwd=str(allowed)) == str(allowed / "a" / "b")
    assert canonicalize(str(allowed), allowed_roots=roots(tree)) == str(allowed)
    # `..` that stays inside is fine
    assert canonicalize(str(allowed / "a" / "b" / ".." / "b"), allowed_roots=roots(tree)) == str(allowed / "a" / "b")


def test_dotdot_escape_names_component_and_roots(tree):
    with pytest.raises(PathEscapes) as info:
        canonicalize(str(tree["allowed"] / ".." / "outside"), allowed_roots=roots(tree))
    err = info.value
    assert err.component == ".."
    assert str(tree["allowed"]) in str(err) and "outside" in str(err)
    assert err.allowed_roots == roots(tree)


def test_dotdot_escape_via_relative_path(tree):
    with pytest.raises(PathEscapes):
        canonicalize("../../..", allowed_roots=roots(tree), cwd=str(tree["allowed"] / "a"))


def test_absolute_path_outside(tree):
    with pytest.raises(PathEscapes) as info:
        canonicalize(str(tree["outside"] / "deep"), allowed_roots=roots(tree))
    assert info.value.component == "outside"


def test_symlink_to_outside(tree):
    (tree["allowed"] / "out").symlink_to(tree["outside"])
    with pytest.raises(PathEscapes) as info:
        canonicalize(str(tree["allowed"] / "out" / "deep"), allowed_roots=roots(tree))
    assert "symlink" in str(info.value.component)
    assert str(tree["allowed"] / "out") in str(info.value)


def test_relative_symlink_to_outside(tree):
    (tree["allowed"] / "sub" / "up").symlink_to("../../outside")
    with pytest.raises(PathEscapes):
        canonicalize(str(tree["allowed"] / "sub" / "up"), allowed_roots=roots(tree))


def test_symlink_inside_pointing_back_inside_is_fine(tree):
    allowed = tree["allowed"]
    (allowed / "sub" / "toc").symlink_to("../a/b/c")
    (allowed / "abs").symlink_to(allowed / "a")
    assert canonicalize(str(allowed / "sub" / "toc"), allowed_roots=roots(tree)) == str(allowed / "a" / "b" / "c")
    assert canonicalize(str(allowed / "abs" / "b"), allowed_roots=roots(tree)) == str(allowed / "a" / "b")


def test_symlink_loop_two_links(tree):
    allowed = tree["allowed"]
    (allowed / "x").symlink_to("y")
    (allowed / "y").symlink_to("x")
    with pytest.raises(SymlinkLoop) as info:
        canonicalize(str(allowed / "x"), allowed_roots=roots(tree))
    assert "symlink loop" in str(info.value)
    assert info.value.component is not None


def test_symlink_self_loop(tree):
    (tree["allowed"] / "me").symlink_to("me")
    with pytest.raises(SymlinkLoop):
        canonicalize(str(tree["allowed"] / "me" / "a"), allowed_roots=roots(tree))


def test_growing_symlink_chain_hits_the_link_limit(tree):
    # grow -> grow/x : never the same (link, remaining) twice, so only the counter stops it
    (tree["allowed"] / "grow").symlink_to("grow/x")
    with pytest.raises(SymlinkLoop) as info:
        canonicalize(str(tree["allowed"] / "grow"), allowed_roots=roots(tree))
    assert "more than 64 links" in str(info.value)


def test_max_links_is_a_limit_not_a_guess(tree):
    allowed = tree["allowed"]
    previous = "a"
    for i in range(5):
        (allowed / f"l{i}").symlink_to(previous)
        previous = f"l{i}"
    assert canonicalize(str(allowed / "l4"), allowed_roots=roots(tree), max_links=5) == str(allowed / "a")
    with pytest.raises(SymlinkLoop):
        canonicalize(str(allowed / "l4"), allowed_roots=roots(tree), max_links=4)


def test_link_dotdot_follows_symlink_first_escape(tree):
    """Lexically `allowed/link/..` is `allowed` (inside); really it is `outside/deep` (escape)."""
    allowed = tree["allowed"]
    (allowed / "link").symlink_to(tree["outside"] / "deep" / "dir")
    lexical = os.path.normpath(str(allowed / "link" / ".."))
    assert lexical == str(allowed)
    with pytest.raises(PathEscapes) as info:
        canonicalize(str(allowed / "link" / ".."), allowed_roots=roots(tree))
    assert str(tree["outside"] / "deep") in str(info.value)


def test_link_dotdot_follows_symlink_first_stays_inside(tree):
    """Lexically `allowed/x/../..` escapes; really it is `allowed/a/b/c/../..` = `allowed/a`."""
    allowed = tree["allowed"]
    (allowed / "x").symlink_to(allowed / "a" / "b" / "c")
    assert os.path.normpath(str(allowed / "x" / ".." / "..")) == str(tree["base"])
    assert canonicalize(str(allowed / "x" / ".." / ".."), allowed_roots=roots(tree)) == str(allowed / "a")


def test_root_that_is_a_file(tree):
    with pytest.raises(NotADirectory) as info:
        canonicalize(str(tree["allowed"] / "file.txt"), allowed_roots=roots(tree))
    assert info.value.component == "file.txt"


def test_file_used_as_directory(tree):
    with pytest.raises(NotADirectory):
        canonicalize(str(tree["allowed"] / "file.txt" / ".."), allowed_roots=roots(tree))
    (tree["allowed"] / "tofile").symlink_to("file.txt")
    with pytest.raises(NotADirectory):
        canonicalize(str(tree["allowed"] / "tofile"), allowed_roots=roots(tree))


def test_missing_path(tree):
    with pytest.raises(NotFound) as info:
        canonicalize(str(tree["allowed"] / "a" / "nope" / "deeper"), allowed_roots=roots(tree))
    assert info.value.component == "nope"
    (tree["allowed"] / "dangling").symlink_to("gone")
    with pytest.raises(NotFound) as info:
        canonicalize(str(tree["allowed"] / "dangling"), allowed_roots=roots(tree))
    assert "gone" in str(info.value.component)


def test_allowed_root_that_is_a_symlink(tree):
    link = tree["base"] / "rootlink"
    link.symlink_to(tree["allowed"])
    assert canonicalize_roots((str(link),)) == (str(tree["allowed"]),)
    # reached through the link or directly, the result is the real directory, and it is inside
    assert canonicalize(str(link / "a"), allowed_roots=(str(link),)) == str(tree["allowed"] / "a")
    assert canonicalize(str(tree["allowed"] / "sub"), allowed_roots=(str(link),)) == str(tree["allowed"] / "sub")
    with pytest.raises(PathEscapes):
        canonicalize(str(link / ".."), allowed_roots=(str(link),))


def test_bad_allowed_root_is_reported(tree):
    with pytest.raises(NotFound, match="configured allowed root"):
        canonicalize(str(tree["allowed"]), allowed_roots=(str(tree["base"] / "missing"),))
    with pytest.raises(TypeError):
        canonicalize(str(tree["allowed"]), allowed_roots=str(tree["allowed"]))  # type: ignore[arg-type]


def test_no_allowed_roots_refuses_everything(tree):
    with pytest.raises(PathEscapes, match="none configured") as refused:
        canonicalize(str(tree["allowed"]), allowed_roots=())
    assert "allowed_roots = [" in str(refused.value)  # says where a user lists them (the default agent.toml has none)


@pytest.mark.parametrize("bad", ["", "a\x00b", "x" * 5000])
def test_invalid_input(tree, bad):
    with pytest.raises(InvalidPath):
        canonicalize(bad, allowed_roots=roots(tree), cwd=str(tree["allowed"]))


def test_errors_are_value_errors_and_pickle(tree):
    import pickle

    with pytest.raises(ValueError) as info:
        canonicalize(str(tree["outside"]), allowed_roots=roots(tree))
    again = pickle.loads(pickle.dumps(info.value))
    assert isinstance(again, PathEscapes) and isinstance(again, PathError)
    assert str(again) == str(info.value)


def test_overlap_and_under():
    assert overlaps("/a/b", "/a/b")
    assert overlaps("/a/b", "/a/b/c") and overlaps("/a/b/c", "/a/b")
    assert not overlaps("/a/b", "/a/bc")
    assert not overlaps("/a/b", "/a/c")
    assert overlaps("/", "/anything")
    assert under("/a/b/c", "/a/b") and not under("/a/b", "/a/b/c")
    assert under("/x", "/") and under("/", "/")
    assert not under("/a/bc", "/a/b")


def test_canonical_form():
    assert is_canonical_form("/a/b") and is_canonical_form("/")
    for bad in ["a/b", "/a/../b", "/a/", "/a//b", "//a", "/a/./b", ""]:
        assert not is_canonical_form(bad), bad


def test_failures_outside_the_roots_are_escapes_not_oracles(tree):
    """Missing, non-directory or looping places outside the roots are reported as escapes."""
    outside = tree["outside"]
    (outside / "f").write_text("x")
    (outside / "loop").symlink_to("loop")
    for probe in [outside / "missing", outside / "f" / "x", outside / "loop", tree["allowed"] / ".." / "nope"]:
        with pytest.raises(PathEscapes):
            canonicalize(str(probe), allowed_roots=roots(tree))
    (tree["allowed"] / "toloop").symlink_to(outside / "loop")
    with pytest.raises(PathEscapes):
        canonicalize(str(tree["allowed"] / "toloop"), allowed_roots=roots(tree))


def test_a_detour_outside_that_comes_back_inside_is_fine(tree):
    """allowed/l -> outside/hop -> allowed/a: the result is inside, so it is accepted."""
    (tree["outside"] / "hop").symlink_to(tree["allowed"] / "a")
    (tree["allowed"] / "l").symlink_to(tree["outside"] / "hop")
    assert canonicalize(str(tree["allowed"] / "l" / "b"), allowed_roots=roots(tree)) == str(tree["allowed"] / "a" / "b")
