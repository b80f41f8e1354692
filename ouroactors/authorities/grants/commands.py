"""Split a shell command into the simple commands it would run, so rules judge each of them.

A rule such as ``deny:Bash(rm *)`` is worthless if ``ls && rm -rf /``, ``bash -c 'rm x'`` or
``sudo rm x`` slip past it — the bypasses users of real harnesses keep finding. So
:func:`segments` returns every simple command the shell would start: it splits on ``&&`` ``||``
``;`` ``|`` ``|&`` ``&`` and newlines, recurses into ``$(…)``, backticks, ``<(…)``/``>(…)``,
subshells ``( … )`` and groups ``{ …; }``, and unwraps wrappers so rules see the real program:
``bash|sh|zsh|… -c STR`` and ``sh <<< STR``, ``eval``, ``watch``, ``su|runuser|flock|script … -c
STR`` (STR parsed again), ``env``, ``xargs``, ``sudo``, ``doas``, ``chroot``, ``nohup``, ``time``,
``nice``, ``ionice``, ``taskset``, ``timeout``, ``exec``, ``command``, ``builtin``, ``stdbuf``,
``setsid``, ``busybox``, ``flock``, ``strace``, ``ltrace``, ``unshare``, ``prlimit``,
``systemd-run``, ``parallel … :::``, ``ssh HOST CMD…`` (the table is :mod:`.wrappers`), leading
``VAR=value`` words and ``find … -exec CMD ;``. The program name is normalised to its basename
(``/usr/bin/rm`` → ``rm``). Every form is also looked up in :mod:`.code_options` (through
:mod:`.code_findings`): what an option runs (``git -c core.pager=CMD``, ``git rebase --exec
CMD``, ``GIT_PAGER=CMD``, ``find -delete`` as ``rm``) becomes a segment of its own, the form gets
a *code* mark (only an allow that names the option covers it), and the files it writes — output
redirections, ``tee``, ``--output``-style options — are collected in
:attr:`Segmentation.writes` for the path rules.

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

Known limits (rules are not a sandbox): a script file's content (``sh x.sh``, ``python3 x.py``,
``make``), programs that run commands but are in neither table, writes by a program's operands
(``cp a /etc/x``: the allow of ``cp`` vouches for them), a copied or renamed binary, and arguments
computed at run time are not seen. A shell or interpreter reading stdin (``… | sh``) and the
wrappers the segmenter does not parse (``bwrap``, ``tmux`` …) carry a code mark instead.
``$(( … ))`` is arithmetic; ``(( … ))`` is read as subshells.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from .code_findings import inspect
from .code_options import SHELLS, Finding
from .shell import MAX_DEPTH, Parser, TooDeep, Unparseable, Word
from .wrappers import ASSIGN as _ASSIGN
from .wrappers import WRAPPERS, command_option, strip

MAX_SEGMENTS = 512
TRUSTED_BIN_DIRS = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"})


@dataclass(frozen=True)
class Form:
    """One layer of a segment: its argv (program normalised), the program word as written, the
    taint (``privilege``, ``env``, ``xargs``, ``find``, ``code`` …) of unwrapping it further, if
    any, and — when it runs code through an option (:mod:`.code_options`) — the argv index an allow
    must spell literally (``code``) and why."""

    argv: tuple[str, ...]
    invoked: str
    taint: str | None = None
    code: int | None = None
    why: str | None = None


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
    writes: tuple[str | None, ...] = ()  # files the command writes (redirections, -o …); None: named at run time
    changes_dir: bool = False  # a part runs in another directory (cd, env -C, git -C …): relative writes are unknown

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
    writes: list[str | None] = field(default_factory=list)
    changes_dir: bool = False

    def add(self, seg: Segment) -> None:
        if len(self.found) >= MAX_SEGMENTS:
            raise TooDeep()
        self.found.append(seg)

    def parse(self, text: str, depth: int) -> None:
        def on_command(words: list[Word], redirs: tuple[Word, ...], d: int) -> None:
            self.writes.extend(_written(redirs))
            _unwrap(self, d, words, redirs, ())

        Parser(text, on_command, depth).parse()

    def merge(self, sub: _Context, outer: tuple[Form, ...]) -> None:
        self.writes.extend(sub.writes)
        self.changes_dir = self.changes_dir or sub.changes_dir
        for seg in sub.found:
            self.add(Segment((*outer, *seg.forms)))

    def result(self, truncated: bool = False, unparseable: str | None = None) -> Segmentation:
        found = tuple(self.found)
        return Segmentation(tuple(s.argv for s in found), truncated, unparseable, found, tuple(self.writes),
                            self.changes_dir)


_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})


def _written(redirs: tuple[Word, ...]) -> list[str | None]:
    """The files output redirections write (``>&2`` and ``>&-`` duplicate or close a descriptor)."""
    out = list[str | None]()
    for op, target in zip(redirs[::2], redirs[1::2], strict=False):
        kind = op.value.lstrip("0123456789")
        if kind in _WRITE_OPS or (kind == ">&" and not (target.value.isdigit() or target.value == "-")):
            out.append(None if target.dynamic else target.value)
    return out


_CHDIR = frozenset({"cd", "pushd", "popd"})
_CHDIR_OPTIONS = {"env": ("-C", "--chdir"), "sudo": ("-D", "--chdir"), "unshare": ("-w", "--wd"),
                  "git": ("-C", "--work-tree", "--git-dir"), "systemd-run": ("--working-directory",),
                  "make": ("-C", "--directory"), "tar": ("-C", "--directory"), "parallel": ("--workdir",)}
_KEYWORDS = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "coproc"})


def _joined(words: list[Word]) -> Word:
    dynamic = any(w.dynamic for w in words)
    return Word(" ".join(w.value for w in words), dynamic, hole=dynamic and all(w.hole for w in words if w.dynamic))


def _shell_string(name: str, args: list[Word]) -> tuple[Word | None, bool]:
    """``(the -c command string, reads stdin)`` of a shell invocation: (None, False) runs a script file."""
    has_c, stdin, i = False, False, 0
    while i < len(args) and args[i].value.startswith(("-", "+")) and args[i].value not in ("-", "--", "+"):
        v = args[i].value
        if args[i].dynamic:
            raise Unparseable(f"{name}: option {v!r} is computed at run time")
        if v in ("--rcfile", "--init-file"):
            i += 1
        elif not v.startswith("--"):
            has_c = has_c or "c" in v
            stdin = stdin or "s" in v
            i += sum(ch in "oO" for ch in v)
        i += 1
    if i < len(args) and args[i].value in ("-", "--"):
        i += 1
    if not has_c:
        return None, stdin or i >= len(args)
    if i >= len(args):
        raise Unparseable(f"{name} -c without a command string")
    return args[i], False


def _here_string(redirs: tuple[Word, ...]) -> Word | None:
    return next((t for op, t in zip(redirs[::2], redirs[1::2], strict=False) if op.value.endswith("<<<")), None)


def _judge_inner(ctx: _Context, depth: int, found: Finding, outer: tuple[Form, ...]) -> None:
    """Judge what a form runs through its options (:mod:`.code_options`) as segments of their own,
    reached through ``outer`` (whose last form is tainted ``code``: an allow of the inner command
    does not vouch for the option that runs it)."""
    for command in found.commands:
        sub = _Context()
        try:
            sub.parse(command.value, depth + 1)
        finally:
            ctx.merge(sub, outer)
    for words in found.argvs:
        _unwrap(ctx, depth + 1, list(words), (), outer)
    for argv in found.synthetic:
        ctx.add(Segment((*outer, Form(argv, argv[0]))))


def _unwrap(ctx: _Context, depth: int, words: list[Word], redirs: tuple[Word, ...], outer: tuple[Form, ...]) -> None:
    """Emit the segment(s) of one simple command, unwrapping wrappers; ``outer`` holds the forms so far."""
    if depth > MAX_DEPTH:
        raise TooDeep()
    while words and (words[0].value in _KEYWORDS or words[0].value == "function"):
        del words[: 2 if words[0].value == "function" else 1]
    if not words or words[0].value in ("for", "select"):  # a loop header's words are data
        return
    if words[0].value == "case":
        raise Unparseable("case statements are not parsed")
    tail = tuple(r.value for r in redirs)
    n = 0
    while n < len(words) and _ASSIGN.match(words[n].value):
        n += 1
    if n:  # assignments alone run nothing (their substitutions were parsed already) unless they name code
        found = inspect("export", words[:n])
        assignment = Form((words[0].value, *(w.value for w in words[1:]), *tail), words[0].value, "env",
                          None if found.code is None else found.code - 1, found.why)
        _judge_inner(ctx, depth, found, (*outer, Form(assignment.argv, assignment.invoked, "code")))
        if n < len(words):  # the rest is unwrapped again: keywords after assignments are stripped too
            _unwrap(ctx, depth + 1, words[n:], redirs, (*outer, assignment))
        elif found.code is not None:
            ctx.add(Segment((*outer, assignment)))
        return
    prog = words[0]
    if prog.dynamic:
        raise Unparseable(f"program name {prog.value!r} is computed at run time")
    name = program_name(prog.value)
    argv = (name, *(w.value for w in words[1:]), *tail)
    found = inspect(name, words[1:])
    ctx.writes.extend(found.writes)
    ctx.changes_dir = ctx.changes_dir or name in _CHDIR or any(
        w.value.split("=", 1)[0] in _CHDIR_OPTIONS.get(name, ()) for w in words[1:])
    _judge_inner(ctx, depth, found, (*outer, Form(argv, prog.value, "code", found.code, found.why)))
    form = Form(argv, prog.value, None, found.code, found.why)
    script: Word | None = None
    if name in WRAPPERS:
        spec = WRAPPERS[name]
        script = command_option(name, spec, words[1:]) if spec.command_opt else None
        rest, assigned = list[Word](), False
        if script is None and not spec.opaque:
            options, rest, assigned = strip(name, spec, words[1:])
            if spec.until:
                rest = rest[: next((i for i, w in enumerate(rest) if w.value in spec.until), len(rest))]
            if spec.taint == "xargs":
                rest = _holes(rest, _replacement(options))
        if rest or (spec.default and script is None and not spec.opaque):
            taint = spec.taint or ("env" if assigned else None)
            inner = rest or [Word(p) for p in spec.default]
            # parallel's first word may be a whole line (`parallel 'echo {}' ::: a`): judged as a line only
            if not (rest and spec.until and any(c in rest[0].value for c in " \t\n;|&")):
                _unwrap(ctx, depth + 1, list(inner), redirs, (*outer, Form(argv, prog.value, taint, found.code,
                                                                              found.why)))
            if not (rest and spec.joins):
                return
            script = _joined(rest)  # watch runs `sh -c "ARGS…"` (or, with -x, ARGS): judge both readings
        elif script is None and spec.stdin_shell and found.code is None:
            found.mark(0, f"{name} starts a shell that reads commands from stdin")
        form = Form(argv, prog.value, spec.taint, found.code, found.why)
    elif name == "eval":
        script = _joined(words[1:])
    elif name in SHELLS:
        script, stdin = _shell_string(name, words[1:])
        here = _here_string(redirs) if script is None and stdin else None
        if here is not None:
            script = here  # `sh <<< STR` runs STR: judge it like `sh -c STR`
        elif stdin:
            form = Form(argv, prog.value, None, 0, f"{name} reads commands from stdin")
    if script is not None:
        if script.dynamic and not script.hole:
            raise Unparseable(f"{name}: the command string is computed at run time")
        if redirs:  # the redirection applies to the shell: let rules see it
            ctx.add(Segment((*outer, form)))
        sub = _Context()
        try:
            sub.parse(script.value, depth + 1)
        finally:
            ctx.merge(sub, (*outer, form))
        if script.hole:  # parsed so a deny bites; but the text filled in can be any shell code: ask
            raise Unparseable(f"{name}: the command string is filled in at run time (a placeholder)")
        return
    ctx.add(Segment((*outer, form)))
    if name == "find":
        _find_exec(ctx, depth, words, redirs, (*outer, Form(argv, prog.value, "find", found.code, found.why)))


_PLACEHOLDER = re.compile(r"\{[^{}\s]*\}")  # {} (find, xargs -i), {.} {/} {1} … (parallel)


def _replacement(options: list[Word]) -> str | None:
    """xargs's ``-I R`` / ``-IR`` / ``--replace[=R]`` / ``-i[R]`` replacement string, if any."""
    for i, w in enumerate(options):
        v = w.value
        if v == "-I" and i + 1 < len(options):
            return options[i + 1].value
        if v.startswith("-I") and len(v) > 2:
            return v[2:]
        if v.startswith("--replace") or (v.startswith("-i") and not v.startswith("--")):
            return v.partition("=")[2] if v.startswith("--replace=") else (v[2:] if v.startswith("-i") and v[2:]
                                                                           else "{}")
    return None


def _holes(words: list[Word], replacement: str | None) -> list[Word]:
    """Words the wrapper fills in at run time (``{}`` of find/xargs/parallel, xargs's ``-I R``) are
    dynamic: ``xargs -I{} sh -c '{}'`` runs whatever arrives on stdin, and ``find -exec {} ;`` runs
    whatever file it finds. The placeholder becomes the variable ``$__HOLE``: a program named by one
    is computed at run time (ask); a shell string holding one is parsed (``sh -c 'rm {}'`` is
    ``rm $__HOLE``: a deny of rm bites) and then asks, since the text filled in may be any code."""
    def fill(text: str) -> str:
        text = _PLACEHOLDER.sub("$__HOLE", text)
        return text.replace(replacement, "$__HOLE") if replacement else text

    out = list[Word]()
    for w in words:
        value = fill(w.value)
        out.append(w if value == w.value else Word(value, True, w.quoted, w.plain, hole=not w.dynamic or w.hole))
    return out


def _find_exec(ctx: _Context, depth: int, words: list[Word], redirs: tuple[Word, ...], outer: tuple[Form, ...]) -> None:
    i = 1
    while i < len(words):
        if words[i].value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((j for j in range(i + 1, len(words)) if words[j].value in (";", "+")), None)
            if end is None:
                raise Unparseable(f"find {words[i].value} without ';' or '+'")
            if end > i + 1:
                _unwrap(ctx, depth + 1, _holes(words[i + 1 : end], None), (), outer)
            i = end
        i += 1


__all__ = ["MAX_DEPTH", "MAX_SEGMENTS", "TRUSTED_BIN_DIRS", "Form", "Segment", "Segmentation", "program_name",
           "segments", "trusted_program"]
