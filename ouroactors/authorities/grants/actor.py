"""The grants authority: authority over actions, outside the model (a leaf LMDB writer).

A request is evaluated narrowing at each layer, never widening: the session's durable posture
first (plan mode refuses write and execute), then the rules (node > user > workspace > the
session's own session rules; deny > ask > allow; nothing matched → ask; writes into ``.git`` and
the data dir always refused). Relative paths mean paths under the session's workspace root, taken
from its lease in the workspace's durable table (a root the request names must be one it holds).

**Every decision is offered to the ledger before it is answered** — this process writes the
node's ledger database itself, in one fenced transaction — and the answer (:class:`Judged`) says
whether that commit succeeded: an allow that cannot be recorded is answered ``ask`` with
``recorded=False``; a deny or an ask that cannot be recorded is still answered deny or ask, with
``recorded=False`` and the reason naming why it is not in the ledger. A request refused at the
door (:class:`~ouroactors.core.errors.BadRequest`) is not a decision and is not recorded. An
engine error is answered as ``ask``, never allow.

Approvals are durable (see :mod:`.approvals`). Who may answer is this authority's policy (the
``answerers`` kwarg; by default the local operator), never the requester's; an operator's answer
is verified against the credentials in the data dir, committed, and only then told to the
waiter. At start, pending approvals no live interaction can wait for any more are denied with the
reason: those a durable session (the coordinator's record) still waits on are kept, the others —
whose waiter lived in memory, or whose session is over or moved on — are denied (see :mod:`.orphans`).
Revoking rules changes this authority's generation: rest_for_one restarts its consumers. Every
request must be stamped with this generation (:class:`ListApprovals`, a read, excepted).

This module is the actor: its start, the decisions and the rules. The approval handlers are in
:mod:`.approval_desk`, loading and committing the grants database in :mod:`.persistence`; both are
mixed into :class:`Grants`.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import lmdb
import msgpack

from ...core import faults
from ...core.codec import CodecError
from ...core.errors import BadRequest, CommitRejected, CorruptRecord, StaleGeneration
from ...supervision.worker import Worker
from ..ledger.domain import DEFAULT_KINDS, LedgerError, Status
from ..ledger.store import LedgerStore, Start
from ..session_facts import DEFAULT_READER, Missing, load_reader
from ..storage.actor import storage_config
from ..storage.commit import Committed
from ..storage.env import db, open_env
from ..workspace.leases import lease_from_record
from .approval_desk import _EXPIRY, ApprovalDesk
from .approval_desk import (
    APPROVAL_COMMITTED as APPROVAL_COMMITTED,  # re-exported
)
from .approvals import ApprovalRefused
from .inline import Policy, effective_rules, permission_entry
from .messages import (
    PROTOCOL,
    READS,
    AddRules,
    AnswerApproval,
    ConsumeApproval,
    Decide,
    Judged,
    ListApprovals,
    RequestApproval,
    ReviewApprovals,
    RevokeRules,
    SetPosture,
    UnknownSession,
    WaitApproval,
)
from .operators import CredentialsError, ensure_local_operator
from .persistence import Persistence
from .posture import Posture, evaluate
from .records import unreadable_for
from .rules import Decision, Request, Rule, RuleError, Scope, Verdict, new_rules, parse_rules

DECISION_RECORDED = faults.register_point("grants.decision_recorded", "a decision is in the ledger, not yet answered")
log = logging.getLogger("ouroactors.grants")
__all__ = [  # the protocol (.messages) is re-exported: callers import it from here
    "AddRules", "AnswerApproval", "ConsumeApproval", "Decide", "Grants", "Judged", "ListApprovals",
    "RequestApproval", "ReviewApprovals", "RevokeRules", "SetPosture", "UnknownSession", "WaitApproval",
]


class Grants(ApprovalDesk, Persistence, Worker):
    refusals = (ApprovalRefused, RuleError, CredentialsError, LedgerError, CommitRejected, CodecError, ValueError,
                CorruptRecord, UnknownSession)
    protocol = PROTOCOL
    reads = READS
    stamped_only = True

    def on_start(self, rules: dict[str, list[str]] | None = None, protected: list[str] | None = None,
                 max_pending_per_session: int = 8, map_size: int | None = None,
                 answerers: list[str] | None = None, max_pending: int = 256,
                 keep_finished_s: float = 7 * 24 * 3600.0, keep_finished: int = 1000,
                 session_facts: str = DEFAULT_READER) -> None:
        """``answerers``: the operators who may answer approvals (default: the local operator;
        ``"*"`` — any verified operator — only when configured). ``max_pending`` bounds pending
        approvals on the node; finished ones are kept ``keep_finished_s`` and at most ``keep_finished``.
        ``session_facts``: who reads a session's durable state (:mod:`..session_facts`; the coordinator's)."""
        assert self.context is not None
        storage = self.authorities.get("storage")
        self.fence = storage.generation if storage is not None else None
        self.env = open_env(storage_config(self.context.data_dir, map_size))
        self.session_facts = load_reader(session_facts)(self.env, self.fence)  # read only (.orphans)
        self.grants_db = db(self.env, b"grants")
        self.ledger = LedgerStore(self.env, node=self.context.node, kinds=DEFAULT_KINDS, fence=self.fence)
        self.protected = (self.context.data_dir, *(protected or ()))
        self.max_pending = max_pending_per_session
        self.max_pending_total = max_pending
        self.keep_finished_ns, self.keep_finished = int(keep_finished_s * 1e9), keep_finished
        self.node_rules = parse_rules((rules or {}).get("node", ()), Scope.NODE)
        if "session" in (rules or {}):
            raise RuleError("session", "session rules are added per session (AddRules with a session_id), "
                                       "not configured for every session")
        local = ensure_local_operator(self.context.data_dir)
        self.answerers = tuple(answerers) if answerers else (local,)
        self.waiters: dict[str, list[Any]] = {}
        self.corrupt: dict[str, str] = {}  # key in the grants database -> what is wrong with its record (quarantined)
        self.postures, self.stored_rules, self.approvals = self._load()
        configured = {scope: tuple(texts) for scope, texts in (rules or {}).items() if scope != "node"}
        for scope, texts in configured.items():  # configured user/workspace rules join the stored ones
            self.stored_rules[scope] = tuple(dict.fromkeys((*self.stored_rules.get(scope, ()), *texts)))
        # What only the configuration knows, durable for runtimes that decide inline (see .inline); written before
        # the generation is published, so every consumer started under this generation finds it.
        self._commit(policy=Policy(tuple((rules or {}).get("node", ())), configured, self.protected))
        self._deny_orphans()
        self._publish_generation()
        self.wakeupAfter(timedelta(seconds=1), payload=_EXPIRY)

    def on_generation(self, generation: int) -> None:
        self._publish_generation()  # before the supervisor hears it adopted: consumers restart after this

    def _publish_generation(self) -> None:
        """Effects admitted by a decision of a gone generation are refused by the ledger's transaction."""
        if self.generation is None:
            return
        outcome = self.ledger.publish_generation("grants", self.generation)
        if not isinstance(outcome, Committed):
            raise RuntimeError(f"cannot publish grants generation {self.generation}: {outcome}")

    # -- decisions ----------------------------------------------------------------------------------

    def _rules(self, session_id: str) -> tuple[Rule, ...]:
        """Node rules, the stored user and workspace rules, and the session rules of this session only.

        A corrupt record that could change the session's decisions (its posture, a stored rule) raises
        :class:`CorruptRecord` naming it: the decision is ``ask``, never allow (as :mod:`.inline` answers)."""
        unreadable = unreadable_for(self.corrupt, session_id)
        if unreadable:
            raise CorruptRecord(f"grants/{unreadable[0]}", self.corrupt[unreadable[0]])
        return effective_rules(self.node_rules, self.stored_rules, session_id)

    def handle_Decide(self, message: Decide, sender: Any) -> Judged:
        """Every decision is offered to the ledger before it is answered (see :class:`Judged`)."""
        request = message.request
        try:
            root = self._root_of(request.principal, message.root)
            verdict = evaluate(request, self.postures.get(request.principal, Posture.DEFAULT.value),
                               self._rules(request.principal), self.protected, root=root)
        except BadRequest:
            raise
        except Exception as exc:  # the engine failed: ask, never allow
            verdict = Verdict(Decision.ASK, f"engine error: {type(exc).__name__}: {exc}")
        problem = self._record(request, verdict)
        faults.point(DECISION_RECORDED)
        if problem is None:
            return Judged(verdict.decision, verdict.reason, verdict.rule, recorded=True, generation=self.generation)
        if verdict.decision is Decision.ALLOW:
            return Judged(Decision.ASK, f"unrecordable: {verdict.reason} ({problem})", verdict.rule,
                          recorded=False, generation=self.generation)
        return Judged(verdict.decision, f"{verdict.reason} (not recorded: {problem})", verdict.rule,
                      recorded=False, generation=self.generation)

    def _root_of(self, session_id: str, claimed: str | None) -> str | None:
        """The session's workspace root: its live lease's, read from the workspace's durable table.

        A root the request names must be one of the session's leased roots (or inside one) when
        the session holds any; with no lease it is taken as given (the caller owns the session).
        """
        leased = session_roots(self.env, session_id)
        if claimed is None:
            return leased[0] if len(leased) == 1 else None
        if not claimed.startswith("/"):
            raise BadRequest("Decide", "root", "must be an absolute path", repr(claimed[:80]))
        if leased and not any(claimed == r or claimed.startswith(r.rstrip("/") + "/") for r in leased):
            raise BadRequest("Decide", "root", f"is not a workspace root session {session_id!r} holds",
                             repr(claimed[:80]))
        return claimed

    def _record(self, request: Request, verdict: Verdict) -> str | None:
        """The decision as a ledger entry of kind ``permission``; why not, if it could not be recorded."""
        try:
            entry = permission_entry(request, verdict, self.generation or 0)
            status = Status.OK if verdict.decision is Decision.ALLOW else Status.DENIED
            outcome = self.ledger.apply([Start(entry, status, verdict.decision.value)])
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"[:200]
        if not isinstance(outcome, Committed):
            return f"ledger commit {outcome.kind}: {outcome.reason}"[:200]
        if isinstance(outcome.value[0], LedgerError | StaleGeneration):
            return f"ledger refused: {outcome.value[0]}"[:200]
        return None

    def handle_SetPosture(self, message: SetPosture, sender: Any) -> str:
        posture = Posture(message.posture).value
        self._existing(message.session_id, message.session_must_exist)
        self._commit(postures={message.session_id: posture})
        return posture

    def handle_AddRules(self, message: AddRules, sender: Any) -> tuple[str, ...]:
        scope = Scope(message.scope)
        if scope is Scope.NODE:
            raise RuleError(", ".join(message.rules), "node rules come from the configuration only")
        new_rules(message.rules, scope)  # refuse bad patterns before anything is stored
        self._existing(message.session_id, message.session_must_exist)
        key = _rules_key(scope, message.session_id)
        self._intact(f"rules/{key}")
        merged = tuple(dict.fromkeys((*self.stored_rules.get(key, ()), *message.rules)))
        self._commit(rules={key: merged})
        return merged

    def _existing(self, session_id: str | None, must: bool) -> None:
        """Refuse a change for a session no coordinator keeps a record of, when the request says it must exist. A
        record that does not decode is a session that exists (narrowing its posture must stay possible)."""
        if must and session_id is not None and isinstance(self.session_facts(session_id), Missing):
            raise UnknownSession(session_id)

    def handle_RevokeRules(self, message: RevokeRules, sender: Any) -> str:
        scope = Scope(message.scope)
        key = _rules_key(scope, message.session_id)
        self._intact(f"rules/{key}")
        remaining = tuple(r for r in self.stored_rules.get(key, ()) if r not in message.rules)
        self._commit(rules={key: remaining})
        self.change_generation(f"rules revoked in scope {key}")  # consumers restart
        return "revoked"

    def handle_str(self, message: str, sender: Any) -> Any:
        if message == "status":
            return {"generation": self.generation, "rules": {"node": len(self.node_rules),
                                                              **{k: len(v) for k, v in self.stored_rules.items()}},
                    "postures": dict(self.postures),
                    "pending_approvals": sum(1 for a in self.approvals.values() if a.pending),
                    "quarantined": dict(self.corrupt)}
        if message == "rules":  # a read (``ouroactors grants list``): every scope's rule texts, and the postures
            return {"rules": {"node": [str(r) for r in self.node_rules],
                              **{k: list(v) for k, v in sorted(self.stored_rules.items())}},
                    "postures": dict(sorted(self.postures.items()))}
        return self.unhandled(message, sender)



def _rules_key(scope: Scope, session_id: str | None) -> str:
    """Where a scope's rules are stored: ``session/<id>`` for one session's, the scope's name otherwise."""
    return f"{scope.value}/{session_id}" if scope is Scope.SESSION else scope.value


def session_roots(env: lmdb.Environment, session_id: str) -> list[str]:
    """The roots of the session's live leases (active or reserved), from the workspace's table."""
    roots: list[str] = []
    with env.begin() as txn:
        for _key, value in txn.cursor(db=db(env, b"workspace")):
            try:
                lease = lease_from_record(msgpack.unpackb(bytes(value), raw=False))
            except Exception:  # the workspace authority reports its own corrupt records
                continue
            if lease.session_id == session_id and lease.live and lease.root not in roots:
                roots.append(lease.root)
    return roots
