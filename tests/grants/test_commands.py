"""Shell command segmentation (ouroactors.authorities.grants.commands / .shell): pure, no rules."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.authorities.grants.commands import (
    MAX_SEGMENTS,
    Form,
    program_name,
    segments,
    trusted_program,
)
from ouroactors.authorities.grants.shell import MAX_DEPTH

SPLITS = [
    ("ls", [("ls",)]),
    ("ls -la /tmp", [("ls", "-la", "/tmp")]),
    ("ls && rm -rf /", [("ls",), ("rm", "-rf", "/")]),
    ("a || b; c | d |& e & f\ng", [("a",), ("b",), ("c",), ("d",), ("e",), ("f",), ("g",)]),
    ("echo $(rm x)", [("rm", "x"), ("echo", "$(rm x)")]),
    ("echo `rm x`", [("rm", "x"), ("echo", "`rm x`")]),
    ('echo "a $(rm x) b"', [("rm", "x"), ("echo", "a $(rm x) b")]),
    ("echo $(echo $(rm x))", [("rm", "x"), ("echo", "$(rm x)"), ("echo", "$(echo $(rm x))")]),
    ("cat <(rm x) >(ls)", [("rm", "x"), ("ls",), ("cat", "<(rm x)", ">(ls)")]),
    ("(a; b) && { c; }", [("a",), ("b",), ("c",)]),
    ("bash -c 'a && b'", [("a",), ("b",)]),
    ("sh -c \"ls; rm x\"", [("ls",), ("rm", "x")]),
    ("env -i A=1 -u B rm x", [("rm", "x")]),
    ("sudo -u root -- rm x", [("rm", "x")]),
    ("xargs -n1 -I{} rm {}", [("rm", "$__HOLE")]),  # filled in at run time: a variable
    ("xargs", [("echo",)]),
    ("env", [("env",)]),
    ("nohup nice -n 5 timeout 10 stdbuf -oL time -p exec command rm x", [("rm", "x")]),
    ("FOO=1 BAR=2 rm x", [("rm", "x")]),
    ("FOO=1", []),
    ("X=$(rm x)", [("rm", "x")]),
    ("/usr/bin/rm x", [("rm", "x")]),
    ("r''m \"x y\" 'z'", [("rm", "x y", "z")]),
    ("rm\\ x", [("rm x",)]),
    ("$'\\x72\\155' x", [("rm", "x")]),
    ("git status 2>&1 >/dev/null", [("git", "status", "2>&", "1", ">", "/dev/null")]),
    ("cat < in &> out", [("cat", "<", "in", "&>", "out")]),
    ("ls \\\n  -l", [("ls", "-l")]),
    ("ls # rm x", [("ls",)]),
    ("echo a#b", [("echo", "a#b")]),
    ("if a; then b; elif c; then d; else e; fi", [("a",), ("b",), ("c",), ("d",), ("e",)]),
    ("while a; do b; done", [("a",), ("b",)]),
    ("for i in $(ls); do rm $i; done", [("ls",), ("rm", "$i")]),
    ("! rm x", [("rm", "x")]),
    ("function f { rm x; }", [("rm", "x")]),
    ("find . -exec rm {} \\; -print", [("find", ".", "-exec", "rm", "{}", ";", "-print"), ("rm", "$__HOLE")]),
    ("echo $((1 + 2))", [("echo", "$((1 + 2))")]),
    ("((rm x))", [("rm", "x")]),  # dash runs it as nested subshells
    ("echo 'a;b' \"c&&d\"", [("echo", "a;b", "c&&d")]),
    ("cat <<< \"$(rm x)\"", [("rm", "x"), ("cat", "<<<", "$(rm x)")]),
    ("su -c 'rm x'", [("rm", "x")]),
    ("su -s /bin/sh root -c 'rm x'", [("rm", "x")]),
    ("su - root", [("su", "-", "root")]),  # a login shell: nothing to unwrap
    ("runuser -u bob -- rm x", [("rm", "x")]),
    ("runuser bob -c 'rm x'", [("rm", "x")]),
    ("flock /tmp/l rm x", [("rm", "x")]),
    ("flock /tmp/l -c 'rm x'", [("rm", "x")]),
    ("flock /tmp/l grep -c rm f", [("grep", "-c", "rm", "f")]),
    ("watch -n 1 'ls; rm x'", [("ls; rm x",), ("ls",), ("rm", "x")]),  # exec reading and sh -c reading
    ("chroot /srv rm x", [("rm", "x")]),
    ("taskset 1 ionice -c3 rm x", [("rm", "x")]),
    ("busybox sh -c 'rm x'", [("rm", "x")]),
    ("", []),
]


@pytest.mark.parametrize(("command", "expected"), SPLITS)
def test_segments(command: str, expected: list[tuple[str, ...]]) -> None:
    result = segments(command)
    assert result.complete, result
    assert list(result.segments) == expected


UNPARSEABLE = [
    ("echo 'x", "single quote"),
    ('echo "x', "double quote"),
    ("echo `x", "backtick"),
    ("echo $(x", "unbalanced"),
    ("(ls", "unbalanced"),
    ("ls)", "unbalanced"),
    ("echo \\", "trailing backslash"),
    ("cat <<EOF\nx\nEOF", "heredoc"),
    ("case a in a) ls;; esac", ""),
    ("$X x", "computed at run time"),
    ("$(echo rm) x", "computed at run time"),
    ("/bin/r* x", "computed at run time"),
    ("{rm,x}", "computed at run time"),
    ("bash -c \"$CMD\"", "computed at run time"),
    ("eval $CMD", "computed at run time"),
    ("sudo -u $U rm x", "computed at run time"),
    ("env -S 'rm x'", "unknown option"),
    ("sudo --frobnicate rm x", "unknown option"),
    ("bash -c", "without a command string"),
    ("find . -exec rm {}", "without"),
    ("ls >", "no target"),
    ("echo $(( $(rm x) ))", "arithmetic"),
]


@pytest.mark.parametrize(("command", "why"), UNPARSEABLE)
def test_unparseable(command: str, why: str) -> None:
    result = segments(command)
    assert result.unparseable is not None and why in result.unparseable, result
    assert not result.complete


def test_segments_before_the_error_are_kept() -> None:
    result = segments("rm x; echo 'oops")
    assert result.unparseable and result.segments == (("rm", "x"),)
    result = segments('bash -c "echo $(rm x)"')  # the outer substitution ran before the failure
    assert result.unparseable and ("rm", "x") in result.segments


def test_truncated_by_length() -> None:
    assert segments("ls " + "a" * 5000).truncated
    assert segments("ls " + "a" * 50, max_len=40).truncated
    assert not segments("ls " + "a" * 5000, max_len=10_000).truncated


def test_truncated_by_depth_and_count() -> None:
    deep = "x"
    for _ in range(MAX_DEPTH + 2):
        deep = f"echo $({deep})"
    assert segments(deep, max_len=100_000).truncated
    assert segments("eval " * (MAX_DEPTH + 2) + "rm x").truncated  # each eval parses its arguments again
    assert segments("nohup " * (MAX_DEPTH + 2) + "rm x").truncated
    assert segments("nohup " * (MAX_DEPTH - 2) + "rm x").segments == (("rm", "x"),)
    many = "; ".join(["ls"] * (MAX_SEGMENTS + 1))
    assert segments(many, max_len=100_000).truncated


def test_forms_and_taints() -> None:
    (seg,) = segments("nohup sudo -u root git status").details
    assert [f.argv for f in seg.forms] == [
        ("nohup", "sudo", "-u", "root", "git", "status"),
        ("sudo", "-u", "root", "git", "status"),
        ("git", "status"),
    ]
    assert [f.taint for f in seg.forms] == [None, "privilege", None]
    (seg,) = segments("A=1 git status").details
    assert seg.forms[0] == Form(("A=1", "git", "status"), "A=1", "env")
    (seg,) = segments("env A=1 git status").details
    assert seg.forms[0].taint == "env"
    (seg,) = segments("env -i git status").details
    assert seg.forms[0].taint is None
    (seg,) = segments("bash -c 'git status'").details
    assert seg.forms[0].argv == ("bash", "-c", "git status") and seg.argv == ("git", "status")
    (seg,) = segments("/tmp/x/git status > out").details
    assert seg.forms[-1] == Form(("git", "status", ">", "out"), "/tmp/x/git")


def test_program_name_and_trust() -> None:
    assert program_name("/usr/bin/rm") == "rm"
    assert program_name("./rm") == "rm"
    assert program_name("rm") == "rm"
    assert program_name("/") == "/"
    assert trusted_program("git") and trusted_program("/usr/bin/git") and trusted_program("/bin/../usr/bin/git")
    assert not trusted_program("./git") and not trusted_program("/tmp/git")


_PLAIN = st.text(alphabet=st.sampled_from("abc-_.=/ \t\"'\\"), max_size=40)


@given(_PLAIN)
def test_words_agree_with_shlex(text: str) -> None:
    """For plain words and quotes (no operators or expansions), quote removal matches shlex.split."""
    try:
        expected = shlex.split(text)
    except ValueError:
        assert not segments(text).complete
        return
    result = segments(text)
    assert result.complete
    words = [w for seg in result.details for w in seg.forms[0].argv]
    if result.segments:
        if "/" in expected[0]:
            words[0] = expected[0]  # segments name the program by its basename
        assert words == expected
    else:  # only assignments (or nothing): no program runs
        assert all("=" in w for w in expected)


@given(st.text(max_size=200))
def test_never_raises(text: str) -> None:
    result = segments(text)
    assert isinstance(result.segments, tuple)
    assert len(result.segments) == len(result.details)
