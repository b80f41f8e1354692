"""Read one simple command against :mod:`.code_options`: what it runs besides its program.

:func:`inspect` is called by :mod:`.commands` for every form (after the program name is
normalised) and answers a :class:`~.code_options.Finding`. The table is data; this module is the
little interpreter of it, plus the programs whose arguments need more than an option grammar:
git (global ``-c``/``--config-env``/``--exec-path``, ``git config`` writes, subcommands), awk and
sed programs, ``tee``/``dd`` targets, ``find -delete``, ssh's ``-o`` keys, environment assignments
(``export GIT_PAGER=…``, ``env LD_PRELOAD=…``) and systemd-run's ``Exec*`` properties.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from .code_options import (
    ALWAYS_CODE,
    GIT_ALWAYS_CODE,
    GIT_COMMAND_KEYS,
    GIT_CONFIG_READS,
    GIT_GLOBAL_FLAGS,
    GIT_GLOBAL_VALUED,
    GIT_SAFE_KEYS,
    SUBCOMMAND_CODE,
    TABLE,
    Finding,
    Kind,
    Program,
    code_env,
    env_command,
)
from .shell import Word

_PYTHON = re.compile(r"python[23](\.\d+)?")
_ASSIGNERS = frozenset({"env", "sudo", "export", "declare", "typeset", "local", "readonly"})
_AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
_PLUS_COMMANDS = frozenset({"vim", "vi", "nvim", "view", "ex", "gvim", "less", "more"})


def _apply(f: Finding, kind: Kind, opt_index: int, value: Word | None, rest: list[Word], label: str) -> None:
    if kind == "write":
        f.writes.append(None if value is None or value.dynamic else value.value)
        return
    f.mark(opt_index, f"{label} runs code")
    if kind == "command" and value is not None and not value.dynamic:
        f.commands.append(value)
    elif kind == "argv" and rest:
        f.argvs.append(rest)
    elif kind == "line":
        words = rest[next((i for i, w in enumerate(rest) if not w.value.startswith("-")), len(rest)) :]
        if words and not any(w.dynamic for w in words):
            f.commands.append(Word(" ".join(w.value for w in words)))


def scan(spec: Program, args: list[Word], f: Finding, *, base: int, label: str) -> bool:
    """Find ``spec``'s options in ``args`` (argv index of ``args[0]`` is ``base``); True if an operand was seen."""
    i, operand = 0, False
    while i < len(args):
        v, at = args[i].value, base + i
        nxt = args[i + 1] if i + 1 < len(args) else None
        if v == "--":
            return operand or i + 1 < len(args)
        kind = spec.options.get(v.split("=", 1)[0] if v.startswith("--") else v)
        if kind is not None and (not spec.grouped or v.startswith("--") or len(v) == 2 or not v.startswith("-")):
            eq = v.startswith("--") and "=" in v
            value = Word(v.split("=", 1)[1]) if eq else (None if kind == "flag" else nxt)
            _apply(f, kind, at, value, args[i + 1 :], f"{label} {v.split('=', 1)[0]}")
            i += 1 + (not eq and kind not in ("flag", "argv", "line") and nxt is not None)
            if kind in ("argv", "line"):
                return True
            continue
        if v.startswith("--"):
            i += 1 + (v in spec.long_valued and nxt is not None)
            continue
        if v.startswith("-") and len(v) > 1 and spec.grouped:
            skip = 0
            for j, ch in enumerate(v[1:], 1):
                k = spec.options.get("-" + ch)
                if k is not None:
                    attached = v[j + 1 :]
                    value = Word(attached) if attached else (None if k == "flag" else nxt)
                    _apply(f, k, at, value, [], f"{label} -{ch}")
                    skip = 0 if attached or k == "flag" else 1
                    break
                if ch in spec.valued or ch in spec.stop:
                    skip = 0 if v[j + 1 :] else 1
                    if ch in spec.stop:
                        return True
                    break
            i += 1 + skip
            continue
        operand = operand or not v.startswith("-")
        if operand and spec.stop_at_operand:
            return True
        i += 1
    return operand


_AWK_CODE = re.compile(r"\b(system|getline)\b|\||\bprintf?\b[^;}\n]*>|@load|@include")


def _awk(args: list[Word], f: Finding) -> None:
    i = 0
    while i < len(args):
        v = args[i].value
        if v in ("-f", "--file", "-E", "--exec", "-i", "--include", "-l", "--load") or v.startswith("-f"):
            f.mark(1 + i, f"awk {v} runs a program file")
            return
        if v in ("-F", "-v", "--assign", "--field-separator"):
            i += 2
            continue
        if v in ("-e", "--source") and i + 1 < len(args):
            i += 1
            v = args[i].value
        elif v.startswith("-") and v != "-":
            i += 1
            continue
        if args[i].dynamic or _AWK_CODE.search(v):
            f.mark(1 + i, "the awk program runs commands or writes files")
        return


_SED_CMD = re.compile(r"(?:^|[;\n{}])\s*(?:[0-9$]+|/(?:[^/\\]|\\.)*/)?(?:,(?:[0-9$]+|/(?:[^/\\]|\\.)*/))?\s*!?\s*"
                      r"(?:[ewWrR]\b|s(.)(?:(?!\1)[^\\]|\\.)*\1(?:(?!\1)[^\\]|\\.)*\1[gpiImM0-9]*[ew])")


def _sed(args: list[Word], f: Finding) -> None:
    scripts, operands, in_place, i = list[tuple[int, Word]](), list[Word](), False, 0
    while i < len(args):
        w, v = args[i], args[i].value
        if v in ("-e", "--expression") and i + 1 < len(args):
            scripts.append((2 + i, args[i + 1]))
            i += 2
            continue
        if v in ("-f", "--file") or v.startswith(("--file=", "-f")):
            f.mark(1 + i, "sed -f runs a script file")
        elif v.startswith("--expression="):
            scripts.append((1 + i, Word(v.partition("=")[2], w.dynamic)))
        elif v in ("-i", "--in-place") or v.startswith("--in-place=") or (v.startswith("-") and "i" in v[1:2]):
            in_place = True
        elif v.startswith("-") and v != "-":
            in_place = in_place or ("i" in v[1:] and not v.startswith("--"))
        else:
            operands.append(w)
            if not scripts and len(operands) == 1:
                scripts.append((1 + i, w))
        i += 1
    files = operands[1:] if operands and scripts and scripts[0][1] is operands[0] else operands
    for index, script in scripts:
        if script.dynamic or _SED_CMD.search(script.value):
            f.mark(index, "the sed script runs commands or touches files")
    if in_place:
        f.writes.extend(None if w.dynamic else w.value for w in files)


def _tee(args: list[Word], f: Finding) -> None:
    operands = False
    for w in args:
        if operands or not w.value.startswith("-") or w.value == "-":
            operands = operands or not w.value.startswith("-")
            if w.value != "-":
                f.writes.append(None if w.dynamic else w.value)
        elif w.value == "--":
            operands = True


def _dd(args: list[Word], f: Finding) -> None:
    for w in args:
        if w.value.startswith("of="):
            f.writes.append(None if w.dynamic else w.value[3:])


def _ssh_options(args: list[Word], f: Finding) -> None:
    for i, w in enumerate(args):
        v = w.value
        if v.startswith("-o"):
            value = v[2:] or (args[i + 1].value if i + 1 < len(args) else "")
            key = re.split(r"[=\s]", value.strip(), maxsplit=1)[0].lower()
            if key in ("proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "match",
                       "include", "remotecommand", "securitykeyprovider", "pkcs11provider") or w.dynamic:
                f.mark(1 + i + (not v[2:]), f"ssh -o {key} runs code")




def _assignments(args: list[Word], f: Finding) -> None:
    for i, w in enumerate(args):
        if "=" in w.value and not w.value.startswith("-") and code_env(w.value):
            f.mark(1 + i, f"{w.value.split('=', 1)[0]}= names a program, library or startup file")
            command = env_command(w.value)
            if command is not None and not w.dynamic:
                f.commands.append(Word(command))


def _git_pair(f: Finding, word: Word, index: int) -> None:
    """One ``KEY=VALUE`` of ``git -c``: a key not known to be safe asks; a command key's value is judged."""
    key, _, value = word.value.partition("=")
    key = key.lower()
    if not word.dynamic and any(fnmatchcase(key, p) for p in GIT_SAFE_KEYS):
        return
    f.mark(index, f"git config {key} may run code")
    if word.dynamic or not any(fnmatchcase(key, p) for p in GIT_COMMAND_KEYS):
        return
    command = value[1:] if key.startswith("alias.") and value.startswith("!") else value
    if command.strip() and not (key.startswith("alias.") and not value.startswith("!")):
        f.commands.append(Word(command))


def _git_config(args: list[Word], f: Finding, base: int) -> None:
    operands: list[tuple[int, Word]] = []
    reads, i = False, 0
    while i < len(args):
        v = args[i].value
        if v in ("-f", "--file", "--blob", "--type", "--default", "--comment", "--value"):
            i += 2
            continue
        if v in GIT_CONFIG_READS:
            reads = reads or v.startswith("--get") or v in ("--list", "-l", "get", "list")
        elif not v.startswith("-") or args[i].dynamic:
            operands.append((base + i, args[i]))
        i += 1
    if (reads and operands[:1] != [(base, Word("set"))]) or len(operands) == 1:
        return
    f.mark(base - 1, "git config writes configuration (.git/config)")
    if len(operands) >= 2:  # `git config KEY VALUE`: judge the pair as `-c KEY=VALUE` would be
        (_, key), (index, value) = operands[-2], operands[-1]
        _git_pair(f, Word(f"{key.value}={value.value}", key.dynamic or value.dynamic), index)


def _git(args: list[Word], f: Finding) -> None:
    i = 0
    while i < len(args):
        w, v, at = args[i], args[i].value, 1 + i
        if w.dynamic and v.startswith("-"):
            f.mark(at, "a git option computed at run time")
        if v == "-c" or (v.startswith("-c") and not v.startswith("--")):
            if v == "-c" and i + 1 >= len(args):
                return
            _git_pair(f, args[i + 1] if v == "-c" else Word(v[2:], w.dynamic), at + (v == "-c"))
            i += 2 if v == "-c" else 1
        elif v.startswith("--config-env"):
            pair = v.partition("=")[2] if "=" in v else (args[i + 1].value if i + 1 < len(args) else "")
            key = pair.split("=", 1)[0].lower()
            if not any(fnmatchcase(key, p) for p in GIT_SAFE_KEYS):
                f.mark(at + ("=" not in v), f"git config {key} (from the environment) may run code")
            i += 1 + ("=" not in v)
        elif v.startswith("--exec-path="):
            f.mark(at, "git --exec-path runs git programs from another directory")
            i += 1
        elif v.split("=", 1)[0] in GIT_GLOBAL_VALUED:
            if v.split("=", 1)[0] in ("--git-dir", "--work-tree"):
                f.mark(at + ("=" not in v), f"git {v.split('=', 1)[0]} runs with another repository's config")
            i += 1 + ("=" not in v)
        elif v in GIT_GLOBAL_FLAGS or v == "--exec-path":
            i += 1
        elif v.startswith("-"):
            f.mark(at, f"unknown git option {v}")
            i += 1
        else:
            break
    if i >= len(args):
        return
    sub, rest, base = args[i].value, args[i + 1 :], 2 + i
    if args[i].dynamic or sub in GIT_ALWAYS_CODE:
        f.mark(base - 1, f"git {sub} runs shell code")
    elif sub == "config":
        _git_config(rest, f, base)
    elif (spec := TABLE.get(f"git {sub}")) is not None:
        scan(spec, rest, f, base=base, label=f"git {sub}")
    if sub == "clone":
        for j, w in enumerate(rest):
            if w.value in ("-c", "--config") and j + 1 < len(rest):
                _git_pair(f, rest[j + 1], base + j + 1)
            elif w.value.startswith("--config="):
                _git_pair(f, Word(w.value[len("--config="):], w.dynamic), base + j)


def _find(args: list[Word], f: Finding) -> None:
    starts = []
    for w in args:
        if w.value.startswith("-") or w.value in ("(", "!"):
            break
        starts.append(w.value)
    if any(w.value == "-delete" for w in args):
        f.synthetic.append(("rm", "-r", "-f", "--", *(starts or ["."])))


def _script(args: list[Word], f: Finding) -> None:
    i, command = 0, False
    while i < len(args):
        v = args[i].value
        if v in ("-c", "--command", "-E", "--echo", "-m", "--logging-format", "-O", "--log-out", "-T",
                 "--log-timing", "-I", "--log-in", "-B", "--log-io"):
            command = command or v in ("-c", "--command")
            i += 2
            continue
        command = command or v.startswith(("--command=", "-c"))
        if not v.startswith("-"):
            f.writes.append(None if args[i].dynamic else v)
        i += 1
    if not command:
        f.mark(0, "script starts a shell that reads commands from stdin")


def _systemd_run(args: list[Word], f: Finding) -> None:
    for i, w in enumerate(args):
        value = args[i + 1].value if w.value in ("-p", "--property") and i + 1 < len(args) else (
            w.value.partition("=")[2] if w.value.startswith("--property=") else w.value[2:] if w.value.startswith(
                "-p") else "")
        if value.startswith("Exec") or w.value in ("-S", "--shell"):
            f.mark(1 + i + (w.value in ("-p", "--property")), "systemd-run runs a command from a property or a shell")


def inspect(name: str, args: list[Word]) -> Finding:
    """What ``name args…`` runs or writes besides itself (see :mod:`.code_options`)."""
    f = Finding()
    if name in ALWAYS_CODE:
        f.mark(0, f"{name} runs commands the rules cannot see")
        return f
    if name in _ASSIGNERS:
        _assignments(args, f)
    if name == "git":
        _git(args, f)
        return f
    subs = SUBCOMMAND_CODE.get(name)
    if subs is not None:
        first = next((i for i, w in enumerate(args) if not w.value.startswith("-")), None)
        if first is not None and (args[first].value in subs or args[first].dynamic):
            f.mark(1 + first, f"{name} {args[first].value} runs a command elsewhere")
    special = {"tee": _tee, "dd": _dd, "sed": _sed, "find": _find, "script": _script, "systemd-run": _systemd_run,
               "ssh": _ssh_options, "scp": _ssh_options, "sftp": _ssh_options}.get(name)
    if special is not None:
        special(args, f)
    if name in _AWKS:
        _awk(args, f)
    if name in _PLUS_COMMANDS:  # `vi +'!rm x'`, `less '+!rm x'`: startup commands
        for i, w in enumerate(args):
            body = w.value[1:]
            if w.value.startswith("+") and body and not body.isdigit() and (
                    name not in ("less", "more") or w.dynamic or any(c in body for c in "!|svE")):
                f.mark(1 + i, f"{name} {w.value[:20]} runs a startup command")
    spec = TABLE.get("python3" if _PYTHON.fullmatch(name) else name)
    if spec is not None:
        operand = scan(spec, args, f, base=1, label=name)
        if spec.stdin_code and not operand and f.code is None:
            f.mark(0, f"{name} reads code from stdin")
    return f


__all__ = ["inspect", "scan"]
