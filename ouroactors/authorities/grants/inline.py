"""Grants decisions in the caller's process: the authority's own code on the authority's durable policy.

A session runtime would otherwise ask the grants actor for every tool call — a message round trip (~1.5 ms here)
plus a synced commit of the decision in the grants process, before the ledger start's own commit. The decision
is a pure function (:func:`~.posture.evaluate`) of state that grants keeps durable anyway: postures and stored
rules in its LMDB database, and — published by the authority at start (:func:`policy_record`) — what only its
configuration knew: node rules, configured user/workspace rules, protected roots. So a runtime decides **with the
same function on the same state**, and records the decision as a ``permission`` entry **in the same transaction
as the effect's start** (:class:`~ouroactors.authorities.ledger.messages.RecordDecision`): one commit, no hop.

Fencing is unchanged: the start's authority snapshot names the grants generation the runtime was started
against, and the ledger's transaction refuses it if grants has changed generation since (rules revoked, policy
reloaded) — the runtime is restarted by rest_for_one and decides again under the new generation. ``ask`` still
goes to the authority: approvals are its objects.

The pieces the actor and the inline decider share live here, so there is one implementation of each:
:func:`effective_rules` (which rules apply to a session) and :func:`permission_entry` (how a decision is recorded).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import lmdb
import msgpack

from ..ledger.domain import StartRequest, fingerprint
from ..storage.env import db
from .posture import Posture, evaluate
from .rules import Decision, Effect, Request, Rule, Scope, Verdict, parse_rules

POLICY_KEY = b"policy"  # in the grants database: the configuration-only part of the policy


@dataclass(frozen=True)
class Policy:
    """What the grants authority publishes at start for inline deciders."""

    node: tuple[str, ...]
    configured: dict[str, tuple[str, ...]]  # configured user/workspace rules (joined with the stored ones)
    protected: tuple[str, ...]


def policy_record(policy: Policy) -> bytes:
    return msgpack.packb({"node": list(policy.node), "configured": {k: list(v) for k, v in policy.configured.items()},
                          "protected": list(policy.protected)})


def effective_rules(node: Sequence[Rule], stored: Mapping[str, Sequence[str]], session_id: str) -> tuple[Rule, ...]:
    """Node rules, the stored user and workspace rules, and the session rules of this session only."""
    out = list(node)
    for key, texts in stored.items():
        scope, _, owner = key.partition("/")
        if scope == Scope.SESSION.value and owner != session_id:
            continue
        out.extend(parse_rules(texts, Scope(scope)))
    return tuple(out)


def permission_id() -> str:
    """A new permission entry's effect id: ``permission-`` and 32 hex digits — the time (ns) then 64 random bits.

    Unique as a random UUID is, but in the order the decisions were made: each new entry goes to the end of the
    ledger's ``permission-`` keys (the B-tree page written last) instead of a random page of them.
    """
    return f"permission-{time.time_ns():016x}{os.urandom(8).hex()}"


def permission_entry(request: Request, verdict: Verdict, generation: int) -> StartRequest:
    """A decision as the ledger records it: an entry of kind ``permission`` for the session."""
    arguments: dict[str, Any] = {"tool": request.tool, "effect": request.effect.value, "paths": list(request.paths),
                                 "command": request.command, "domains": list(request.domains)}
    if request.method is not None:  # an HTTP request's method is part of what was judged (a POST is a write)
        arguments["method"] = request.method
    effect_id = permission_id()
    return StartRequest(effect_id=effect_id, kind="permission", idempotency_key=effect_id,
                        fingerprint=fingerprint("permission", arguments), principal=request.principal,
                        session_id=request.principal, turn_id=None, call_id=None,
                        grant=str(verdict.rule)[:500] if verdict.rule else None,
                        authority={"grants": generation},
                        cause=f"{verdict.decision.value}: {verdict.reason}"[:500])


class NoPolicy(Exception):
    """The grants authority has not published its policy in this data dir (an older or absent authority)."""


class InlineGrants:
    """Decides as the grants authority would, reading its durable state (one read transaction per decision).

    Every decision reads the policy, the session's posture and the stored rules afresh — a rule revoked a moment
    ago is not applied — but only *parsing* them is cached: the parsed rules are reused while the stored bytes
    (policy and every ``rules/`` value) are byte-for-byte those they were parsed from. Only the ``rules/`` keys are
    scanned (approvals and postures share the database and grow with use).
    """

    def __init__(self, env: lmdb.Environment) -> None:
        self.env = env
        self._db = db(env, b"grants")
        self._parsed: tuple[tuple[bytes, tuple[tuple[bytes, bytes], ...], str], _Parsed] | None = None

    def decide(self, request: Request, root: str | None) -> Verdict:
        """The verdict for ``request`` (never raises on the engine: an error is ``ask``, as the actor answers)."""
        posture, parsed = self._read(request.principal)
        if isinstance(parsed, Verdict):
            return parsed
        rules, protected = parsed
        return evaluate(request, posture, rules, protected, root=root)

    def warm(self, session: str, root: str | None = None) -> None:
        """Read and parse what ``session``'s decisions need now (a runtime's open), so that its first tool call
        does not pay for parsing the rules; each decision still reads the durable state afresh.

        One decision is also made and thrown away (a ``shell`` call of ``true``: the command path, the most code):
        a runtime is a process forked from its supervisor, and the first run through the evaluator's code paid
        for touching it (0.7 ms against 0.3 ms for the next decisions in bench_peers' fresh-runtime sessions).
        Deciding is pure: nothing is recorded, and the verdict is nobody's.
        """
        try:
            posture, parsed = self._read(session)
        except NoPolicy:
            return  # the first decision says so
        if not isinstance(parsed, Verdict):
            rules, protected = parsed
            try:
                evaluate(Request(session, "shell", Effect.EXECUTE, command="true"), posture, rules, protected,
                         root=root)
            except Exception:  # the real decision meets it and answers ask, as the actor does
                return

    def _read(self, session: str) -> tuple[Any, _Parsed]:
        with self.env.begin() as txn:
            raw = txn.get(POLICY_KEY, db=self._db)
            if raw is None:
                raise NoPolicy("the grants authority has published no policy here")
            posture_raw = txn.get(f"posture/{session}".encode(), db=self._db)
            stored_raw: list[tuple[bytes, bytes]] = []
            cursor = txn.cursor(db=self._db)
            if cursor.set_range(_RULES_PREFIX):
                for key, value in cursor:
                    if not bytes(key).startswith(_RULES_PREFIX):
                        break
                    stored_raw.append((bytes(key), bytes(value)))
            state = (bytes(raw), tuple(stored_raw), session)
        try:
            posture = (msgpack.unpackb(bytes(posture_raw), raw=False) if posture_raw is not None
                       else Posture.DEFAULT.value)
            Posture(posture)
        except Exception as exc:  # a corrupt posture: ask, never allow (as the authority answers: .records)
            return None, Verdict(Decision.ASK, f"engine error: the record grants/posture/{session} does not decode "
                                               f"({type(exc).__name__}: {exc})")
        cached = self._parsed
        if cached is not None and cached[0] == state:
            return posture, cached[1]
        parsed = _parse(*state)
        self._parsed = (state, parsed)
        return posture, parsed


_RULES_PREFIX = b"rules/"
_Parsed = tuple[tuple[Rule, ...], tuple[str, ...]] | Verdict


def _parse(policy_raw: bytes, stored_raw: tuple[tuple[bytes, bytes], ...], session: str) -> _Parsed:
    """The rules that apply to ``session`` and the protected roots, from the stored bytes; an ``ask`` verdict
    when a stored rule cannot be read (never allow)."""
    try:  # a record that does not decode is an engine error: ask, never allow (as the authority answers: .records)
        policy = msgpack.unpackb(policy_raw, raw=False)
        stored: dict[str, tuple[str, ...]] = {}
        for key, value in stored_raw:
            name = key[len(_RULES_PREFIX):].decode()
            if name != Scope.SESSION.value:
                texts = msgpack.unpackb(value, raw=False)
                if not isinstance(texts, list | tuple) or not all(isinstance(t, str) for t in texts):
                    raise ValueError(f"the record grants/{key.decode()} is not a list of rule texts")
                stored[name] = tuple(texts)
        for scope, texts in (policy.get("configured") or {}).items():
            stored[scope] = tuple(dict.fromkeys((*stored.get(scope, ()), *texts)))
        rules = effective_rules(parse_rules(policy.get("node") or (), Scope.NODE), stored, session)
    except Exception as exc:  # a stored rule this code cannot read: ask, never allow
        return Verdict(Decision.ASK, f"engine error: {type(exc).__name__}: {exc}")
    return rules, tuple(policy.get("protected") or ())


__all__ = ["POLICY_KEY", "InlineGrants", "NoPolicy", "Policy", "effective_rules", "permission_entry",
           "permission_id", "policy_record"]
