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
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from datetime import timedelta
from typing import Any

import lmdb
import msgpack
from thespian.actors import WakeupMessage

from ...core import clock, faults
from ...core.codec import CodecError, digest_of
from ...core.errors import BadRequest, CommitOutcomeUnknown, CommitRejected, CorruptRecord, StaleGeneration
from ...runtime.coordinator.store import SessionStore
from ...supervision.worker import Worker
from ..ledger.domain import DEFAULT_KINDS, LedgerError, Status
from ..ledger.store import LedgerStore, Start
from ..storage.actor import storage_config
from ..storage.commit import Committed, Rejected, write
from ..storage.env import db, open_env
from ..workspace.leases import lease_from_record
from . import approvals as book
from . import orphans
from .approvals import Approval, ApprovalRefused, Refusal
from .inline import POLICY_KEY, Policy, effective_rules, permission_entry, policy_record
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
    RevokeRules,
    SetPosture,
    WaitApproval,
)
from .operators import CredentialsError, ensure_local_operator, load_operators, verify
from .posture import Posture, evaluate
from .records import QUARANTINE_PREFIX, decode_record, unreadable_for
from .rules import Decision, Request, Rule, RuleError, Scope, Verdict, parse_rules

DECISION_RECORDED = faults.register_point("grants.decision_recorded", "a decision is in the ledger, not yet answered")
APPROVAL_COMMITTED = faults.register_point("grants.approval_committed", "an answer is durable, the waiter not yet told")
_EXPIRY = "ouroactors:approval-expiry"
log = logging.getLogger("ouroactors.grants")
__all__ = [  # the protocol (.messages) is re-exported: callers import it from here
    "AddRules", "AnswerApproval", "ConsumeApproval", "Decide", "Grants", "Judged", "ListApprovals",
    "RequestApproval", "RevokeRules", "SetPosture", "WaitApproval",
]


class Grants(Worker):
    refusals = (ApprovalRefused, RuleError, CredentialsError, LedgerError, CommitRejected, CodecError, ValueError,
                CorruptRecord)
    protocol = PROTOCOL
    reads = READS
    stamped_only = True

    def on_start(self, rules: dict[str, list[str]] | None = None, protected: list[str] | None = None,
                 max_pending_per_session: int = 8, map_size: int | None = None,
                 answerers: list[str] | None = None, max_pending: int = 256,
                 keep_finished_s: float = 7 * 24 * 3600.0, keep_finished: int = 1000) -> None:
        """``answerers``: the operators who may answer approvals (default: the local operator;
        ``"*"`` — any verified operator — only when configured). ``max_pending`` bounds pending
        approvals on the node; finished ones are kept ``keep_finished_s`` and at most ``keep_finished``."""
        assert self.context is not None
        storage = self.authorities.get("storage")
        self.fence = storage.generation if storage is not None else None
        self.env = open_env(storage_config(self.context.data_dir, map_size))
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

    def _deny_orphans(self) -> None:
        """Deny the pending approvals no live interaction can wait for any more (see :mod:`.orphans`): a durable
        session still waiting on one keeps it; a waiter that lived in memory died with the process."""
        pending = [a for a in self.approvals.values() if a.pending]
        if not pending:
            return
        store = SessionStore(self.env, fence=self.fence)  # the coordinator's records, read only (it quarantines)
        sessions: dict[str, orphans.Session] = {}
        for session_id in {a.session_id for a in pending}:
            try:
                found = store.get(session_id)
            except CorruptRecord as exc:
                sessions[session_id] = orphans.Undecodable(str(exc))
            except ValueError:  # not an id a session record can have: no coordinator manages it
                sessions[session_id] = orphans.Missing()
            else:
                sessions[session_id] = orphans.Missing() if found is None else found
        now = clock.time_ns()
        denied: list[Approval] = []
        for approval in pending:
            verdict = orphans.judge(approval, sessions[approval.session_id])
            if isinstance(verdict, str):
                denied.append(book.deny_orphan(approval, now, verdict) or approval)
            elif verdict is orphans.KEEP:
                log.info("approval %s stays pending: session %r still waits on it durably", approval.approval_id,
                         approval.session_id)
        if denied:
            self._commit(approvals=denied)

    def on_generation(self, generation: int) -> None:
        self._publish_generation()  # before the supervisor hears it adopted: consumers restart after this

    def _publish_generation(self) -> None:
        """Effects admitted by a decision of a gone generation are refused by the ledger's transaction."""
        if self.generation is None:
            return
        outcome = self.ledger.publish_generation("grants", self.generation)
        if not isinstance(outcome, Committed):
            raise RuntimeError(f"cannot publish grants generation {self.generation}: {outcome}")

    # -- persistence --------------------------------------------------------------------------------

    def _load(self) -> tuple[dict[str, str], dict[str, tuple[str, ...]], dict[str, Approval]]:
        """Every record of the grants database; one that does not decode is quarantined, reported and fails closed
        on its own (see :mod:`.records`): the rest loads."""
        postures: dict[str, str] = {}
        stored: dict[str, tuple[str, ...]] = {}
        found: dict[str, Approval] = {}
        bad: dict[bytes, bytes] = {}
        with self.env.begin() as txn:
            for raw_key, raw_value in txn.cursor(db=self.grants_db):
                key = bytes(raw_key)
                try:
                    kind, name, data = decode_record(key, bytes(raw_value))
                except CorruptRecord as exc:
                    log.error("grants database, key %r: %s; left in place, failing closed for it", key, exc)
                    bad[key] = bytes(raw_value)
                    self.corrupt[key.decode(errors="replace")] = exc.detail
                    continue
                if kind == "posture":
                    postures[name] = data
                elif kind == "rules" and name == Scope.SESSION.value:
                    log.warning("ignoring %d session rules stored without a session (they would apply to every "
                                "session); add them again per session", len(data))
                elif kind == "rules":
                    stored[name] = data
                elif kind == "approval":
                    found[name] = data
        if bad:
            self._quarantine(bad)
        return postures, stored, found

    def _quarantine(self, bad: dict[bytes, bytes]) -> None:
        """Copy undecodable records to ``quarantine`` as ``grants/<key>`` (the originals stay, failing closed)."""
        def copy(txn: lmdb.Transaction) -> None:
            quarantine = db(self.env, b"quarantine")
            for key, raw in bad.items():
                txn.put(QUARANTINE_PREFIX + key, raw, db=quarantine)

        outcome = write(self.env, copy, fence=self.fence)
        if not isinstance(outcome, Committed):
            log.error("could not copy %d corrupt grants records to quarantine: %s", len(bad), outcome)

    def _commit(self, *, approvals: list[Approval] = (), postures: dict[str, str] | None = None,  # type: ignore[assignment]
                rules: dict[str, tuple[str, ...]] | None = None, forget: list[str] = (),  # type: ignore[assignment]
                policy: Policy | None = None) -> None:
        def put(txn: lmdb.Transaction) -> None:
            if policy is not None:
                txn.put(POLICY_KEY, policy_record(policy), db=self.grants_db)
            for approval_id in forget:
                txn.delete(f"approval/{approval_id}".encode(), db=self.grants_db)
            for approval in approvals:
                txn.put(f"approval/{approval.approval_id}".encode(),
                        msgpack.packb(dataclasses.asdict(approval)), db=self.grants_db)
            for session, posture in (postures or {}).items():
                txn.put(f"posture/{session}".encode(), msgpack.packb(posture), db=self.grants_db)
            for scope, texts in (rules or {}).items():
                txn.put(f"rules/{scope}".encode(), msgpack.packb(list(texts)), db=self.grants_db)

        outcome = write(self.env, put, fence=self.fence)
        if isinstance(outcome, Rejected):
            raise CommitRejected(outcome.reason)
        if not isinstance(outcome, Committed):
            raise CommitOutcomeUnknown(outcome.reason)  # crash: the restart reloads the truth
        for approval in approvals:
            self.approvals[approval.approval_id] = approval
        for approval_id in forget:
            self.approvals.pop(approval_id, None)
        self.postures.update(postures or {})
        self.stored_rules.update(rules or {})
        for session in postures or {}:  # a posture is set in full: the corrupt one is replaced (its copy kept)
            self.corrupt.pop(f"posture/{session}", None)
        if policy is not None:  # rewritten from the configuration, its source
            self.corrupt.pop(POLICY_KEY.decode(), None)

    # -- decisions ----------------------------------------------------------------------------------

    def _rules(self, session_id: str) -> tuple[Rule, ...]:
        """Node rules, the stored user and workspace rules, and the session rules of this session only.

        A corrupt record that could change the session's decisions (its posture, a stored rule) raises
        :class:`CorruptRecord` naming it: the decision is ``ask``, never allow (as :mod:`.inline` answers)."""
        unreadable = unreadable_for(self.corrupt, session_id)
        if unreadable:
            raise CorruptRecord(f"grants/{unreadable[0]}", self.corrupt[unreadable[0]])
        return effective_rules(self.node_rules, self.stored_rules, session_id)

    def _policy_digest(self, session_id: str) -> str:
        """What an approval of ``session_id`` is asked under (see :mod:`.approvals`): the rules that apply to the
        session, its posture, the protected roots and who may answer."""
        rules = effective_rules(self.node_rules, self.stored_rules, session_id)
        parts = [sorted(str(rule) for rule in rules), self.postures.get(session_id, Posture.DEFAULT.value),
                 list(self.protected), list(self.answerers)]
        unreadable = unreadable_for(self.corrupt, session_id)  # a repaired record changes the policy
        return digest_of([*parts, unreadable] if unreadable else parts)

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
        self._commit(postures={message.session_id: posture})
        return posture

    def handle_AddRules(self, message: AddRules, sender: Any) -> tuple[str, ...]:
        scope = Scope(message.scope)
        if scope is Scope.NODE:
            raise RuleError(", ".join(message.rules), "node rules come from the configuration only")
        parse_rules(message.rules, scope)  # refuse bad patterns before anything is stored
        key = _rules_key(scope, message.session_id)
        self._intact(f"rules/{key}")
        merged = tuple(dict.fromkeys((*self.stored_rules.get(key, ()), *message.rules)))
        self._commit(rules={key: merged})
        return merged

    def handle_RevokeRules(self, message: RevokeRules, sender: Any) -> str:
        scope = Scope(message.scope)
        key = _rules_key(scope, message.session_id)
        self._intact(f"rules/{key}")
        remaining = tuple(r for r in self.stored_rules.get(key, ()) if r not in message.rules)
        self._commit(rules={key: remaining})
        self.change_generation(f"rules revoked in scope {key}")  # consumers restart
        return "revoked"

    # -- approvals ----------------------------------------------------------------------------------

    def handle_RequestApproval(self, message: RequestApproval, sender: Any) -> Approval:
        now = clock.time_ns()
        approval = book.request(
            list(self.approvals.values()), approval_id=f"approval-{uuid.uuid4().hex[:12]}",
            session_id=message.session_id, tool=message.tool, call_digest=digest_of([message.tool, message.arguments]),
            state_version=message.state_version, answerers=self.answerers,
            deadline_ns=now + int(message.timeout_s * 1e9), now_ns=now, max_pending=self.max_pending,
            max_pending_total=self.max_pending_total, arguments=message.arguments,
            policy=self._policy_digest(message.session_id),
        )
        self._commit(approvals=[approval])
        return approval

    def handle_WaitApproval(self, message: WaitApproval, sender: Any) -> Approval | None:
        approval = self._approval(message.approval_id)
        if approval.pending:
            self.waiters.setdefault(approval.approval_id, []).append(sender)
            return None  # answered when decided
        return approval

    def handle_AnswerApproval(self, message: AnswerApproval, sender: Any) -> Approval:
        approval = self._approval(message.approval_id)
        assert self.context is not None
        if not verify(load_operators(self.context.data_dir), message.operator, message.token):
            forged = f"answer claiming {message.operator!r}: credentials not verified"
            self._commit(approvals=[book.refuse(approval, forged)])  # the refusal is recorded
            raise ApprovalRefused(forged)
        try:
            decided = book.answer(approval, approve=message.approve, operator=message.operator,
                                  call_digest=message.call_digest, state_version=message.state_version,
                                  now_ns=clock.time_ns(), reason=message.reason)
        except Refusal as refusal:
            self._commit(approvals=[refusal.record])
            self._tell_waiters(refusal.record)
            raise ApprovalRefused(str(refusal)) from None
        self._commit(approvals=[decided])  # durable before the waiter hears it
        faults.point(APPROVAL_COMMITTED)
        self._tell_waiters(decided)
        return decided

    def handle_ConsumeApproval(self, message: ConsumeApproval, sender: Any) -> Approval:
        approval = self._approval(message.approval_id)
        try:
            used = book.consume(approval, session_id=message.session_id, call_digest=message.call_digest,
                                state_version=message.state_version, now_ns=clock.time_ns(),
                                policy=self._policy_digest(message.session_id))
        except Refusal as refusal:
            self._commit(approvals=[refusal.record])
            raise ApprovalRefused(str(refusal)) from None
        self._commit(approvals=[used])
        return used

    def handle_ListApprovals(self, message: ListApprovals, sender: Any) -> list[Approval]:
        return sorted((a for a in self.approvals.values()
                       if (message.status is None or a.status == message.status)
                       and (message.session_id is None or a.session_id == message.session_id)),
                      key=lambda a: a.requested_ns)

    def handle_WakeupMessage(self, message: WakeupMessage, sender: Any) -> None:
        if message.payload == _EXPIRY:
            now = clock.time_ns()
            expired = [x for a in self.approvals.values() if (x := book.expire(a, now)) is not None]
            if expired:
                self._commit(approvals=expired)
                for approval in expired:
                    self._tell_waiters(approval)
            forget = book.prune(list(self.approvals.values()), now, keep_ns=self.keep_finished_ns,
                                keep_max=self.keep_finished)
            if forget:
                self._commit(forget=forget)
            self.wakeupAfter(timedelta(seconds=1), payload=_EXPIRY)

    def handle_str(self, message: str, sender: Any) -> Any:
        if message == "status":
            return {"generation": self.generation, "rules": {"node": len(self.node_rules),
                                                              **{k: len(v) for k, v in self.stored_rules.items()}},
                    "postures": dict(self.postures),
                    "pending_approvals": sum(1 for a in self.approvals.values() if a.pending),
                    "quarantined": dict(self.corrupt)}
        return self.unhandled(message, sender)

    def _intact(self, key: str) -> None:
        """Refuse to merge into a corrupt record: what it held is unknown (its quarantined copy is the evidence)."""
        if key in self.corrupt:
            raise CorruptRecord(f"grants/{key}", f"{self.corrupt[key]}; not changed: what it held is unknown")

    def _approval(self, approval_id: str) -> Approval:
        approval = self.approvals.get(approval_id)
        if approval is None and f"approval/{approval_id}" in self.corrupt:
            raise ApprovalRefused(f"approval {approval_id!r} is corrupt (quarantined; not approved): "
                                  f"{self.corrupt[f'approval/{approval_id}']}")
        if approval is None:
            raise ApprovalRefused(f"no approval {approval_id!r}")
        return approval

    def _tell_waiters(self, approval: Approval) -> None:
        if approval.pending:
            return
        for waiter in self.waiters.pop(approval.approval_id, []):
            self.send(waiter, approval)


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
