"""Properties of issue 12: grants judge the real path and what a command really runs.

The oracle for paths is independent of the code under test: ``os.path.realpath`` (the C library's
view of where a path lands) — whenever a path rule rooted in the workspace allows a spelling, the
kernel's answer must lie inside the workspace (and, for writes, outside ``.git`` and the data dir).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ouroactors.authorities.grants.commands import segments
from ouroactors.authorities.grants.rules import Decision, Effect, Request, decide, parse_rule

COMPONENTS = ["..", ".", "", "src", "a", "x", "link_out", "src_link", "abs_out", "etc_link", "g", "loop_a",
              "data_link", "dangling", "proc_link", ".git", "hooks", "outside", "ws", "WS", "passwd", "new"]
PREFIXES = ["", "./", "{ws}/", "{WS}/", "{base}/", "/proc/self/cwd/", "/etc/", "//", "{ws}/src/../", "/"]
ROOTED_RULES = ["allow:Write(**)", "allow:Edit(**)", "allow:Write(src/**)", "allow:Read(**)", "allow:Write(*)",
                "allow:Write(**/x)"]


def _spelling(layout: dict[str, str], prefix: str, parts: list[str]) -> str:
    for key, real in layout.items():
        prefix = prefix.replace(key, real)
    return prefix + "/".join(parts)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(PREFIXES), st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=6),
       st.sampled_from(ROOTED_RULES), st.sampled_from(["write", "read"]))
def test_no_spelling_outside_the_root_is_allowed_by_a_rule_rooted_inside_it(
        layout: dict[str, str], prefix: str, parts: list[str], rule: str, effect: str) -> None:
    ws, data = layout["{ws}"], layout["{data}"]
    raw = _spelling(layout, prefix, parts)
    tool = "Read" if effect == "read" else "Write"
    verdict = decide(Request("s1", tool, Effect(effect), paths=(raw,)), [parse_rule(rule, "user")],
                     protected=(data,), root=ws)
    if verdict.decision is not Decision.ALLOW:
        return
    joined = raw if raw.startswith("/") else os.path.join(ws, raw)
    real = os.path.realpath(joined)
    assert _inside(real, os.path.realpath(ws)), (raw, real, verdict)
    if effect == "write":
        assert ".git" not in real.lower().split("/"), (raw, real, verdict)
        assert not _inside(real, os.path.realpath(data)), (raw, real, verdict)


Wrap = Callable[[str], str]


def _prefix(p: str) -> Wrap:
    return lambda c: f"{p} {c}"


WRAPPER_PREFIXES = ["sudo", "sudo -u root", "env", "env -i", "nohup", "nice -n 5", "timeout 5", "stdbuf -oL",
                    "setsid", "busybox", "xargs", "xargs -0", "flock /tmp/l", "chroot /", "strace -f", "ltrace",
                    "unshare -r", "prlimit --nofile=5", "systemd-run --user", "ssh host", "ssh -p 22 host",
                    "parallel -j2", "time -p", "exec", "command", "doas", "ionice -c3", "taskset 1",
                    "runuser -u bob --", "watch -n1", "FOO=1", "LD_PRELOAD=/tmp/x.so", "GIT_PAGER=less"]
WRAPS: list[Wrap] = [
    *[_prefix(p) for p in WRAPPER_PREFIXES],
    lambda c: f"bash -c {shlex.quote(c)}",
    lambda c: f"sh -c {shlex.quote(c)}",
    lambda c: f"sh <<< {shlex.quote(c)}",
    lambda c: f"eval {shlex.quote(c)}",
    lambda c: f"su -c {shlex.quote(c)}",
    lambda c: f"script -qc {shlex.quote(c)} /dev/null",
    lambda c: f"git rebase --exec {shlex.quote(c)} main",
    lambda c: f"git submodule foreach {shlex.quote(c)}",
    lambda c: f"git -c core.pager={shlex.quote(c)} log",
    lambda c: f"GIT_PAGER={shlex.quote(c)} git log",
    lambda c: f"find . -exec {c} \\;",
    lambda c: f"true && {c}",
    lambda c: f"echo hi | {c}",
    lambda c: f"( {c} )",
    lambda c: f"echo $( {c} )",
]
# each is denied or asked under RULES on its own
NOT_ALLOWED = ["rm -rf x", "git -c core.pager='sh -c id' log", "git -c alias.x='!id' x", "python3 -c 'print(1)'",
               "perl -e 'print 1'", "git status > /etc/passwd", "git log --output=/etc/passwd", "find . -delete",
               "sort -o /etc/passwd f", "GIT_PAGER='id' git log", "git rebase --exec id main", "git bisect run id",
               "git filter-branch --tree-filter id HEAD", "sh -s", "awk 'BEGIN{system(\"id\")}'",
               "git config core.pager id", "ls | tee /etc/passwd", "bwrap --bind / / id",
               "ssh -o ProxyCommand=id host", "env LD_PRELOAD=/tmp/x.so ls", "unshare -r"]
RULES = [parse_rule(t, "user") for t in ("allow:Bash(*)", "allow:Bash(git *)", "allow:Bash(sudo *)",
                                          "allow:Bash(python3 *)", "allow:Bash(find *)", "deny:Bash(rm *)",
                                          "allow:Tool(Bash)")]
RULES_NO_TOOL = RULES[:-1]


def test_each_base_command_is_not_allowed_alone() -> None:
    for command in NOT_ALLOWED:
        verdict = decide(Request("s1", "Bash", Effect.EXECUTE, command=command), RULES_NO_TOOL)
        assert verdict.decision is not Decision.ALLOW, (command, verdict)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(NOT_ALLOWED), st.lists(st.sampled_from(WRAPS), min_size=1, max_size=4))
def test_wrapping_never_turns_a_deny_or_ask_into_allow(base: str, wraps: list[Wrap]) -> None:
    command = base
    for wrap in wraps:
        command = wrap(command)
    verdict = decide(Request("s1", "Bash", Effect.EXECUTE, command=command), RULES_NO_TOOL)
    assert verdict.decision is not Decision.ALLOW, (command, verdict)
    seen = segments(command)
    # every command visible (none hidden as code: `find . -exec sh <<< 'rm -rf x' \;` feeds find's here-string to
    # the sh it runs, a shell reading stdin, which is asked about as such): the rm itself is judged, and denied
    hidden = any(form.code is not None for detail in seen.details for form in detail.forms)
    if base.startswith("rm ") and seen.complete and not hidden:
        assert verdict.decision is Decision.DENY, (command, verdict)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["git log", "git status", "ls -l"]), st.sampled_from(
    ["GIT_PAGER", "PAGER", "GIT_EDITOR", "EDITOR", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "LD_PRELOAD", "LD_AUDIT",
     "BASH_ENV", "ENV", "PROMPT_COMMAND", "PYTHONSTARTUP", "PYTHONPATH", "MANPAGER", "SYSTEMD_PAGER", "GIT_SSH",
     "GIT_CONFIG_GLOBAL", "NODE_OPTIONS", "PATH", "HOME"]),
       st.sampled_from(["", "env ", "export ", "sudo "]))
def test_environment_that_names_code_asks(base: str, name: str, how: str) -> None:
    command = f"export {name}=x; {base}" if how == "export " else f"{how}{name}=x {base}"
    verdict = decide(Request("s1", "Bash", Effect.EXECUTE, command=command),
                     [parse_rule("allow:Bash(*)", "user"), parse_rule(f"allow:Bash({base} *)", "user")])
    assert verdict.decision is Decision.ASK, (command, verdict)
