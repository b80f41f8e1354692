"""Split a shell command into the simple commands it would run, so rules judge each of them.

A rule such as ``deny:Bash(rm *)`` is worthless if ``ls && rm -rf /``, ``bash -c 'rm x'`` or
``sudo rm x`` slip past it — the bypasses users of real harnesses keep finding. So
:func:`segments` returns every simple command the shell would start: it splits on ``&&`` ``||``
``;`` ``|`` ``|&`` ``&`` and newlines, recurses into ``$(…)``, backticks, ``<(…)``/``>(…)``,
subshells ``( … )`` and groups ``{ …; }``, and unwraps wrappers so rules see the real program:
``bash|sh|zsh|… -c STR``, ``eval``, ``watch``, ``su|runuser|flock … -c STR`` (STR parsed again),
``env``, ``xargs``, ``sudo``, ``doas``, ``chroot``, ``nohup``, ``time``, ``nice``, ``ionice``,
``taskset``, ``timeout``, ``exec``, ``command``, ``builtin``, ``stdbuf``, ``setsid``, ``busybox``,
``flock``, leading ``VAR=value`` words and ``find … -exec CMD ;``. The program name is
normalised to its basename (``/usr/bin/rm`` → ``rm``).

**Why not only shlex.** ``shlex`` (posix) gives the right words for plain quoting — and this lexer
removes quotes by the same rules (``r''m`` → ``rm``; a test checks they agree with ``shlex.split``)
— but it does not see command substitution inside double quotes, backticks, ``$'…'`` (decoded
here), process substitution, redirections, or which characters were quoted (an unquoted ``*`` in a
program name is a glob). So the lexer is hand-written.

**Fail closed.** Whatever is not understood makes the result *unparseable* (the caller must ask,
never allow): unbalanced quotes or parentheses, heredocs, ``case``, unknown options of a wrapper
(they might take the program as their value; ``env -S`` is one), a program name or wrapper
argument computed at run time (``$X``, ``$(…)``, globs, brace expansion), and a ``-c``/``eval``
string the outer shell expands (``bash -c "ls $X"`` re-parses whatever ``$X`` holds). A command
longer than ``max_len``, nested deeper than ``MAX_DEPTH`` or with more than ``MAX_SEGMENTS`` parts
is *truncated* (ask). Segments found before the point of failure are still returned, so a deny
can still answer.

**Forms and taints.** Each :class:`Segment` keeps every form it had while being unwrapped, outer
first (``sudo -u r git status`` → ``sudo -u r git status``, then ``git status``). Deny and ask
rules match any form. Some wrappers change what the inner program does — ``sudo``, ``doas``,
``su``, ``runuser``, ``chroot`` (taint ``privilege``), ``VAR=value`` (``env``: ``LD_PRELOAD``,
``GIT_SSH_COMMAND``…), ``xargs`` and ``find -exec`` (arguments come from elsewhere) — and mark the
form *tainted*: an allow of an inner form does not vouch for it; only an allow of the form as
written (``Bash(sudo apt *)``) does. Redirections are kept at the end of each form's argv
(``git status > f`` → ``('git', 'status', '>', 'f')``), so an exact allow does not cover a
redirected command. A backslash-escaped space stays inside the word: ``rm\\ x`` runs a program
literally named ``rm x``, which is what the segment says.

Known limits (rules are not a sandbox): an interpreter fed by stdin, a here-string or a script
(``… | sh``, ``sh <<< STR``, ``python -c``), programs that run commands but are not in the wrapper
table (``ssh``, ``parallel``, ``git -c alias…``), a copied or renamed binary, and arguments
computed at run time are not seen. ``$(( … ))`` is arithmetic; ``(( … ))`` is read as subshells.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from .shell import MAX_DEPTH, Parser, TooDeep, Unparseable, Word

MAX_SEGMENTS = 512
TRUSTED_BIN_DIRS = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"})


@dataclass(frozen=True)
class Form:
    """One layer of a segment: its argv (program normalised), the program word as written, and the
    taint (``privilege``, ``env``, ``xargs``, ``find``) of unwrapping it further, if any."""

    argv: tuple[str, ...]
    invoked: str
    taint: str | None = None


@dataclass(frozen=True)
class Segment:
    forms: tuple[Form, ...]  # outermost first; the last is what actually runs

    @property
    def argv(self) -> tuple[str, ...]:
        return self.forms[-1].argv


@dataclass(frozen=True)
class Segmentation:
    segments: tuple[tuple[str, ...], ...]  # argv of each simple command, after unwrapping
    truncated: bool = False
    unparseable: str | None = None
    details: tuple[Segment, ...] = ()  # the same segments with their forms

    @property
    def complete(self) -> bool:
        return not self.truncated and self.unparseable is None


def program_name(word: str) -> str:
    base = word.rstrip("/").rsplit("/", 1)[-1]
    return base or word


def trusted_program(invoked: str) -> bool:
    """True when the program is looked up on PATH or named in a system bin directory."""
    return "/" not in invoked or posixpath.dirname(posixpath.normpath(invoked)) in TRUSTED_BIN_DIRS


def segments(command: str, *, max_len: int = 4096) -> Segmentation:
    """Every simple command ``command`` would run; see the module docstring."""
    if len(command) > max_len:
        return Segmentation((), truncated=True)
    ctx = _Context()
    try:
        ctx.parse(command, 0)
    except TooDeep:
        return ctx.result(truncated=True)
    except Unparseable as e:
        return ctx.result(unparseable=str(e))
    except (RecursionError, ValueError, OverflowError) as e:
        return ctx.result(unparseable=f"{type(e).__name__}: {e}")
    return ctx.result()


@dataclass
class _Context:
    found: list[Segment] = field(default_factory=list)

    def add(self, seg: Segment) -> None:
        if len(self.found) >= MAX_SEGMENTS:
            raise TooDeep()
        self.found.append(seg)

    def parse(self, text: str, depth: int) -> None:
        Parser(text, lambda words, redirs, d: _unwrap(self, d, words, redirs, ()), depth).parse()

    def result(self, truncated: bool = False, unparseable: str | None = None) -> Segmentation:
        found = tuple(self.found)
        return Segmentation(tuple(s.argv for s in found), truncated, unparseable, found)


_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_KEYWORDS = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "coproc"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"})


@dataclass(frozen=True)
class _Opts:
    """A wrapper's option grammar; anything else is unparseable (it might consume the program)."""

    flags: str = ""  # short options without a value
    valued: str = ""  # short options with a value (attached or the next word)
    optional: str = ""  # short options with an optional attached value
    long_flags: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    operands: int = 0  # operands before the program (timeout's DURATION)
    assignments: bool = False  # NAME=value words before the program
    numeric: bool = False  # `-N` (nice)
    taint: str | None = None
    default: tuple[str, ...] = ()  # what runs when no program is named
    joins: bool = False  # the words are also joined into one shell line and parsed again (watch)
    command_opt: bool = False  # `-c CMD` / `--command=CMD` anywhere is a shell string (su, flock)
    opaque: bool = False  # without -c, do not unwrap (`su root` names a user, not a program)


def _fs(*names: str) -> frozenset[str]:
    return frozenset(names)


_WRAPPERS: dict[str, _Opts] = {
    "env": _Opts("i0v-", "uC", long_flags=_fs("ignore-environment", "null", "debug", "block-signal",
                 "default-signal", "ignore-signal", "list-signal-handling"),
                 long_valued=_fs("unset", "chdir"), assignments=True),  # -S is not parsed: unparseable
    "sudo": _Opts("AbEHiknPSsVB", "ughpCDrtTUR", long_flags=_fs("askpass", "background", "preserve-env", "set-home",
                  "login", "non-interactive", "preserve-groups", "stdin", "shell", "bell", "reset-timestamp"),
                  long_valued=_fs("user", "group", "host", "prompt", "close-from", "chdir", "role", "type",
                                  "command-timeout", "other-user", "chroot"), assignments=True, taint="privilege"),
    "doas": _Opts("ns", "uC", taint="privilege"),
    "xargs": _Opts("0rtpxo", "adEILnPs", "eil", _fs("null", "no-run-if-empty", "verbose", "interactive", "exit",
                   "open-tty", "max-lines", "replace", "eof"),
                   _fs("arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"),
                   taint="xargs", default=("echo",)),
    "nohup": _Opts(),
    "time": _Opts("pvqa", "fo", long_flags=_fs("portability", "verbose", "quiet", "append"),
                  long_valued=_fs("format", "output")),
    "nice": _Opts("", "n", long_valued=_fs("adjustment"), numeric=True),
    "timeout": _Opts("v", "ks", long_flags=_fs("preserve-status", "foreground", "verbose"),
                     long_valued=_fs("kill-after", "signal"), operands=1),
    "exec": _Opts("cl", "a"),
    "command": _Opts("pvV"),
    "builtin": _Opts(),
    "stdbuf": _Opts("", "ioe", long_valued=_fs("input", "output", "error")),
    "setsid": _Opts("cfw", long_flags=_fs("ctty", "fork", "wait")),
    "busybox": _Opts(),
    "ionice": _Opts("t", "cnpPu", long_flags=_fs("ignore"),
                    long_valued=_fs("class", "classdata", "pid", "pgid", "uid")),
    "taskset": _Opts("ac", long_flags=_fs("all-tasks", "cpu-list"), operands=1),
    "chroot": _Opts(long_flags=_fs("skip-chdir"), long_valued=_fs("userspec", "groups"), operands=1, taint="privilege"),
    "flock": _Opts("sxnuoFv", "wE", long_flags=_fs("shared", "exclusive", "nonblock", "unlock", "close", "verbose"),
                   long_valued=_fs("timeout", "conflict-exit-code"), operands=1, command_opt=True),
    "watch": _Opts("bcCegptwx", "n", "d", _fs("beep", "color", "no-color", "errexit", "chgexit", "precise", "no-title",
                   "no-wrap", "exec", "differences"), _fs("interval"), joins=True),
    "su": _Opts("lmpfP-", "sgGw", long_valued=_fs("shell", "group", "supp-group", "whitelist-environment"),
                taint="privilege", command_opt=True, opaque=True),  # `su root` names a user, not a program
    "runuser": _Opts("lmpfP-", "ugGsw", long_flags=_fs("login", "preserve-environment", "pty"),
                     long_valued=_fs("user", "group", "supp-group", "shell", "whitelist-environment"),
                     taint="privilege", command_opt=True),
}


def _joined(words: list[Word]) -> Word:
    return Word(" ".join(w.value for w in words), any(w.dynamic for w in words))


def _command_option(name: str, spec: _Opts, args: list[Word]) -> Word | None:
    """The value of ``-c CMD`` / ``-lc CMD`` / ``--command[=]CMD`` among the options and first operand
    of ``args`` (``su root -c CMD``, ``flock FILE -c CMD``), if any. ``runuser -u`` runs a program."""
    i, operands = 0, 0
    while i < len(args) and operands < 2:
        w, v = args[i], args[i].value
        if w.dynamic:
            raise Unparseable(f"{name}: argument {v!r} is computed at run time")
        if v == "--":
            return None
        if v.startswith("--"):
            key, eq, value = v[2:].partition("=")
            if key == "command":
                if eq:
                    return Word(value, w.dynamic)
                if i + 1 >= len(args):
                    raise Unparseable(f"{name} --command without a command string")
                return args[i + 1]
            if name == "runuser" and key == "user":
                return None
            i += key in spec.long_valued and not eq
        elif v.startswith("-") and v != "-":
            for j, ch in enumerate(v[1:], 1):
                if ch not in spec.flags and ch not in spec.valued and ch != "c":
                    raise Unparseable(f"{name}: unknown option {v!r}")
                if ch == "u" and name == "runuser":
                    return None
                if ch == "c" and j < len(v) - 1:
                    return Word(v[j + 1 :], w.dynamic)
                if ch == "c":
                    if i + 1 >= len(args):
                        raise Unparseable(f"{name} -c without a command string")
                    return args[i + 1]
                if ch in spec.valued:
                    i += j == len(v) - 1
                    break
        else:
            operands += v != "-"
        i += 1
    return None


def _strip(name: str, spec: _Opts, args: list[Word]) -> tuple[list[Word], list[Word], bool]:
    """Split a wrapper's arguments into (its options, the wrapped command, assignments seen)."""
    i, operands, options, assigned, value_next = 0, spec.operands, True, False, False
    while i < len(args):
        w, v = args[i], args[i].value
        if w.dynamic:  # even as an option's value: `-u $EMPTY rm x` would run `x`
            raise Unparseable(f"{name}: argument {v!r} is computed at run time")
        if value_next:
            value_next = False
        elif options and v == "--":
            options = False
        elif options and spec.assignments and _ASSIGN.match(v):
            assigned = True
        elif options and ((v == "-" and "-" in spec.flags) or (spec.numeric and re.fullmatch(r"-\d+", v))):
            pass
        elif options and v.startswith("--"):
            key, eq, _ = v[2:].partition("=")
            if key not in spec.long_valued | spec.long_flags:
                raise Unparseable(f"{name}: unknown option {v!r}")
            value_next = key in spec.long_valued and not eq
        elif options and v.startswith("-") and len(v) > 1:
            for j, ch in enumerate(v[1:], 1):
                if ch in spec.optional:
                    break
                if ch in spec.valued:
                    value_next = j == len(v) - 1  # the value is the next word unless attached
                    break
                if ch not in spec.flags:
                    raise Unparseable(f"{name}: unknown option {v!r}")
        elif operands:
            operands -= 1
        else:
            break
        i += 1
    return args[:i], args[i:], assigned


def _shell_string(name: str, args: list[Word]) -> Word | None:
    """The ``-c`` command string of a shell invocation, or None if it runs a script or stdin."""
    has_c, i = False, 0
    while i < len(args) and args[i].value.startswith(("-", "+")) and args[i].value not in ("-", "--", "+"):
        v = args[i].value
        if args[i].dynamic:
            raise Unparseable(f"{name}: option {v!r} is computed at run time")
        if v in ("--rcfile", "--init-file"):
            i += 1
        elif not v.startswith("--"):
            has_c = has_c or "c" in v
            i += sum(ch in "oO" for ch in v)
        i += 1
    if i < len(args) and args[i].value in ("-", "--"):
        i += 1
    if not has_c:
        return None
    if i >= len(args):
        raise Unparseable(f"{name} -c without a command string")
    return args[i]


def _unwrap(ctx: _Context, depth: int, words: list[Word], redirs: tuple[str, ...], outer: tuple[Form, ...]) -> None:
    """Emit the segment(s) of one simple command, unwrapping wrappers; ``outer`` holds the forms so far."""
    if depth > MAX_DEPTH:
        raise TooDeep()
    while words and (words[0].value in _KEYWORDS or words[0].value == "function"):
        del words[: 2 if words[0].value == "function" else 1]
    if not words or words[0].value in ("for", "select"):  # a loop header's words are data
        return
    if words[0].value == "case":
        raise Unparseable("case statements are not parsed")
    n = 0
    while n < len(words) and _ASSIGN.match(words[n].value):
        n += 1
    if n:  # with nothing after them, assignments run nothing (their substitutions were parsed already)
        if n < len(words):  # the rest is unwrapped again: keywords after assignments are stripped too
            assignment = Form((words[0].value, *(w.value for w in words[1:]), *redirs), words[0].value, "env")
            _unwrap(ctx, depth + 1, words[n:], redirs, (*outer, assignment))
        return
    prog = words[0]
    if prog.dynamic:
        raise Unparseable(f"program name {prog.value!r} is computed at run time")
    name = program_name(prog.value)
    argv = (name, *(w.value for w in words[1:]), *redirs)
    form = Form(argv, prog.value)
    script: Word | None = None
    if name in _WRAPPERS:
        spec = _WRAPPERS[name]
        script = _command_option(name, spec, words[1:]) if spec.command_opt else None
        rest, assigned = list[Word](), False
        if script is None and not spec.opaque:
            _, rest, assigned = _strip(name, spec, words[1:])
        if rest or (spec.default and script is None and not spec.opaque):
            taint = spec.taint or ("env" if assigned else None)
            inner = rest or [Word(p) for p in spec.default]
            _unwrap(ctx, depth + 1, list(inner), redirs, (*outer, Form(argv, prog.value, taint)))
            if not (rest and spec.joins):
                return
            script = _joined(rest)  # watch runs `sh -c "ARGS…"` (or, with -x, ARGS): judge both readings
        form = Form(argv, prog.value, spec.taint)
    elif name == "eval":
        script = _joined(words[1:])
    elif name in _SHELLS:
        script = _shell_string(name, words[1:])
    if script is not None:
        if script.dynamic:
            raise Unparseable(f"{name}: the command string is computed at run time")
        if redirs:  # the redirection applies to the shell: let rules see it
            ctx.add(Segment((*outer, form)))
        sub = _Context()
        try:
            sub.parse(script.value, depth + 1)
        finally:
            for seg in sub.found:
                ctx.add(Segment((*outer, form, *seg.forms)))
        return
    ctx.add(Segment((*outer, form)))
    if name == "find":
        _find_exec(ctx, depth, words, redirs, (*outer, Form(argv, prog.value, "find")))


def _find_exec(ctx: _Context, depth: int, words: list[Word], redirs: tuple[str, ...], outer: tuple[Form, ...]) -> None:
    i = 1
    while i < len(words):
        if words[i].value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((j for j in range(i + 1, len(words)) if words[j].value in (";", "+")), None)
            if end is None:
                raise Unparseable(f"find {words[i].value} without ';' or '+'")
            if end > i + 1:
                _unwrap(ctx, depth + 1, words[i + 1 : end], (), outer)
            i = end
        i += 1


__all__ = ["MAX_DEPTH", "MAX_SEGMENTS", "TRUSTED_BIN_DIRS", "Form", "Segment", "Segmentation", "program_name",
           "segments", "trusted_program"]
