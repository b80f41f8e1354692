"""Permission rules and the decision over one request — pure, synchronous, no I/O.

A :class:`Request` names a principal (session), a tool, an effect class (read | write | execute |
network), paths, a shell command and network domains. :func:`decide` answers allow, ask or deny:

1. **Paths** are normalised (``posixpath.normpath``); a relative path that climbs out (``../x``)
   is denied ("path escapes"). A *write* touching a ``.git`` path segment (any case) or anything
   under a ``protected`` root (the project's data dir) is denied before any rule is read.
2. **Items.** The request is split into what rules judge: each simple command of ``command``
   (see :mod:`.commands`), each path, each domain, plus the tool name itself.
3. A **deny** matching ANY item (any form of any segment) denies. A truncated or unparseable
   command then asks (never allow — even if an allow matches a prefix), as does an empty one.
   An **ask** matching any item asks. Otherwise the request is **allowed** only if EVERY item is
   covered by an allow (or a ``Tool(name)`` allow covers the request's tool); else ask — "no rule".
4. Rank is deny > ask > allow; a rule's :class:`Scope` (node > user > workspace > session) only
   picks *which* rule of the winning rank is reported (first listed wins a tie of scopes). For an
   allow, each item takes its best-scoped allow and the verdict names the weakest of those: the
   rule whose revocation would change the answer soonest.

**Pattern language** (``ACTION:PATTERN``, at most 512 bytes; e.g. ``deny:Bash(rm *)``):
``Bash(git status)`` exact words; ``Bash(git *)`` those words then anything (or nothing);
``Bash(git*)`` literal prefix of the command text; ``Bash(*)`` every command; other ``*``/``?``
match within one word. Command rules judge the request's command whatever the tool is called.
``Read(glob)`` judges the paths of read requests, ``Write(glob)``/``Edit(glob)`` those of write
requests — again whatever the tool — with ``**`` spanning directories and ``*``/``?`` not;
relative globs match paths relative to ``root`` when given. ``WebFetch(domain:host)`` matches the
host exactly, ``domain:*.host`` its subdomains (not ``host`` itself, nor ``host.evil.net``),
``domain:*`` any host. ``Tool(name)`` or a bare name (``Bash``, ``mcp__srv__*``) matches the tool.

**Asymmetry: deny sees through, allow vouches only for what it says.** Deny and ask match every
form of a segment (``sudo rm x`` is ``rm x`` too). An allow of an inner form does not cover a
segment unwrapped through a tainting wrapper (``sudo``, ``VAR=value``, ``xargs``, ``find -exec``)
— only an allow of the form as written does — and a program named by a path outside the system
bin directories (``./git``, ``/tmp/x/git``) is covered only by a rule naming that path.

No path family judges execute or network requests: their paths are covered only by a ``Tool()``
allow. :func:`safe_decide` answers any exception inside :func:`decide` with ask, never allow.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Literal

from ...core.errors import OuroactorsError
from .commands import Form, Segment, program_name, segments, trusted_program

MAX_RULE_BYTES = 512


class Effect(str, Enum):
    READ = "read"
    WRITE = "write"
    EXECUTE = "execute"
    NETWORK = "network"


class Decision(str, Enum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class Scope(str, Enum):
    NODE = "node"
    USER = "user"
    WORKSPACE = "workspace"
    SESSION = "session"

    @property
    def precedence(self) -> int:
        """0 is the strongest (node)."""
        return _SCOPE_ORDER.index(self)


_SCOPE_ORDER = (Scope.NODE, Scope.USER, Scope.WORKSPACE, Scope.SESSION)
RuleKind = Literal["command", "path", "domain", "tool"]


class RuleError(OuroactorsError, ValueError):
    """A rule's text is not in the pattern language; the message names the text."""

    def __init__(self, text: str, problem: str) -> None:
        self.text, self.problem = text, problem
        super().__init__(f"invalid rule {text!r}: {problem}")


@dataclass(frozen=True)
class Rule:
    action: Decision
    scope: Scope
    tool: str | None  # the family (Bash, Read, Write, Edit, WebFetch) or, for kind "tool", the tool name
    pattern: str
    kind: RuleKind

    def __post_init__(self) -> None:  # a deny built with action="deny" (a str) must still deny
        object.__setattr__(self, "action", Decision(self.action))
        object.__setattr__(self, "scope", Scope(self.scope))

    def __str__(self) -> str:
        inner = {"domain": f"domain:{self.pattern}"}.get(self.kind, self.pattern)
        return f"{self.action.value}:{'Tool' if self.kind == 'tool' else self.tool}({inner})"


@dataclass(frozen=True)
class Request:
    principal: str
    tool: str
    effect: Effect
    paths: tuple[str, ...] = ()
    command: str | None = None
    domains: tuple[str, ...] = ()

    def __post_init__(self) -> None:  # validate at the boundary: a str is not a tuple of paths
        object.__setattr__(self, "effect", Effect(self.effect))
        for name in ("paths", "domains"):
            value = getattr(self, name)
            if isinstance(value, str | bytes) or not all(isinstance(v, str) for v in value):
                raise TypeError(f"Request.{name} must be a sequence of str, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        if not isinstance(self.tool, str) or not isinstance(self.principal, str):
            raise TypeError("Request.tool and Request.principal must be str")
        if self.command is not None and not isinstance(self.command, str):
            raise TypeError(f"Request.command must be str or None, got {type(self.command).__name__}")


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str
    rule: Rule | None = None


_FAMILY = re.compile(r"([A-Za-z_*][A-Za-z0-9_.*?-]*)(?:\((.*)\))?", re.S)
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.*?-]+")
_HOST = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")
_SHELL_OPS = re.compile(r"[;&|`<>()\n]|\$\(")
_PATH_FAMILIES = {"Read": Effect.READ, "Write": Effect.WRITE, "Edit": Effect.WRITE}


def parse_rule(text: str, scope: Scope | str) -> Rule:
    """``ACTION:PATTERN`` → :class:`Rule`; raises :class:`RuleError` naming ``text`` when invalid."""
    if not isinstance(text, str):
        raise RuleError(repr(text), "a rule is a string")
    if len(text.encode()) > MAX_RULE_BYTES:
        raise RuleError(text[:60] + "…", f"longer than {MAX_RULE_BYTES} bytes")
    try:
        scope = Scope(scope)
    except ValueError:
        raise RuleError(text, f"unknown scope {scope!r}")
    action_text, sep, spec = text.strip().partition(":")
    try:
        action = Decision(action_text.strip().lower())
    except ValueError:
        raise RuleError(text, "must start with allow:, ask: or deny:")
    m = _FAMILY.fullmatch(spec.strip())
    if not sep or m is None:
        raise RuleError(text, "the pattern must look like Name or Name(argument)")
    family, arg = m.group(1), m.group(2)
    if arg is None:
        if not _TOOL_NAME.fullmatch(family):
            raise RuleError(text, "bad tool name")
        return Rule(action, scope, family, family, "tool")
    if not arg.strip():
        raise RuleError(text, "empty argument")
    if family == "Bash":
        return Rule(action, scope, family, _check_command(text, arg.strip()), "command")
    if family in _PATH_FAMILIES:
        return Rule(action, scope, family, _check_glob(text, arg.strip()), "path")
    if family == "WebFetch":
        host = arg.strip().lower()
        if not host.startswith("domain:"):
            raise RuleError(text, "WebFetch rules name a host: WebFetch(domain:example.com)")
        host = host[len("domain:") :]
        if host != "*" and not _HOST.fullmatch(host.removeprefix("*.")):
            raise RuleError(text, f"bad host pattern {host!r}")
        return Rule(action, scope, family, host, "domain")
    if family == "Tool":
        if not _TOOL_NAME.fullmatch(arg):
            raise RuleError(text, "Tool(name) takes a tool name (parameter constraints are not supported)")
        return Rule(action, scope, arg, arg, "tool")
    raise RuleError(text, f"unknown rule family {family!r} (Bash, Read, Write, Edit, WebFetch, Tool)")


def parse_rules(texts: Iterable[str], scope: Scope | str) -> tuple[Rule, ...]:
    return tuple(parse_rule(t, scope) for t in texts)


def _check_command(text: str, arg: str) -> str:
    if arg.startswith("command:"):
        raise RuleError(text, "Bash(command:…) is not supported; write Bash(<command>)")
    if _SHELL_OPS.search(arg):
        raise RuleError(text, "a command pattern names one simple command (no ; & | ` $( < > or parentheses)")
    try:
        words = shlex.split(arg)
    except ValueError as e:
        raise RuleError(text, f"cannot split the command pattern: {e}")
    if not words:
        raise RuleError(text, "empty command pattern")
    return arg


def _check_glob(text: str, arg: str) -> str:
    if "\0" in arg or ".." in arg.split("/"):
        raise RuleError(text, "a path pattern must not contain '..' or NUL")
    return arg + "**" if arg.endswith("/") else arg


@lru_cache(maxsize=2048)
def _command_matcher(pattern: str, allow: bool) -> tuple[str, tuple[str, ...], bool]:
    """(mode, words, rest): mode "any", "prefix" (words[0] is the text) or "words"."""
    if pattern == "*":
        return ("any", (), True)
    words = shlex.split(pattern)
    if words[0] and "/" in words[0] and not any(ch in words[0] for ch in "*?["):
        # a path-named program: allows compare the path as written, denies/asks the basename
        words[0] = posixpath.normpath(words[0]) if allow else program_name(words[0])
    if pattern.endswith("*") and not pattern.endswith(" *"):
        return ("prefix", (" ".join(words)[:-1],), True)
    rest = words[-1] == "*"
    return ("words", tuple(words[:-1] if rest else words), rest)


def _form_matches(rule: Rule, form: Form) -> bool:
    allow = rule.action is Decision.ALLOW
    mode, words, rest = _command_matcher(rule.pattern, allow)
    if mode == "any":
        return True
    argv = form.argv
    if allow:
        first = rule.pattern.split(None, 1)[0]
        if "/" in first and not any(ch in first for ch in "*?["):
            argv = (posixpath.normpath(form.invoked), *argv[1:])
        elif not trusted_program(form.invoked):
            return False
    if mode == "prefix":
        return " ".join(argv).startswith(words[0])
    if len(argv) < len(words) or (len(argv) > len(words) and not rest):
        return False
    return all(fnmatchcase(a, w) if any(c in w for c in "*?[") else a == w for a, w in zip(argv, words, strict=False))


def _segment_matches(rule: Rule, seg: Segment) -> bool:
    if rule.action is not Decision.ALLOW:
        return any(_form_matches(rule, f) for f in seg.forms)
    for form in seg.forms:  # an allow vouches for a form only if nothing outside it was tainted
        if _form_matches(rule, form):
            return True
        if form.taint is not None:
            return False
    return False


@lru_cache(maxsize=2048)
def _glob(pattern: str) -> re.Pattern[str]:
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


def _host(domain: str) -> str | None:
    host = re.sub(r":\d+\Z", "", domain.strip().lower()).rstrip(".")
    return host if _HOST.fullmatch(host) else None  # not a host name: no domain rule covers it


@dataclass(frozen=True)
class _Item:
    label: str
    kind: RuleKind
    segment: Segment | None = None
    paths: tuple[str, ...] = ()  # the forms a path may be matched in (as given, relative, absolute)
    host: str | None = None

    def matched_by(self, rule: Rule, req: Request) -> bool:
        if rule.kind != self.kind:
            return False
        if self.segment is not None:
            return _segment_matches(rule, self.segment)
        if self.kind == "path":
            return _PATH_FAMILIES.get(rule.tool or "") is req.effect and any(
                _glob(rule.pattern).fullmatch(p) for p in self.paths)
        if self.kind == "domain":
            if self.host is None:
                return False
            p = rule.pattern
            return p == "*" or self.host == p or (p.startswith("*.") and self.host.endswith(p[1:]))
        return fnmatchcase(req.tool, rule.pattern)


def _best(rules: Sequence[Rule]) -> Rule:
    return min(rules, key=lambda r: r.scope.precedence)  # min is stable: the first listed wins a tie


def _norm(path: str) -> str:
    """``posixpath.normpath``, with POSIX's implementation-defined leading ``//`` folded to ``/``
    (else ``//etc/passwd`` would escape ``Write(/etc/**)`` and the protected roots)."""
    path = posixpath.normpath(path) if path else "."
    return "/" + path.lstrip("/") if path.startswith("//") else path


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def decide(request: Request, rules: Sequence[Rule], *, protected: tuple[str, ...] = (),
           root: str | None = None) -> Verdict:
    """Decide one request; see the module docstring for the order. ``protected`` roots (the data
    dir) and ``root`` (the workspace, for relative paths) are absolute."""
    req, items = request, list[_Item]()
    roots = tuple(_norm(r) for r in protected)
    for raw in req.paths:
        path = _norm(raw)
        if not path.startswith("/") and (path == ".." or path.startswith("../")):
            return Verdict(Decision.DENY, f"path escapes: {raw!r}")
        absolute = _norm(posixpath.join(root, path)) if root and not path.startswith("/") else path
        if req.effect is Effect.WRITE:
            if ".git" in (part.lower() for part in path.split("/")):
                return Verdict(Decision.DENY, f"protected: {raw!r} is inside .git")
            for prot in roots:
                if _under(absolute, prot):
                    return Verdict(Decision.DENY, f"protected: {raw!r} is under {prot}")
        forms = {path, absolute}
        if root and _under(absolute, _norm(root)):
            forms.add(posixpath.relpath(absolute, _norm(root)))
        items.append(_Item(f"path {raw!r}", "path", paths=tuple(sorted(forms))))
    split = segments(req.command) if req.command is not None else None
    if split is not None:
        items += [_Item(f"command {' '.join(s.argv)[:80]!r}", "command", segment=s) for s in split.details]
    items += [_Item(f"domain {d!r}", "domain", host=_host(d)) for d in req.domains]
    items.append(_Item(f"tool {req.tool!r}", "tool"))

    matches = {d: [(r, it) for r in rules if r.action is d for it in items if it.matched_by(r, req)] for d in Decision}
    if matches[Decision.DENY]:
        rule = _best([r for r, _ in matches[Decision.DENY]])
        item = next(it for r, it in matches[Decision.DENY] if r is rule)
        return Verdict(Decision.DENY, f"denied by {rule.scope.value} rule {rule} ({item.label})", rule)
    if split is not None and split.truncated:
        return Verdict(Decision.ASK, "truncated request: the command is too long or too deeply nested")
    if split is not None and split.unparseable:
        return Verdict(Decision.ASK, f"unparseable command: {split.unparseable}")
    if split is not None and not split.segments:
        return Verdict(Decision.ASK, "empty command: nothing to match")
    if matches[Decision.ASK]:
        rule = _best([r for r, _ in matches[Decision.ASK]])
        item = next(it for r, it in matches[Decision.ASK] if r is rule)
        return Verdict(Decision.ASK, f"ask by {rule.scope.value} rule {rule} ({item.label})", rule)
    allows = matches[Decision.ALLOW]
    tool_allows = [r for r, it in allows if it.kind == "tool"]
    if tool_allows:
        rule = _best(tool_allows)
        return Verdict(Decision.ALLOW, f"allowed by {rule.scope.value} rule {rule}", rule)
    winners, uncovered = [], []
    for item in items[:-1]:  # every item but the tool itself must be covered
        covering = [r for r, it in allows if it is item]
        if covering:
            winners.append(_best(covering))
        else:
            uncovered.append(item.label)
    if not winners or uncovered:
        return Verdict(Decision.ASK, "no rule" + (f" covers {', '.join(uncovered)}" if winners else ""))
    rule = max(winners, key=lambda r: r.scope.precedence)
    more = len({id(r) for r in winners}) - 1
    return Verdict(Decision.ALLOW, f"allowed by {rule.scope.value} rule {rule}"
                   + (f" and {more} more" if more else ""), rule)


def safe_decide(request: Request, rules: Sequence[Rule], *, protected: tuple[str, ...] = (),
                root: str | None = None) -> Verdict:
    """:func:`decide`, but an exception or a malformed answer is ask ("engine error: …"), never allow."""
    try:
        verdict = decide(request, rules, protected=protected, root=root)
        if not isinstance(verdict, Verdict) or not isinstance(verdict.decision, Decision):
            return Verdict(Decision.ASK, f"engine error: malformed verdict {verdict!r}")
        return verdict
    except Exception as e:
        return Verdict(Decision.ASK, f"engine error: {type(e).__name__}: {e}")


__all__ = ["MAX_RULE_BYTES", "Decision", "Effect", "Request", "Rule", "RuleError", "RuleKind", "Scope", "Verdict",
           "decide", "parse_rule", "parse_rules", "safe_decide"]
