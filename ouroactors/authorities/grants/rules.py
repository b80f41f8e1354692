"""Permission rules and the decision over one request — synchronous; reads the disk only to resolve paths.

A :class:`Request` names a principal (session), a tool, an effect class (read | write | execute |
network), paths, a shell command, network domains and — for an HTTP request — its method. A request
that changes the world is a write, whatever the tool calls it: a method other than exactly ``GET``,
``HEAD`` or ``OPTIONS`` (:data:`SAFE_HTTP_METHODS`; ``post``, ``FOO`` and ``GET\r\n`` included) makes a
read or network request a **write** (:func:`method_effect`, applied by the request itself, so every
caller — the grants actor, an inline decider — judges the same effect). :func:`decide` answers allow,
ask or deny:

1. **Paths** are judged where they really are (:mod:`.targets`): each path of the request, and
   each file the command writes (output redirections, ``tee``, ``--output``-style options), is
   resolved on disk by the workspace's canonicaliser (symlinks, ``..`` after resolution; relative
   paths against ``root``). A relative path that climbs out as written (``../x``) is denied
   ("path escapes"). A *write* into ``.git`` (any case, as spelled or as resolved, or the root's
   real git dir) or under a ``protected`` root (the data dir, spelled or resolved) is denied
   before any rule is read.
2. **Items.** The request is split into what rules judge: each simple command of ``command``
   (see :mod:`.commands`), each path, each domain, plus the tool name itself.
3. A **deny** matching ANY item (any form of any segment, any spelling of a path) denies. A
   truncated or unparseable command then asks (never allow — even if an allow matches a prefix),
   as does an empty one, a write to a file named at run time, and a path that cannot be resolved.
   An **ask** matching any item asks. Otherwise the request is **allowed** only if EVERY item is
   covered by an allow (or a ``Tool(name)`` allow covers the request's tool); else ask — "no rule".
4. Rank is deny > ask > allow; a rule's :class:`Scope` (node > user > workspace > session) only
   picks *which* rule of the winning rank is reported (first listed wins a tie of scopes). For an
   allow, each item takes its best-scoped allow and the verdict names the weakest of those: the
   rule whose revocation would change the answer soonest.

**Pattern language** (``ACTION:PATTERN``, at most 512 bytes; e.g. ``deny:Bash(rm *)``):
``Bash(git status)`` exact words; ``Bash(git *)`` those words then anything (or nothing);
``Bash(git*)`` literal prefix of the command text; ``Bash(*)`` every command; other ``*``/``?``
match within one word. Command rules judge the request's command whatever the tool is called; a deny or ask
pattern naming options matches what they *mean* (``rm -rf *`` denies ``rm -fr x``: :mod:`.options`).
``Read(glob)`` judges the paths of read requests, ``Write(glob)``/``Edit(glob)`` those of write
requests — again whatever the tool — with ``**`` spanning directories and ``*``/``?`` not. An
allow sees only the resolved path: a relative glob matches only paths really inside ``root``
(``Write(**)`` never covers ``/etc/passwd`` nor ``link_out/x``), an absolute glob only the real
location. Deny and ask rules also see the spellings. ``WebFetch(domain:host)`` matches the
host exactly, ``domain:*.host`` its subdomains (not ``host`` itself, nor ``host.evil.net``),
``domain:*`` any host. An allow of ``WebFetch`` covers only the hosts of requests that are not
writes (GET, HEAD, OPTIONS); ``WebWrite(domain:host)`` (same host patterns) is the family of the
hosts of write requests (POST, PUT, PATCH, DELETE, any other method), and an allow of it covers
nothing else. A deny or ask of ``WebFetch`` names the host itself: it matches every request to it,
writes included; one of ``WebWrite`` only the writes. ``Tool(name)`` or a bare name (``Bash``,
``mcp__srv__*``) matches the tool.

**Asymmetry: deny sees through, allow vouches only for what it says.** Deny and ask match every
form of a segment (``sudo rm x`` is ``rm x`` too). An allow of an inner form does not cover a
segment unwrapped through a tainting wrapper (``sudo``, ``VAR=value``, ``xargs``, ``find -exec``)
— only an allow of the form as written does — and a program named by a path outside the system
bin directories (``./git``, ``/tmp/x/git``) is covered only by a rule naming that path. A form
that runs code through an option (:mod:`.code_options`: ``git -c core.pager=…``, ``python3 -c``,
``find -delete``, ``GIT_PAGER=… git log``) is covered only by an allow that spells the program and
that option literally (:mod:`.matching`); what the option runs is judged as a segment too.

No path family judges execute or network requests: their paths are covered only by a ``Tool()``
allow. :func:`safe_decide` answers any exception inside :func:`decide` with ask, never allow.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from fnmatch import fnmatchcase
from typing import Literal

from ...core.errors import OuroactorsError
from .commands import Segment, Segmentation, segments
from .matching import host, host_matches, path_matches, segment_matches
from .targets import HARMLESS_SINKS, PathView, norm, protected_reason, view
from .targets import context as targets_context

MAX_RULE_BYTES = 512
SAFE_HTTP_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})  # reads of the world; any other method (TRACE too) writes


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


def method_effect(method: str | None, effect: Effect | str = Effect.NETWORK) -> Effect:
    """The effect class a request with this HTTP ``method`` is judged as: ``effect`` for a safe method
    (exactly ``GET``, ``HEAD`` or ``OPTIONS`` — methods are case-sensitive, so ``get`` is not one) or no
    method; otherwise a read or network request is a **write** (an execute stays execute: never narrowed)."""
    effect = Effect(effect)
    if method is None or method in SAFE_HTTP_METHODS or effect not in (Effect.READ, Effect.NETWORK):
        return effect
    return Effect.WRITE


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
    tool: str | None  # the family (Bash, Read, Write, Edit, WebFetch, WebWrite) or, for kind "tool", the tool name
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
    method: str | None = None  # an HTTP request's method, as it will be sent (not normalised)

    def __post_init__(self) -> None:  # validate at the boundary: a str is not a tuple of paths
        if self.method is not None and not isinstance(self.method, str):
            raise TypeError(f"Request.method must be str or None, got {type(self.method).__name__}")
        object.__setattr__(self, "effect", method_effect(self.method, self.effect))  # a POST is a write
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
_DOMAIN_FAMILIES = ("WebFetch", "WebWrite")  # the hosts of requests that read / that change the world
_FAMILIES = "Bash, Read, Write, Edit, WebFetch, WebWrite, Tool"


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
    if family in _DOMAIN_FAMILIES:
        host = arg.strip().lower()
        if not host.startswith("domain:"):
            raise RuleError(text, f"{family} rules name a host: {family}(domain:example.com)")
        host = host[len("domain:") :]
        if host != "*" and not _HOST.fullmatch(host.removeprefix("*.")):
            raise RuleError(text, f"bad host pattern {host!r}")
        return Rule(action, scope, family, host, "domain")
    if family == "Tool":
        if not _TOOL_NAME.fullmatch(arg):
            raise RuleError(text, "Tool(name) takes a tool name (parameter constraints are not supported)")
        return Rule(action, scope, arg, arg, "tool")
    raise RuleError(text, f"unknown rule family {family!r} ({_FAMILIES})")


def parse_rules(texts: Iterable[str], scope: Scope | str) -> tuple[Rule, ...]:
    return tuple(parse_rule(t, scope) for t in texts)


def new_rules(texts: Iterable[str], scope: Scope | str) -> tuple[Rule, ...]:
    """:func:`parse_rules` for rules about to be stored (``AddRules``, ``ouroactors grants add``), which must also
    hold no control character: such a rule matches no command or path worth naming, and ``grants list`` would show
    it on an operator's terminal as itself (an escape sequence included). Rules stored already are read as before."""
    texts = tuple(texts)
    for text in texts:
        if isinstance(text, str) and any(ord(c) < 32 or ord(c) == 127 for c in text):
            raise RuleError(text, "holds a control character")
    return parse_rules(texts, scope)


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


@dataclass(frozen=True)
class _Item:
    label: str
    kind: RuleKind
    segment: Segment | None = None
    view: PathView | None = None
    effect: Effect | None = None  # a path's (a redirection is a write whatever the request) or a host's (write or not)
    host: str | None = None

    def matched_by(self, rule: Rule, req: Request) -> bool:
        if rule.kind != self.kind:
            return False
        allow = rule.action is Decision.ALLOW
        if self.segment is not None:
            return segment_matches(rule.pattern, allow, self.segment)
        if self.view is not None:
            forms = self.view.real if allow else self.view.forms  # allows see only the real location
            return _PATH_FAMILIES.get(rule.tool or "") is self.effect and path_matches(rule.pattern, forms)
        if self.kind == "domain":  # a WebFetch allow vouches for reads only; its deny/ask names the host itself
            writes = self.effect is Effect.WRITE
            if (rule.tool == "WebWrite" and not writes) or (rule.tool == "WebFetch" and allow and writes):
                return False
            return host_matches(rule.pattern, self.host)
        return fnmatchcase(req.tool, rule.pattern)


def _best(rules: Sequence[Rule]) -> Rule:
    return min(rules, key=lambda r: r.scope.precedence)  # min is stable: the first listed wins a tie


def _path_items(req: Request, split: Segmentation | None, root: str | None,
                protected: tuple[str, ...]) -> list[_Item] | Verdict:
    """One item per requested path and per file the command writes; a protected write or a
    relative path that climbs out is a deny verdict instead."""
    wanted = [(raw, req.effect, "path") for raw in req.paths]
    wanted += [(w, Effect.WRITE, "write") for w in (split.writes if split is not None else ()) if w is not None
               and norm(w) not in HARMLESS_SINKS]
    moved = split is not None and split.changes_dir
    items = list[_Item]()
    if not wanted:
        return items  # no path to judge: the root and protected roots need not be resolved on disk
    ctx = targets_context(root, protected)
    for raw, effect, what in wanted:
        path = norm(raw)
        if not path.startswith("/") and (path == ".." or path.startswith("../")):
            return Verdict(Decision.DENY, f"path escapes: {raw!r}")
        v = view(raw, ctx)
        if what == "write" and moved and not raw.startswith("/"):  # relative to a directory the command chose
            v = PathView(raw, v.spelled, (), None, "the command changes directory before writing it")
        if effect is Effect.WRITE and (why := protected_reason(v, ctx)) is not None:
            return Verdict(Decision.DENY, why)
        label = f"{what} {raw!r}" + (f" (really {v.resolved})" if v.resolved and v.resolved != path else "")
        items.append(_Item(label, "path", view=v, effect=effect))
    return items


def decide(request: Request, rules: Sequence[Rule], *, protected: tuple[str, ...] = (),
           root: str | None = None) -> Verdict:
    """Decide one request; see the module docstring for the order. ``protected`` roots (the data
    dir) and ``root`` (the workspace, for relative paths) are absolute."""
    req = request
    split = segments(req.command) if req.command is not None else None
    found = _path_items(req, split, root, protected)
    if isinstance(found, Verdict):
        return found
    items = found
    if split is not None:
        items += [_Item(f"command {' '.join(s.argv)[:80]!r}" + _code_note(s), "command", segment=s)
                  for s in split.details]
    writes = req.effect is Effect.WRITE
    note = f" [{'a write' if req.method is None else f'{req.method!r} is a write'}: only WebWrite allows it]"
    items += [_Item(f"domain {d!r}" + (note if writes else ""), "domain",
                    effect=Effect.WRITE if writes else Effect.NETWORK, host=host(d)) for d in req.domains]
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
    if split is not None and None in split.writes:
        return Verdict(Decision.ASK, "the command writes to a file named at run time")
    unresolved = [it for it in items if it.view is not None and it.view.resolved is None]
    if unresolved:
        v = unresolved[0].view
        assert v is not None
        return Verdict(Decision.ASK, f"cannot resolve {unresolved[0].label}: {v.problem}")
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
        coded = [label for label in uncovered if label.endswith((_NAMES_IT, _WEB_WRITE))]
        shown = uncovered if winners else coded
        return Verdict(Decision.ASK, "no rule" + (f" covers {', '.join(shown)}" if shown else ""))
    rule = max(winners, key=lambda r: r.scope.precedence)
    more = len({id(r) for r in winners}) - 1
    return Verdict(Decision.ALLOW, f"allowed by {rule.scope.value} rule {rule}"
                   + (f" and {more} more" if more else ""), rule)


_NAMES_IT = ": only a rule that names it allows it]"
_WEB_WRITE = ": only WebWrite allows it]"


def _code_note(seg: Segment) -> str:
    why = next((f.why for f in seg.forms if f.why), None)
    return f" [{why}{_NAMES_IT}" if why else ""


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


__all__ = ["MAX_RULE_BYTES", "SAFE_HTTP_METHODS", "Decision", "Effect", "Request", "Rule", "RuleError", "RuleKind",
           "Scope", "Verdict", "decide", "method_effect", "parse_rule", "parse_rules", "safe_decide"]
