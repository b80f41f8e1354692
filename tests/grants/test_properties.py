"""Property: wrapping a denied program in any composition of wrappers and compound forms never
yields allow — the denial sees through every layer the segmenter knows."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from ouroactors.authorities.grants.commands import segments
from ouroactors.authorities.grants.posture import Posture, evaluate
from ouroactors.authorities.grants.rules import Decision, Effect, Request, decide, parse_rule

Wrap = Callable[[str], str]


def _backticks(c: str) -> str:
    return "echo `" + c.replace("\\", "\\\\").replace("`", "\\`") + "`"


PREFIXES = ["env", "env -i FOO=1", "env -u HOME --", "sudo", "sudo -u root", "sudo -E -u root --", "doas -u root",
            "nohup", "time", "time -p", "nice", "nice -n 5", "nice -5", "timeout 5", "timeout -k 1 -s KILL 5",
            "exec", "command", "builtin", "stdbuf -oL", "stdbuf -o 0", "setsid", "setsid -f", "FOO=1",
            "FOO=1 BAR='a b'", "xargs", "xargs -0", "xargs -n1 -I{}", "/usr/bin/env", "\\env", "'sudo'",
            "ionice -c3", "taskset 1", "chroot /", "flock /tmp/l", "runuser -u bob --", "watch -n 1", "busybox"]
def _prefix(prefix: str) -> Wrap:
    return lambda c: f"{prefix} {c}"


WRAPS: list[Wrap] = [
    *[_prefix(p) for p in PREFIXES],
    lambda c: f"bash -c {shlex.quote(c)}",
    lambda c: f"sh -c {shlex.quote(c)}",
    lambda c: f"bash -lc {shlex.quote(c)}",
    lambda c: f"zsh -o pipefail -c {shlex.quote(c)}",
    lambda c: f"eval {shlex.quote(c)}",
    lambda c: f"su -c {shlex.quote(c)}",
    lambda c: f"su - root -c {shlex.quote(c)}",
    lambda c: f"flock -w 5 /tmp/l -c {shlex.quote(c)}",
    lambda c: f"ls && {c}",
    lambda c: f"false || {c}",
    lambda c: f"true; {c}",
    lambda c: f"echo hi | {c}",
    lambda c: f"{c} | cat",
    lambda c: f"{c} &",
    lambda c: f"true\n{c}",
    lambda c: f"( {c} )",
    lambda c: f"{{ {c}; }}",
    lambda c: f"echo $( {c} )",
    lambda c: f'echo "$( {c} )"',
    _backticks,
    lambda c: f"cat <( {c} )",
    lambda c: f"tee >( {c} ) </dev/null",
    lambda c: f"if true; then {c}; fi",
    lambda c: f"for i in 1 2; do {c}; done",
    lambda c: f"while false; do :; done; {c}",
    lambda c: f"f() {{ {c}; }}; f",
    lambda c: f"{c} 2>&1 >/dev/null",
]
DENIED = ["rm -rf /", "rm x", "/bin/rm x", "r''m x", '"rm" -f y', "\\rm z", "$'\\x72m' x"]
RULES = [parse_rule("deny:Bash(rm *)", "session"), parse_rule("allow:Bash(*)", "node"),
         parse_rule("allow:Tool(*)", "node")]


@settings(max_examples=1000, deadline=None)
@given(st.sampled_from(DENIED), st.lists(st.sampled_from(WRAPS), max_size=5))
def test_wrapped_denied_program_is_never_allowed(base: str, wraps: list[Wrap]) -> None:
    command = base
    for wrap in wraps:
        command = wrap(command)
    verdict = decide(Request("s1", "Bash", Effect.EXECUTE, command=command), RULES)
    assert verdict.decision is not Decision.ALLOW, (command, verdict)
    split = segments(command)
    if split.complete:  # not truncated by length or depth: the deny itself must answer
        assert verdict.decision is Decision.DENY, (command, verdict, split)
        assert any(argv[0] == "rm" for argv in split.segments)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["git status", "ls -la"]), st.lists(st.sampled_from(WRAPS), max_size=4),
       st.sampled_from(list(Posture)))
def test_posture_layer_only_narrows(base: str, wraps: list[Wrap], posture: Posture) -> None:
    """Whatever the rules say, the posture's deny stands; where the posture passes, rules decide."""
    command = base
    for wrap in wraps:
        command = wrap(command)
    for effect in ("read", "write", "execute", "network"):
        req = Request("s1", "Bash", Effect(effect), command=command)
        with_posture = evaluate(req, posture, RULES)
        rules_only = decide(req, RULES)
        if posture is Posture.DEFAULT or (posture is Posture.PLAN and effect in ("read", "network")) or (
                posture is Posture.READ_ONLY and effect == "read"):
            assert with_posture == rules_only
        else:
            assert with_posture.decision is Decision.DENY and with_posture.rule is None


TRANSPARENT_PREFIXES = ["nohup", "time -p", "nice -n 5", "timeout 5", "stdbuf -oL", "setsid", "exec", "command",
                        "ionice -c3", "/usr/bin/nohup"]
STRUCTURAL: list[Wrap] = [
    lambda c: f"bash -c {shlex.quote(c)}",
    lambda c: f"sh -c {shlex.quote(c)}",
    lambda c: f"eval {shlex.quote(c)}",
    lambda c: f"true && {c}",
    lambda c: f"{c} | cat",
    lambda c: f"( {c} )",
    lambda c: f"{{ {c}; }}",
    lambda c: f"if true; then {c}; fi",
]
PRECISE = [parse_rule(t, "user") for t in ("allow:Bash(git status)", "allow:Bash(true)", "allow:Bash(cat)")]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TRANSPARENT_PREFIXES), max_size=3), st.lists(st.sampled_from(STRUCTURAL), max_size=3))
def test_transparent_wrappers_keep_an_exact_allow(prefixes: list[str], wraps: list[Wrap]) -> None:
    """Precision: unwrapping must not turn an allowed command into ask through wrappers that do not
    change what runs (no taint), so users are not trained to click through prompts."""
    command = " ".join([*prefixes, "git status"])  # prefixes go before a simple command only
    for wrap in wraps:
        command = wrap(command)
    assert decide(Request("s1", "Bash", Effect.EXECUTE, command=command), PRECISE).decision is Decision.ALLOW, command
