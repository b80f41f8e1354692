"""How one rule pattern matches one command form, path or host — the pattern language's semantics.

Kept apart from :mod:`.rules` (which decides over a whole request) so each stays small. See the
:mod:`.rules` docstring for the language itself. Two points of this module are security decisions:

* **An allow vouches only for what it says.** A form unwrapped through a tainting wrapper is not
  covered by an allow of the inner form (only of the form as written), and a program named by a
  path outside the system bin directories only by a rule naming that path.
* **Code must be named.** A form that runs code through an option or argument (``git -c
  core.pager=…``, ``python3 -c``, ``find -delete``, ``GIT_PAGER=… git log``; see
  :mod:`.code_options`) carries the index of the word that does it. An allow covers it only when
  its pattern spells every word up to and including that one literally: ``Bash(python3 -c *)``
  covers ``python3 -c 'print(1)'``, but ``Bash(python3 *)``, ``Bash(git *)`` and ``Bash(*)`` do not.
  Deny and ask rules match such forms like any other.
* **Deny reads meaning.** A deny or ask pattern that names options also matches a form whose options
  *mean* at least those (``rm -rf *`` matches ``rm -fr x``, ``rm x --recursive --force``; :mod:`.options`).
  An allow is matched only as spelt, so it never covers more than it says.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from fnmatch import fnmatchcase
from functools import lru_cache

from .commands import Form, Segment, program_name, trusted_program
from .options import means

_HOST = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")
_GLOB_CHARS = "*?["


@lru_cache(maxsize=2048)
def command_matcher(pattern: str, allow: bool) -> tuple[str, tuple[str, ...], bool]:
    """(mode, words, rest): mode "any", "prefix" (words[0] is the text) or "words"."""
    if pattern == "*":
        return ("any", (), True)
    words = shlex.split(pattern)
    if words[0] and "/" in words[0] and not any(ch in words[0] for ch in _GLOB_CHARS):
        # a path-named program: allows compare the path as written, denies/asks the basename
        words[0] = posixpath.normpath(words[0]) if allow else program_name(words[0])
    if pattern.endswith("*") and not pattern.endswith(" *"):
        return ("prefix", (" ".join(words)[:-1],), True)
    rest = words[-1] == "*"
    return ("words", tuple(words[:-1] if rest else words), rest)


def _spells(mode: str, words: tuple[str, ...], argv: tuple[str, ...], index: int) -> bool:
    """True when the pattern spells ``argv[: index + 1]`` literally (no glob stands for it)."""
    if mode == "any":
        return False
    if mode == "prefix":
        return len(words[0]) >= len(" ".join(argv[: index + 1]))
    literal = 0
    for w in words:
        if any(c in w for c in _GLOB_CHARS):
            break
        literal += 1
    return literal > index


def form_matches(pattern: str, allow: bool, form: Form) -> bool:
    if not allow and means(pattern, form.argv):  # a deny/ask judges what the options mean (.options)
        return True
    mode, words, rest = command_matcher(pattern, allow)
    argv = form.argv
    if allow:
        first = pattern.split(None, 1)[0]
        if "/" in first and not any(ch in first for ch in _GLOB_CHARS):
            argv = (posixpath.normpath(form.invoked), *argv[1:])
        elif not trusted_program(form.invoked):
            return False
        if form.code is not None and not _spells(mode, words, argv, form.code):
            return False
    if mode == "any":
        return True
    if mode == "prefix":
        return " ".join(argv).startswith(words[0])
    if len(argv) < len(words) or (len(argv) > len(words) and not rest):
        return False
    return all(fnmatchcase(a, w) if any(c in w for c in _GLOB_CHARS) else a == w
               for a, w in zip(argv, words, strict=False))


def segment_matches(pattern: str, allow: bool, seg: Segment) -> bool:
    if not allow:
        return any(form_matches(pattern, False, f) for f in seg.forms)
    # An allow vouches for a form only if nothing outside it was tainted, and only for a form at or
    # inside the innermost one that runs code: `Bash(*)` matching `sudo …` or `bash -c …` must not
    # vouch for the `python3 -c …` inside (a rule spells only the form it matched).
    last_code = max((i for i, f in enumerate(seg.forms) if f.code is not None), default=0)
    for i, form in enumerate(seg.forms):
        if i >= last_code and form_matches(pattern, True, form):
            return True
        if form.taint is not None:
            return False
    return False


@lru_cache(maxsize=2048)
def glob(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("(?:/.*)?")  # dir/** covers dir itself too
            i += 3
        elif pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        else:
            out.append({"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i])))
            i += 1
    return re.compile("".join(out), re.S)


def path_matches(pattern: str, forms: tuple[str, ...]) -> bool:
    """A relative glob matches only relative forms (inside the root), an absolute one only absolute forms."""
    absolute = pattern.startswith("/")
    return any(glob(pattern).fullmatch(p) for p in forms if p.startswith("/") == absolute)


def host(domain: str) -> str | None:
    name = re.sub(r":\d+\Z", "", domain.strip().lower()).rstrip(".")
    return name if _HOST.fullmatch(name) else None  # not a host name: no domain rule covers it


def host_matches(pattern: str, name: str | None) -> bool:
    if name is None:
        return False
    return pattern == "*" or name == pattern or (pattern.startswith("*.") and name.endswith(pattern[1:]))


__all__ = ["command_matcher", "form_matches", "glob", "host", "host_matches", "path_matches", "segment_matches"]
