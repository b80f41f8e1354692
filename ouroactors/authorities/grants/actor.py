"""The grants authority: authority over actions, outside the model (a leaf LMDB writer).

A request is evaluated narrowing at each layer, never widening: the session's durable posture
first (plan mode refuses write and execute), then the rules (node > user > workspace > session;
deny > ask > allow; nothing matched → ask; writes into ``.git`` and the data dir always refused).
The decision is **recorded in the ledger before it is returned** — this process writes the
node's ledger database itself, in one fenced transaction — and an allow that cannot be recorded
is answered as ``ask``. An engine error is answered as ``ask``, never allow.

Approvals are durable (see :mod:`.approvals`); an operator's answer is verified against the
credentials in the data dir, committed, and only then told to the waiter. At start, pending
approvals no live interaction can wait for any more (waiters live in memory) are denied with that
reason. Revoking rules changes this authority's generation: rest_for_one restarts its consumers.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import lmdb
import msgpack
from thespian.actors import WakeupMessage

from ...core import clock, faults
from ...core.codec import digest_of
from ...core.errors import CommitOutcomeUnknown, CommitRejected, StaleGeneration
from ...supervision.worker import Worker
from ..ledger.domain import DEFAULT_KINDS, LedgerError, StartRequest, Status, fingerprint
from ..ledger.store import LedgerStore, Start
from ..storage.actor import storage_config
from ..storage.commit import Committed, Rejected, write
from ..storage.env import db, open_env
from . import approvals as book
from .approvals import Approval, ApprovalRefused, Refusal
from .operators import CredentialsError, ensure_local_operator, load_operators, verify
from .posture import Posture, evaluate
from .rules import Decision, Request, Rule, RuleError, Scope, Verdict, parse_rules

DECISION_RECORDED = faults.register_point("grants.decision_recorded", "a decision is in the ledger, not yet answered")
APPROVAL_COMMITTED = faults.register_point("grants.approval_committed", "an answer is durable, the waiter not yet told")
_EXPIRY = "ouroactors:approval-expiry"
ORPHANED = "grants authority restarted: no live interaction waits for this approval any more"


@dataclass(frozen=True)
class Decide:
    request: Request


@dataclass(frozen=True)
class SetPosture:
    session_id: str
    posture: str


@dataclass(frozen=True)
class AddRules:
    scope: str
    rules: tuple[str, ...]


@dataclass(frozen=True)
class RevokeRules:
    scope: str
    rules: tuple[str, ...]


@dataclass(frozen=True)
class RequestApproval:
    session_id: str
    tool: str
    arguments: Any
    state_version: int
    answerers: tuple[str, ...] = ("*",)
    timeout_s: float = 300.0


@dataclass(frozen=True)
class WaitApproval:
    approval_id: str


@dataclass(frozen=True)
class AnswerApproval:
    approval_id: str
    approve: bool
    operator: str
    token: str
    call_digest: str
    state_version: int
    reason: str | None = None


@dataclass(frozen=True)
class ConsumeApproval:
    approval_id: str
    session_id: str
    call_digest: str
    state_version: int


@dataclass(frozen=True)
class ListApprovals:
    status: str | None = None
    session_id: str | None = None


class Grants(Worker):
    refusals = (ApprovalRefused, RuleError, CredentialsError, LedgerError, CommitRejected, ValueError)

    def on_start(self, rules: dict[str, list[str]] | None = None, protected: list[str] | None = None,
                 max_pending_per_session: int = 8, map_size: int | None = None) -> None:
        assert self.context is not None
        storage = self.authorities.get("storage")
        self.fence = storage.generation if storage is not None else None
        self.env = open_env(storage_config(self.context.data_dir, map_size))
        self.grants_db = db(self.env, b"grants")
        self.ledger = LedgerStore(self.env, node=self.context.node, kinds=DEFAULT_KINDS, fence=self.fence)
        self.protected = (self.context.data_dir, *(protected or ()))
        self.max_pending = max_pending_per_session
        self.node_rules = parse_rules((rules or {}).get("node", ()), Scope.NODE)
        ensure_local_operator(self.context.data_dir)
        self.waiters: dict[str, list[Any]] = {}
        self.postures, self.stored_rules, self.approvals = self._load()
        for scope, texts in (rules or {}).items():  # configured user/workspace rules join the stored ones
            if scope != "node":
                self.stored_rules[scope] = tuple(dict.fromkeys((*self.stored_rules.get(scope, ()), *texts)))
        now = clock.time_ns()
        orphans = [x for a in self.approvals.values() if (x := book.deny_orphan(a, now, ORPHANED)) is not None]
        if orphans:
            self._commit(approvals=orphans)
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

    # -- persistence --------------------------------------------------------------------------------

    def _load(self) -> tuple[dict[str, str], dict[str, tuple[str, ...]], dict[str, Approval]]:
        postures: dict[str, str] = {}
        stored: dict[str, tuple[str, ...]] = {}
        found: dict[str, Approval] = {}
        with self.env.begin() as txn:
            for key, value in txn.cursor(db=self.grants_db):
                kind, _, name = bytes(key).decode().partition("/")
                data = msgpack.unpackb(bytes(value), raw=False)
                if kind == "posture":
                    postures[name] = data
                elif kind == "rules":
                    stored[name] = tuple(data)
                elif kind == "approval":
                    data["answerers"] = tuple(data["answerers"])
                    data["refusals"] = tuple(data["refusals"])
                    found[name] = Approval(**data)
        return postures, stored, found

    def _commit(self, *, approvals: list[Approval] = (), postures: dict[str, str] | None = None,  # type: ignore[assignment]
                rules: dict[str, tuple[str, ...]] | None = None) -> None:
        def put(txn: lmdb.Transaction) -> None:
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
        self.postures.update(postures or {})
        self.stored_rules.update(rules or {})

    # -- decisions ----------------------------------------------------------------------------------

    def _rules(self) -> tuple[Rule, ...]:
        out = list(self.node_rules)
        for scope, texts in self.stored_rules.items():
            out.extend(parse_rules(texts, Scope(scope)))
        return tuple(out)

    def handle_Decide(self, message: Decide, sender: Any) -> Verdict:
        request = message.request
        try:
            verdict = evaluate(request, self.postures.get(request.principal, Posture.DEFAULT.value), self._rules(),
                               self.protected)
        except Exception as exc:  # the engine failed: ask, never allow
            verdict = Verdict(Decision.ASK, f"engine error: {type(exc).__name__}: {exc}")
        recorded = self._record(request, verdict)
        faults.point(DECISION_RECORDED)
        if not recorded and verdict.decision is Decision.ALLOW:
            return Verdict(Decision.ASK, f"unrecordable: {verdict.reason}", verdict.rule)
        return verdict

    def _record(self, request: Request, verdict: Verdict) -> bool:
        """The decision as a ledger entry of kind ``permission``; False if it could not be recorded."""
        arguments = {"tool": request.tool, "effect": request.effect.value, "paths": list(request.paths),
                     "command": request.command, "domains": list(request.domains)}
        effect_id = f"permission-{uuid.uuid4().hex}"
        entry = StartRequest(effect_id=effect_id, kind="permission", idempotency_key=effect_id,
                             fingerprint=fingerprint("permission", arguments), principal=request.principal,
                             session_id=request.principal, turn_id=None, call_id=None,
                             grant=str(verdict.rule) if verdict.rule else None,
                             authority={"grants": self.generation or 0},
                             cause=f"{verdict.decision.value}: {verdict.reason}"[:500])
        status = Status.OK if verdict.decision is Decision.ALLOW else Status.DENIED
        try:
            outcome = self.ledger.apply([Start(entry, status, verdict.decision.value)])
        except Exception:
            return False
        return isinstance(outcome, Committed) and not isinstance(outcome.value[0], LedgerError | StaleGeneration)

    def handle_SetPosture(self, message: SetPosture, sender: Any) -> str:
        posture = Posture(message.posture).value
        self._commit(postures={message.session_id: posture})
        return posture

    def handle_AddRules(self, message: AddRules, sender: Any) -> tuple[str, ...]:
        scope = Scope(message.scope)
        if scope is Scope.NODE:
            raise RuleError(", ".join(message.rules), "node rules come from the configuration only")
        parse_rules(message.rules, scope)  # refuse bad patterns before anything is stored
        merged = tuple(dict.fromkeys((*self.stored_rules.get(scope.value, ()), *message.rules)))
        self._commit(rules={scope.value: merged})
        return merged

    def handle_RevokeRules(self, message: RevokeRules, sender: Any) -> str:
        scope = Scope(message.scope)
        remaining = tuple(r for r in self.stored_rules.get(scope.value, ()) if r not in message.rules)
        self._commit(rules={scope.value: remaining})
        self.change_generation(f"rules revoked in scope {scope.value}")  # consumers restart
        return "revoked"

    # -- approvals ----------------------------------------------------------------------------------

    def handle_RequestApproval(self, message: RequestApproval, sender: Any) -> Approval:
        now = clock.time_ns()
        approval = book.request(
            list(self.approvals.values()), approval_id=f"approval-{uuid.uuid4().hex[:12]}",
            session_id=message.session_id, tool=message.tool, call_digest=digest_of([message.tool, message.arguments]),
            state_version=message.state_version, answerers=tuple(message.answerers),
            deadline_ns=now + int(message.timeout_s * 1e9), now_ns=now, max_pending=self.max_pending,
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
                                state_version=message.state_version)
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
            self.wakeupAfter(timedelta(seconds=1), payload=_EXPIRY)

    def handle_str(self, message: str, sender: Any) -> Any:
        if message == "status":
            return {"generation": self.generation, "rules": {"node": len(self.node_rules),
                                                              **{k: len(v) for k, v in self.stored_rules.items()}},
                    "postures": dict(self.postures),
                    "pending_approvals": sum(1 for a in self.approvals.values() if a.pending)}
        return self.unhandled(message, sender)

    def _approval(self, approval_id: str) -> Approval:
        approval = self.approvals.get(approval_id)
        if approval is None:
            raise ApprovalRefused(f"no approval {approval_id!r}")
        return approval

    def _tell_waiters(self, approval: Approval) -> None:
        if approval.pending:
            return
        for waiter in self.waiters.pop(approval.approval_id, []):
            self.send(waiter, approval)
