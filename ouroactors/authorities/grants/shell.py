"""The shell lexer behind :mod:`.commands`: syntax only, no knowledge of programs or wrappers.

:class:`Parser` walks one command string the way a POSIX shell (bash) reads it and hands every
finished *simple command* — its words after quote removal, and its redirections — to a callback.
It splits lists and pipelines (``&&`` ``||`` ``;`` ``|`` ``|&`` ``&`` newline), treats ``(`` and
``)`` as subshell boundaries, and parses the bodies of ``$(…)``, backticks and ``<(…)``/``>(…)`` as
commands of their own, wherever they appear (unquoted, inside double quotes, inside ``${…}``).

Each :class:`Word` records whether the *outer* shell would expand something in it (a variable,
a substitution, an unquoted glob, brace or leading tilde expansion): such a word is ``dynamic``
and its text is kept raw. Quoting follows POSIX: single quotes are literal; in double quotes a backslash escapes
only ``$ ` " \\`` and newline; ``$'…'`` escapes are decoded; ``$"…"`` is a double-quoted string.

What it does not parse raises :class:`Unparseable` (heredocs, unbalanced quotes or parentheses,
``;;``, a command substitution inside arithmetic); nesting deeper than ``MAX_DEPTH`` raises
:class:`TooDeep`. ``$(( … ))`` is arithmetic and runs nothing (bash and dash agree) — unless its
parentheses do not close as ``))``, where bash reads a substitution of a subshell, and so does this
lexer. The arithmetic *command* ``(( … ))`` is read as nested subshells: bash would evaluate
arithmetic, but dash (``/bin/sh`` on Debian) runs ``((rm x))`` as ``( (rm x) )`` — the stricter
reading wins.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

MAX_DEPTH = 24


class Unparseable(Exception):
    """The command uses syntax this lexer does not understand; the caller must ask."""


class TooDeep(Exception):
    """Nested deeper (or split into more parts) than the limits allow; the caller must ask."""


@dataclass
class Word:
    value: str = ""
    dynamic: bool = False  # the outer shell expands something in it (variable, substitution, glob, brace)
    quoted: bool = False
    plain: str = ""  # its unquoted characters (for glob / brace detection)
    hole: bool = False  # dynamic only through a placeholder a wrapper fills ($__HOLE): parse it, the hole is a variable


# (words, redirections as operator/target word pairs flattened, depth): the operator word's value is
# the operator (``2>``, ``>>``, ``<<<`` …), the target word keeps whether it is computed at run time
OnCommand = Callable[[list[Word], tuple[Word, ...], int], None]

_META = frozenset(" \t\n;&|()<>")
_BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_VAR_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")
_ANSI = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S)
_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_char(m: re.Match[str]) -> str:
    e = m.group(1)
    if e[0] in "xuU" and len(e) > 1:
        return chr(int(e[1:], 16))
    if e[0] in "01234567":
        return chr(int(e, 8) & 0xFF)
    if e[0] == "c" and len(e) == 2:
        return chr(ord(e[1]) & 0x1F)
    return _ANSI_SIMPLE.get(e, "\\" + e)


class Parser:
    """A recursive-descent scanner over one string; each finished simple command goes to ``on_command``."""

    def __init__(self, text: str, on_command: OnCommand, depth: int = 0) -> None:
        if depth > MAX_DEPTH:
            raise TooDeep()
        self.s, self.i, self.on_command, self.depth = text, 0, on_command, depth

    def parse(self) -> None:
        self.parse_list(None)

    def _nested(self) -> None:  # parse a `$(…)` / `<(…)` body in place, up to its `)`
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TooDeep()
        try:
            self.parse_list(")")
        finally:
            self.depth -= 1

    def parse_list(self, closer: str | None) -> None:
        s, words, redirs, parens = self.s, list[Word](), list[Word](), 0

        def finish() -> None:
            if words or redirs:
                self.on_command(list(words), tuple(redirs), self.depth)
            words.clear()
            redirs.clear()

        while True:
            while self.i < len(s) and s[self.i] in " \t":
                self.i += 1
            if self.i >= len(s):
                if closer or parens:
                    raise Unparseable("unbalanced '('")
                finish()
                return
            c, nxt = s[self.i], s[self.i + 1 : self.i + 2]
            if c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            elif c in "\n;":
                if c == ";" and nxt in (";", "&"):
                    raise Unparseable("';;' outside a case statement")
                finish()
                self.i += 1
            elif c == "&" and nxt != ">":
                finish()
                self.i += 2 if nxt == "&" else 1
            elif c == "|":
                finish()
                self.i += 2 if nxt in ("|", "&") else 1
            elif c == "(":
                finish()
                parens += 1  # `((…))` too: dash runs `((rm x))` as nested subshells
                self.i += 1
            elif c == ")":
                finish()
                self.i += 1
                if parens:
                    parens -= 1
                elif closer == ")":
                    return
                else:
                    raise Unparseable("unbalanced ')'")
            elif c in "<>" and nxt == "(":  # process substitution
                start = self.i
                self.i += 2
                self._nested()
                words.append(Word(s[start : self.i], dynamic=True))
            elif c in "<>&":
                redirs.extend(self._redirect(""))
            else:
                word = self._word()
                if not (word.value or word.quoted or word.dynamic):
                    continue  # a line continuation
                if (self.i < len(s) and s[self.i] in "<>" and s[self.i + 1 : self.i + 2] != "("
                        and word.value.isdigit() and not word.quoted):
                    redirs.extend(self._redirect(word.value))
                else:
                    words.append(word)

    def _redirect(self, fd: str) -> list[Word]:
        s, start = self.s, self.i
        if s.startswith("<<<", start):
            self.i += 3
        elif s.startswith("<<", start):
            raise Unparseable("heredocs are not parsed")
        else:
            self.i += 1 + (s[start] == "&")
            if self.i < len(s) and s[self.i] in ">&|":
                self.i += 1
        op = fd + s[start : self.i]
        while self.i < len(s) and s[self.i] in " \t":
            self.i += 1
        if self.i >= len(s) or s[self.i] in _META:
            raise Unparseable(f"redirection {op!r} has no target")
        return [Word(op), self._word()]

    def _word(self) -> Word:
        s, w = self.s, Word()
        while self.i < len(s) and s[self.i] not in _META:
            c = s[self.i]
            if c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise Unparseable("unbalanced single quote")
                w.value += s[self.i + 1 : end]
                w.quoted, self.i = True, end + 1
            elif c == '"':
                w.quoted = True
                self.i += 1
                self._chars(w, '"')
            elif c == "\\":
                if self.i + 1 >= len(s):
                    raise Unparseable("trailing backslash")
                if s[self.i + 1] != "\n":  # backslash-newline is a line continuation
                    w.value += s[self.i + 1]
                    w.quoted = True
                self.i += 2
            elif c in "$`":
                self._expansion(w, quoted=False)
            else:
                w.value += c
                w.plain += c
                self.i += 1
        tilde = w.plain.startswith("~") and w.value.startswith("~")  # `~/x`, `~user/x`: the shell expands it
        if "*" in w.plain or "?" in w.plain or ("[" in w.plain and "]" in w.plain) or _BRACE.search(w.plain) or tilde:
            w.dynamic = True
        return w

    def _chars(self, w: Word, stop: str) -> None:
        """Double-quoted text (stop ``"``) or a ``${…}`` body (stop ``}``), up to and past ``stop``."""
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == stop:
                self.i += 1
                return
            if c == "\\" and s[self.i + 1 : self.i + 2] in ("$", "`", '"', "\\", "\n"):
                w.value += s[self.i + 1] if s[self.i + 1] != "\n" else ""
                self.i += 2
            elif c in "$`":
                self._expansion(w, quoted=True)
            elif c == "'" and stop == "}":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise Unparseable("unbalanced single quote")
                w.value += s[self.i : end + 1]
                self.i = end + 1
            elif c == '"' and stop == "}":
                self.i += 1
                self._chars(w, '"')
            else:
                w.value += c
                self.i += 1
        raise Unparseable(f"unbalanced {'double quote' if stop == chr(34) else '${'}")

    def _expansion(self, w: Word, *, quoted: bool) -> None:
        """``$…`` or a backtick at ``self.i``: substitutions are parsed too; the raw text is kept."""
        s, start = self.s, self.i
        nxt = s[start + 1 : start + 2]
        if s[start] == "`":
            end, body = start + 1, []
            while end < len(s) and s[end] != "`":
                if s[end] == "\\" and s[end + 1 : end + 2] in ("$", "`", "\\"):
                    end += 1
                body.append(s[end : end + 1])
                end += 1
            if end >= len(s):
                raise Unparseable("unbalanced backtick")
            Parser("".join(body), self.on_command, self.depth + 1).parse()
            self.i = end + 1
        elif s.startswith("$((", start) and self._arith(start + 3):
            pass
        elif nxt == "(":
            self.i += 2
            self._nested()
        elif nxt == "{":
            self.i += 2
            self._chars(Word(), "}")
        elif nxt == "'" and not quoted:  # ANSI-C quoting: a literal after escapes are decoded
            end = start + 2
            while end < len(s) and s[end] != "'":
                end += 2 if s[end] == "\\" else 1
            if end >= len(s):
                raise Unparseable("unbalanced $'")
            w.value += _ANSI.sub(_ansi_char, s[start + 2 : end])
            w.quoted, self.i = True, end + 1
            return
        elif nxt == '"' and not quoted:  # locale string: like double quotes
            w.quoted = True
            self.i += 2
            self._chars(w, '"')
            return
        elif (m := _VAR_START.match(s, start + 1)) is not None:
            self.i = m.end()
        else:
            w.value += "$"
            w.plain += "" if quoted else "$"
            self.i += 1
            return
        w.value += s[start : self.i]
        w.dynamic = True

    def _arith(self, pos: int) -> bool:
        """Skip ``$(( … ))`` from inside it. Like bash, text whose parentheses do not close as ``))``
        is not arithmetic but a substitution of a subshell (``$((rm x); ls)``): answer False."""
        depth, s = 0, self.s
        while pos < len(s):
            if s[pos] == "`" or (s[pos] == "$" and s[pos + 1 : pos + 2] == "("):
                raise Unparseable("command substitution inside arithmetic")
            if s[pos] == ")" and not depth:
                if s[pos + 1 : pos + 2] != ")":
                    return False
                self.i = pos + 2
                return True
            depth += {"(": 1, ")": -1}.get(s[pos], 0)
            pos += 1
        return False
