"""The table of options that run code or write files, as the segmenter reports it."""

from __future__ import annotations

import pytest

from ouroactors.authorities.grants.code_options import TABLE, code_env, env_command
from ouroactors.authorities.grants.commands import segments


def _code(command: str) -> list[tuple[int | None, str | None]]:
    return [(f.code, f.why) for s in segments(command).details for f in s.forms if f.code is not None]


@pytest.mark.parametrize(("command", "index"), [
    ("git -c core.pager=less log", 2), ("git -c alias.x=!id x", 2), ("git --exec-path=/tmp status", 1),
    ("git rebase --exec id main", 2), ("git rebase -x id", 2), ("git bisect run id", 2),
    ("git grep -O foo", 2), ("git difftool -x id", 2), ("git filter-branch HEAD", 1), ("git config a.b c", 3),
    ("python3 -c 1", 1), ("python3 -Bc 1", 1), ("perl -ne 1", 1), ("node --eval=1", 1), ("find . -delete", 2),
    ("sh", 0), ("cat | python3", 0), ("awk 'BEGIN{system(\"x\")}'", 1), ("sed 1e\\ id f", 1),
    ("tar -I id -cf x .", 1), ("vim -c q f", 1), ("bwrap id", 0), ("docker run a id", 1),
])
def test_code_marks(command: str, index: int) -> None:
    assert index in [code for code, _ in _code(command)], (command, _code(command))


@pytest.mark.parametrize("command", [
    "git status", "git -c color.ui=always log", "git config user.name", "git config --get core.pager",
    "python3 script.py", "python3 -m pytest -c x", "awk '{print $1}' f", "sed s/a/b/ f", "find . -name x",
    "bash script.sh", "sh -c ls", "git log --oneline", "git -C sub status"])
def test_no_code_marks(command: str) -> None:
    assert _code(command) == [], command


@pytest.mark.parametrize(("command", "writes"), [
    ("ls > a", ("a",)), ("ls >> a 2> b", ("a", "b")), ("ls &> a", ("a",)), ("ls >| a", ("a",)),
    ("ls >& a", ("a",)), ("ls 2>&1 >&2 >&-", ()), ("ls > $X", (None,)), ("git log --output=a", ("a",)),
    ("git log --output a", ("a",)), ("sort -o a f", ("a",)), ("tee a b", ("a", "b")), ("tee -a a", ("a",)),
    ("dd if=x of=a", ("a",)), ("curl -o a u", ("a",)), ("sed -i s/a/b/ f g", ("f", "g")),
    ("find . -fprint a", ("a",)), ("bash -c 'ls > a'", ("a",)), ("sudo tee a", ("a",)),
    ("git format-patch -o d", ("d",)), ("script -q -c ls log", ("log",)), ("ls < a", ())])
def test_writes(command: str, writes: tuple[str | None, ...]) -> None:
    assert segments(command).writes == writes, command


def test_inner_commands_are_judged_as_segments() -> None:
    argvs = segments("git -c core.pager='rm -rf b' log").segments
    assert ("rm", "-rf", "b") in argvs
    assert ("rm", "-r", "-f", "--", ".") in segments("find . -delete").segments
    assert ("rm", "x") in segments("GIT_PAGER='rm x' git log").segments
    assert ("rm", "x") in segments("export PAGER='rm x'").segments
    assert ("rm", "x") in segments("git submodule foreach --recursive 'rm x'").segments
    assert ("rm", "x") in segments("sh <<< 'rm x'").segments
    assert ("rm", "x") in segments("ssh -p 22 host 'ls; rm x'").segments


def test_environment_table() -> None:
    for assignment in ("GIT_PAGER=x", "PAGER=x", "MANPAGER=x", "LD_PRELOAD=x", "PYTHONPATH=x", "BASH_ENV=x",
                       "PATH=x", "GIT_SSH_COMMAND=x", "GIT_CONFIG_GLOBAL=x"):
        assert code_env(assignment), assignment
    for assignment in ("FOO=1", "GIT_AUTHOR_NAME=x", "PYTHONUNBUFFERED=1", "LANG=C"):
        assert not code_env(assignment), assignment
    assert env_command("GIT_PAGER=less -R") == "less -R" and env_command("LD_PRELOAD=x.so") is None


def test_table_is_data() -> None:
    """Every entry's options name a known kind; git's subcommands are keyed `git <sub>`."""
    for name, program in TABLE.items():
        assert name and all(kind in ("command", "argv", "line", "code", "flag", "write")
                            for kind in program.options.values()), name
