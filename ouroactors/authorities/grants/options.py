"""Deny and ask rules match what a command's options *mean*, not how they are spelt.

``deny:Bash(rm -rf *)`` is meant to stop a recursive forced removal; ``rm -fr x``, ``rm -r -f x``,
``rm --recursive --force x``, ``rm -Rf x``, ``rm -rfv x``, ``rm x -rf`` and ``rm --rec --force x`` all do
exactly that. So when the pattern of a **deny or ask** rule names options, a command form matches it also when:

1. its program (and, for git, its subcommand — after git's own options such as ``-C dir``) is the pattern's;
2. its options **mean at least** the pattern's options, in any order: short clusters are split (``-rfv`` is
   ``-r -f -v``), synonyms are one meaning (``-r`` = ``-R`` = ``--recursive``; the table is
   :mod:`.option_grammars`), an abbreviated long option means every long option it abbreviates (``--rec``), a
   value may be attached or not (``-XPOST`` = ``-X POST`` = ``--request=POST``), implied meanings count
   (``git branch -D`` deletes by force, ``curl -d`` POSTs, ``git push origin +main`` forces), and extra options
   never hide the denied ones. Options stop at ``--``; anywhere before it they count (GNU programs permute);
3. its operands (the words that are not options, their values, or redirections) match the pattern's operands in
   order — exactly, or as a prefix when the pattern ends with `` *`` (or ``*``). A word after an option the table
   does not know might be that option's value: both readings are tried.

This is generous on purpose — a deny matches under *any* reading in which the command does the denied thing
(``--rec`` may abbreviate ``--recursive``; an unknown ``-x`` followed by ``y`` may or may not take it) — and it
only ever adds matches: the literal match of :mod:`.matching` still applies. **Allow rules are not read this way**:
an allow vouches only for what it spells (``allow:Bash(rm -r build)`` covers neither ``rm -R build`` nor, of
course, ``rm -rf /``).

A pattern without an option word (``deny:Bash(rm *)``), or whose program is a glob, is matched literally only.
Limits: the values of options of programs not in the table are read as operands (``deny:Bash(foo -o out)``
does not match ``foo -oout``); options set by configuration (``git -c push.default=…``, aliases, a ``.curlrc``)
are not seen — rules are not a sandbox.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache

from .code_options import GIT_GLOBAL_VALUED
from .commands import program_name
from .option_grammars import DEFAULT, TABLE, Grammar

_GLOB_CHARS = "*?["
_REDIRECTION = re.compile(r"\d*(?:[<>]|>>|>\||&>|&>>|<>|>&|<&|<<|<<<)")
_GIT_VALUED = GIT_GLOBAL_VALUED | {"-c", "--config-env", "--exec-path"}


@dataclass(frozen=True)
class OptionPattern:
    """A rule pattern read for meaning: its head (program, git subcommand), what its options mean, its operands."""

    head: tuple[str, ...]
    meanings: frozenset[str]
    operands: tuple[str, ...]
    rest: bool


@dataclass(frozen=True)
class Reading:
    """A command's options and operands as read for meaning; an operand marked optional may be an option's value."""

    meanings: frozenset[str]
    operands: tuple[tuple[str, bool], ...]


def _head(words: tuple[str, ...]) -> tuple[tuple[str, ...], int]:
    """``(head, index of the first word after it)``: the program, and for git its subcommand past git's options."""
    if not words:
        return (), 0
    if words[0] != "git":
        return (words[0],), 1
    i = 1
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        i += 2 if words[i] in _GIT_VALUED else 1
    if i < len(words) and words[i] == "--":
        i += 1
    return (("git", words[i]), i + 1) if i < len(words) else (("git",), i)


def _grammar(head: tuple[str, ...]) -> Grammar:
    return TABLE.get(" ".join(head), DEFAULT)


def _expand(meanings: set[str], grammar: Grammar) -> frozenset[str]:
    """``meanings`` with what they imply (``name=VALUE`` implies ``name`` too)."""
    todo = list(meanings)
    while todo:
        name = todo.pop().split("=", 1)[0]
        for more in (*grammar.implies.get(name, ()), name):
            if more not in meanings:
                meanings.add(more)
                todo.append(more)
    return frozenset(meanings)


def _valued(meaning: str, value: str, grammar: Grammar) -> str:
    return f"{meaning}={value.upper() if meaning in grammar.fold else value}"


def read(words: tuple[str, ...], grammar: Grammar, *, command: bool) -> Reading:
    """What ``words`` (the arguments after the head) mean. ``command``: read a command generously (abbreviations of
    long options, possible values of unknown options, redirections); otherwise a rule's pattern, exactly."""
    meanings: set[str] = set()
    operands: list[tuple[str, bool]] = []
    longs = grammar.long_spellings()
    i, ended, maybe_value = 0, False, False
    while i < len(words):
        w, nxt = words[i], words[i + 1] if i + 1 < len(words) else None
        i += 1
        if command and not ended and _REDIRECTION.fullmatch(w):
            operands.append((w, True))  # a redirection and its target are not operands
            if nxt is not None:
                operands.append((nxt, True))
                i += 1
            continue
        if ended or w == "-" or not w.startswith("-"):
            operands.append((w, command and maybe_value))
            if not ended and grammar.plus_operand and w.startswith("+") and len(w) > 1:
                meanings.add(grammar.plus_operand)
            maybe_value = False
            continue
        maybe_value = False
        if w == "--":
            ended = True
            continue
        if w.startswith("--") or not grammar.clusters:
            name, eq, value = w.partition("=")
            found = grammar.names[name].split() if name in grammar.names else []
            if not found and command and name.startswith("--"):  # an abbreviation: every reading
                found = [m for s in longs if s.startswith(name) for m in grammar.names[s].split()]
            if not found:
                meanings.add(name)
                meanings.update((w,) if eq else ())
                maybe_value = not eq
                continue
            for meaning in found:
                meanings.add(meaning)
                if meaning in grammar.valued:
                    given = value if eq else nxt
                    if given is not None:
                        meanings.add(_valued(meaning, given, grammar))
            takes = [m in grammar.valued for m in found]
            if not eq and nxt is not None and any(takes):
                if all(takes):
                    i += 1  # its value, not an operand
                else:
                    maybe_value = True  # an abbreviation of a valued option and of another: both readings
            continue
        if command:
            meanings.add(w)  # -delete, -9: a word that is one option to some programs
        for j, ch in enumerate(w[1:], 1):
            letter = grammar.names.get("-" + ch, "-" + ch).split()
            meanings.update(letter)
            meaning = letter[-1]
            if meaning in grammar.valued:
                attached = w[j + 1 :]
                given = attached or nxt
                if given is not None:
                    meanings.add(_valued(meaning, given, grammar))
                i += not attached and nxt is not None
                maybe_value = False
                break
            maybe_value = meaning.startswith("-")  # the next word may be an unknown option's value
    return Reading(_expand(meanings, grammar), tuple(operands))


@lru_cache(maxsize=2048)
def option_pattern(pattern: str) -> OptionPattern | None:
    """The pattern read for meaning, or None when it names no option (or its program is a glob): literal only."""
    if pattern.strip() == "*":
        return None
    try:
        words = shlex.split(pattern)
    except ValueError:
        return None
    rest = pattern.endswith("*")  # `rm -rf *`, and `rm -rf*` (a literal prefix of the text): then anything
    if rest and (words[-1] == "*" or words[-1].startswith("-")):
        words[-1] = words[-1][:-1]  # an option's prefix (`-r*`) is the option: clusters are split anyway
        if not words[-1]:
            words.pop()
    if not words or any(ch in words[0] for ch in _GLOB_CHARS):
        return None
    words[0] = program_name(words[0])
    head, start = _head(tuple(words))
    tail = tuple(words[start:])
    if not any(w.startswith("-") and len(w) > 1 for w in tail) or any(ch in "".join(head) for ch in _GLOB_CHARS):
        return None
    reading = read(tail, _grammar(head), command=False)
    return OptionPattern(head, reading.meanings, tuple(w for w, _ in reading.operands), rest)


@lru_cache(maxsize=4096)
def _reading(argv: tuple[str, ...]) -> tuple[tuple[str, ...], Reading]:
    head, start = _head(argv)
    return head, read(argv[start:], _grammar(head), command=True)


def _word_matches(word: str, pattern: str) -> bool:
    return fnmatchcase(word, pattern) if any(c in pattern for c in _GLOB_CHARS) else word == pattern


def _operands_match(wanted: tuple[str, ...], rest: bool, found: tuple[tuple[str, bool], ...]) -> bool:
    """``wanted`` in order against ``found`` (each optional word may be skipped); all of ``found`` used unless
    ``rest``. Dynamic programming over (pattern index, command index)."""
    reach = {0}  # pattern indexes reachable having consumed found[:j]
    for word, optional in found:
        nxt = {k + 1 for k in reach if k < len(wanted) and _word_matches(word, wanted[k])}
        if optional or rest:
            nxt |= {k for k in reach if optional or k == len(wanted)}
        reach = nxt
        if not reach:
            return False
    return len(wanted) in reach


def means(pattern: str, argv: tuple[str, ...]) -> bool:
    """True when the command ``argv`` (program normalised) does what the deny/ask ``pattern`` names (see above)."""
    wanted = option_pattern(pattern)
    if wanted is None or not argv:
        return False
    head, reading = _reading(argv)
    if head != wanted.head:
        return False
    if not all(any(fnmatchcase(m, want) for m in reading.meanings) for want in wanted.meanings):
        return False
    return _operands_match(wanted.operands, wanted.rest, reading.operands)


__all__ = ["OptionPattern", "Reading", "means", "option_pattern", "read"]
