"""A deny rule matches what a command's options mean, not their spelling (grants/options.py).

The review: with ``allow:Bash(*)`` in the session, the shipped node rule ``deny:Bash(rm -rf *)`` let ``rm -fr x1``,
``rm -r -f x2``, ``rm --recursive --force x3``, ``rm -Rf x8`` and ``rm -rfv x10`` run and delete directories.
Deny (and ask) rules are matched generously — any reading in which the command does the denied thing — and allow
rules strictly, as spelt.
"""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ouroactors.authorities.grants.options import means
from ouroactors.authorities.grants.rules import Decision, Effect, Request, decide, parse_rules

TREE = Path(__file__).resolve().parents[2] / "supervision_trees" / "agent.toml"


def _shipped_node_rules() -> list[str]:
    tree = tomllib.loads(TREE.read_text())
    [grants] = [c for c in tree["tree"]["children"] if c["id"] == "grants"]
    return grants["kwargs"]["rules"]["node"]


def _decide(command: str, node: list[str], session: list[str] | tuple[str, ...] = ("allow:Bash(*)",)) -> Decision:
    rules = parse_rules(node, "node") + parse_rules(session, "session")
    return decide(Request("s1", "Bash", Effect.EXECUTE, command=command), rules).decision


REPORTED = ["rm -fr x1", "rm -r -f x2", "rm --recursive --force x3", "rm -Rf x8", "rm -rfv x10"]
ALSO = ["rm x4 -rf", "rm -f -R x5", "rm --force -r x6", "rm --rec --forc x7", "rm -R --force x9", "rm -v -rf x11",
        "rm -rf -- x12", "rm --recursive -f --verbose x13", "rm -fRv x14", "rm -rf / > /dev/null", "find . -delete",
        "sudo rm -fr /", "bash -c 'rm -r -f x15'", "rm --no-preserve-root -fr /", "rm -rfd x16"]


@pytest.mark.parametrize("command", REPORTED + ALSO)
def test_the_shipped_rm_deny_denies_every_spelling_of_a_recursive_forced_removal(command: str) -> None:
    assert _decide(command, _shipped_node_rules()) is Decision.DENY


@pytest.mark.parametrize("command", ["rm -r x", "rm -f x", "rm x", "rm -- -rf", "rm -i -r x", "ls -rf", "rmdir -p x",
                                     "echo rm -rf x", "git rm -rf x"])
def test_what_is_not_a_recursive_forced_rm_is_left_to_the_other_rules(command: str) -> None:
    assert _decide(command, _shipped_node_rules()) is Decision.ALLOW


@pytest.mark.parametrize(("rule", "denied", "allowed"), [
    ("deny:Bash(git push --force *)",
     ["git push -f", "git push origin main --force", "git push --force-with-lease origin", "git push origin +main",
      "git -C repo push -f origin main", "git push --mirror backup", "git push --forc origin", "git push -uf o m",
      "git push -o ci.skip --force origin"],
     ["git push origin main", "git push --set-upstream origin main", "git pull --force", "git push --follow-tags"]),
    ("deny:Bash(git reset --hard *)", ["git reset --hard", "git reset HEAD~1 --hard", "git reset --har HEAD"],
     ["git reset HEAD~1", "git reset --soft HEAD~1"]),
    ("deny:Bash(git branch -D *)", ["git branch -D x", "git branch --delete --force x", "git branch -df x",
                                    "git branch -qD x"], ["git branch -d x", "git branch -f x main"]),
    ("deny:Bash(git clean -fdx *)", ["git clean -xdf", "git clean -f -d -x", "git clean --force -dx ."],
     ["git clean -n -dx", "git clean -fd"]),
    ("deny:Bash(chmod -R *)", ["chmod -R 777 .", "chmod --recursive a+w /", "chmod 777 . -R", "chmod -vR 777 ."],
     ["chmod -r x", "chmod 777 x"]),
    ("deny:Bash(chown -R *)", ["chown -R u: /", "chown --recursive u /x", "chown -hR u /x"], ["chown u x"]),
    ("deny:Bash(find * -delete)", ["find . -delete", "find / -name '*.py' -delete"], ["find . -name x"]),
    ("deny:Bash(curl -X POST *)", ["curl -XPOST http://h", "curl --request=post http://h", "curl -d a=1 http://h",
                                   "curl --json '{}' http://h", "curl -sX POST http://h", "curl --req POST http://h"],
     ["curl http://h", "curl -X GET http://h", "curl -I http://h"]),
    ("deny:Bash(wget --method=DELETE *)", ["wget --method DELETE http://h", "wget --method=delete http://h"],
     ["wget http://h"]),
    ("deny:Bash(rm -rf /)", ["rm -fr /", "rm / -rf", "rm -r -f -- /", "rm -Rfv /"], ["rm -rf /tmp/x", "rm -rf"]),
    ("deny:Bash(rm -rf*)", ["rm -fr x", "rm -Rf"], ["rm -r x"]),
    ("deny:Bash(mytool -x --flag *)", ["mytool --flag -x a", "mytool -yx --flag"], ["mytool -x a"]),
])
def test_deny_rules_of_other_commands_match_their_meaning(rule: str, denied: list[str], allowed: list[str]) -> None:
    for command in denied:
        assert _decide(command, [rule]) is Decision.DENY, (rule, command)
    for command in allowed:
        assert _decide(command, [rule]) is Decision.ALLOW, (rule, command)


def test_ask_rules_are_read_the_same_way() -> None:
    rules = parse_rules(["ask:Bash(git push --force *)"], "user") + parse_rules(["allow:Bash(git *)"], "session")
    verdict = decide(Request("s1", "Bash", Effect.EXECUTE, command="git push -f origin main"), rules)
    assert verdict.decision is Decision.ASK and "ask by user rule" in verdict.reason


@pytest.mark.parametrize(("command", "decision"), [
    ("rm -r build", Decision.ALLOW), ("rm -rf /", Decision.ASK), ("rm -rf build", Decision.ASK),
    ("rm -R build", Decision.ASK), ("rm build -r", Decision.ASK), ("rm --recursive build", Decision.ASK),
    ("rm -r build /", Decision.ASK),
])
def test_an_allow_vouches_only_for_what_it_spells(command: str, decision: Decision) -> None:
    assert _decide(command, [], ["allow:Bash(rm -r build)"]) is decision


def test_a_pattern_without_options_or_with_a_glob_program_stays_literal() -> None:
    assert not means("rm *", ("rm", "-rf", "x"))  # no option named: the literal match decides (it matches)
    assert not means("r? -rf *", ("rm", "-fr", "x"))
    assert means("rm -rf *", ("rm", "-fr", "x"))
    assert not means("rm -rf x", ("rm", "-fr", "y"))
    assert means("rm -rf x", ("rm", "-fr", "x", ">", "log"))  # a redirection is not an operand


# -- properties: every respelling of `rm -rf X` is denied --------------------------------------------------------

RECURSIVE_SHORT = ["r", "R"]
RECURSIVE_LONG = ["--recursive", "--recursiv", "--recur", "--rec", "--r"]
FORCE_LONG = ["--force", "--forc", "--fo"]
HARMLESS_SHORT = ["v", "d", "I", "i"]
HARMLESS_LONG = ["--verbose", "--one-file-system", "--no-preserve-root", "--preserve-root", "--interactive=never",
                 "--dir"]
TARGETS = st.sampled_from(["x", "/", "build", "/tmp/x y", "~", ".", "*", "a/b", "-", "+x"])


@st.composite
def rm_rf(draw: st.DrawFn) -> str:
    """``rm -rf X`` spelt any way GNU rm reads the same: synonyms, abbreviations, clusters in any split, extra
    harmless options, any order (rm permutes), an optional ``--`` before the operand, the program by path."""
    short: list[str] = []
    long: list[str] = []
    if draw(st.booleans()):
        short.append(draw(st.sampled_from(RECURSIVE_SHORT)))
    else:
        long.append(draw(st.sampled_from(RECURSIVE_LONG)))
    if draw(st.booleans()):
        short.append("f")
    else:
        long.append(draw(st.sampled_from(FORCE_LONG)))
    short += draw(st.lists(st.sampled_from(HARMLESS_SHORT), max_size=3))
    long += draw(st.lists(st.sampled_from(HARMLESS_LONG), max_size=2))
    letters = draw(st.permutations(short))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(letters) - 1)), max_size=len(letters))))
    clusters = ["-" + "".join(letters[a:b]) for a, b in zip([0, *cuts], [*cuts, len(letters)], strict=False)
                if letters[a:b]]
    target = draw(TARGETS)
    options = draw(st.permutations(clusters + long))
    if draw(st.booleans()):  # the operand before the options, or after `--`
        words = [*options, "--", target]
    else:
        at = draw(st.integers(0, len(options)))
        words = [*options[:at], target if not target.startswith(("-", "+")) else f"./{target}", *options[at:]]
    program = draw(st.sampled_from(["rm", "/bin/rm", "/usr/bin/rm", "\\rm", "command rm", "busybox rm"]))
    return " ".join([program, *(shlex.quote(w) for w in words)])


@settings(max_examples=400, deadline=None)
@given(rm_rf())
def test_every_respelling_of_rm_rf_is_denied(command: str) -> None:
    assert _decide(command, _shipped_node_rules()) is Decision.DENY, command


@settings(max_examples=200, deadline=None)
@given(rm_rf(), st.sampled_from(["{}", "sudo {}", "ls && {}", "bash -c '{}'", "({})", "echo $({})",
                                  "xargs {}", "timeout 5 {}", "nohup {} &"]))
def test_every_respelling_of_rm_rf_is_denied_inside_any_composition(command: str, wrap: str) -> None:
    composed = wrap.format(command.replace("'", "'\\''") if wrap.startswith("bash -c") else command)
    assert _decide(composed, _shipped_node_rules()) is not Decision.ALLOW, composed


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["-r", "-R", "-f", "-rf", "-v", "--recursive", "build", "/", "--", "x"]),
                min_size=0, max_size=5))
def test_an_allow_of_rm_r_build_covers_exactly_that_command(words: list[str]) -> None:
    command = " ".join(["rm", *words])
    decision = _decide(command, [], ["allow:Bash(rm -r build)"])
    assert (decision is Decision.ALLOW) == (words == ["-r", "build"]), command
