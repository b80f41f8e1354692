"""The write-ahead effect ledger, as pure decisions (no LMDB, no thespian).

The lifecycle of one effect::

    permission decision -> record_started (durable) -> run the effect -> record_settled(ok | failed)
                                                      \\-> (or) record_denied

No durable start, no effect. A ``started`` entry is never evicted and never turned into
``failed`` by recovery: when the ledger starts, every entry still ``started`` becomes
``ambiguous`` ("runtime restarted before settlement") — process death is not proof that the
effect failed. The reconciler registered for the entry's kind (with evidence) or a verified
operator (with a reason) may later settle an ambiguous entry — nobody else, whatever evidence they
present; otherwise it stays ambiguous, visibly.

Idempotency: the same effect id with the same fingerprint (digest of kind + canonical arguments)
answers the existing entry; the same id with another fingerprint is a conflict.

Each function here takes the current entry (or None) and returns a decision; the store applies it
inside one write transaction, so a decision and its durable record cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from pydantic import Field, ValidationError, field_validator

from ...core.codec import Record, digest_of
from ...core.errors import OuroactorsError


class Status(str, Enum):
    STARTED = "started"
    OK = "ok"
    FAILED = "failed"
    DENIED = "denied"
    AMBIGUOUS = "ambiguous"


SETTLEMENTS = (Status.OK, Status.FAILED)  # what a runner, reconciler or operator may settle with
TERMINAL = (Status.OK, Status.FAILED, Status.DENIED)

DEFAULT_KINDS = frozenset({
    "tool_call", "read", "shell", "file_write", "http_request", "inference", "permission", "approval", "example",
    "compensation",
})
RESTARTED_BEFORE_SETTLEMENT = "runtime restarted before settlement"
INTENT = "intent"  # the evidence key a start's intent is kept under (see StartRequest.intent)
MAX_TEXT = 512


class LedgerError(OuroactorsError, ValueError):
    """A request the ledger refuses; nothing durable changed."""


class UnknownEffect(LedgerError):
    pass


class EffectConflict(LedgerError):
    pass


class AlreadySettled(LedgerError):
    pass


class UnknownEffectKind(LedgerError):
    pass


def fingerprint(kind: str, arguments: Any) -> str:
    """The digest that says what an effect does: kind plus canonical arguments."""
    return digest_of([kind, arguments])


class StartRequest(Record):
    """What a caller asks the ledger to record before running an effect."""

    SCHEMA: ClassVar[str] = "ledger.start_request"
    VERSION: ClassVar[int] = 1

    effect_id: str = Field(min_length=1, max_length=200)
    kind: str = Field(min_length=1, max_length=64)
    idempotency_key: str = Field(min_length=1, max_length=200)
    fingerprint: str = Field(pattern=r"^[0-9a-f]{64}$")
    principal: str = Field(min_length=1, max_length=200)
    session_id: str | None = Field(None, max_length=200)
    turn_id: str | None = Field(None, max_length=200)
    call_id: str | None = Field(None, max_length=200)
    authority: dict[str, int] = Field(default_factory=dict)  # authority snapshot: name -> generation
    grant: str | None = Field(None, max_length=MAX_TEXT)
    cause: str | None = Field(None, max_length=MAX_TEXT)
    # What the effect is meant to leave behind, for its kind's reconciler (e.g. a file write's path and digests):
    # kept in the entry's evidence as ``intent`` from its start on, so a reconciler can look at the world.
    intent: dict[str, Any] | None = Field(default=None, max_length=16)


class Entry(Record):
    """One effect in the ledger (the durable record)."""

    SCHEMA: ClassVar[str] = "ledger.entry"
    VERSION: ClassVar[int] = 1

    seq: int
    effect_id: str
    kind: str
    idempotency_key: str
    fingerprint: str
    principal: str
    session_id: str | None
    turn_id: str | None
    call_id: str | None
    authority: dict[str, int]
    grant: str | None
    cause: str | None
    status: Status
    node: str
    started_ns: int
    settled_ns: int | None = None
    reason: str | None = None  # why it is ambiguous, denied, failed, or how it was settled
    evidence: dict[str, Any] | None = None
    settled_by: str | None = None

    @field_validator("reason")
    @classmethod
    def _short_reason(cls, value: str | None) -> str | None:
        return value if value is None or len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def same_effect(self, request: StartRequest) -> bool:
        return self.kind == request.kind and self.fingerprint == request.fingerprint


# -- decisions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Created:
    entry: Entry

    answer = "created"


@dataclass(frozen=True)
class Existing:
    entry: Entry

    answer = "existing"


def check_kind(kind: str, kinds: frozenset[str]) -> None:
    if kind not in kinds:
        raise UnknownEffectKind(f"unknown effect kind {kind!r}; known kinds: {', '.join(sorted(kinds))}")


def decide_start(current: Entry | None, request: StartRequest, *, seq: int, now_ns: int, node: str,
                 kinds: frozenset[str], status: Status = Status.STARTED, reason: str | None = None
                 ) -> Created | Existing:
    """record_started (or record_denied with ``status=DENIED``): create, or answer the existing entry."""
    check_kind(request.kind, kinds)
    if current is not None:
        if not current.same_effect(request):
            raise EffectConflict(
                f"effect {request.effect_id!r} already recorded with another fingerprint "
                f"({current.kind} {current.fingerprint[:12]}…, asked {request.kind} {request.fingerprint[:12]}…)"
            )
        return Existing(current)
    fields = dict(request.__dict__)  # the request's fields (validated again as the entry's: no dump of them first)
    intent = fields.pop("intent")
    entry = Entry(
        seq=seq, node=node, started_ns=now_ns, status=status, reason=reason,
        settled_ns=now_ns if status in TERMINAL else None, evidence={INTENT: intent} if intent else None,
        **fields,
    )
    return Created(entry)


def decide_settle(current: Entry | None, effect_id: str, status: Status | str, *, now_ns: int,
                  reason: str | None, evidence: dict[str, Any] | None, by: str,
                  operator: bool = False, reconciler: bool = False) -> Created | Existing:
    """Settle ``started`` (the runner) or ``ambiguous`` (a reconciler or an operator) as ok | failed.

    Settling again with the same status is idempotent (answers the entry); with another status it
    is refused. An ambiguous entry is settled only by a verified operator with a reason
    (``operator``) or by the reconciler registered for its kind with evidence (``reconciler``;
    ``by`` then names it): a runner's word is what was lost, so it cannot settle it.
    """
    try:
        wanted = Status(status)
    except ValueError:
        raise LedgerError(f"settlement status {status!r} is not one of: ok, failed") from None
    if wanted not in SETTLEMENTS:
        raise LedgerError(f"settlement status {wanted.value!r} is not one of: ok, failed")
    if current is None:
        raise UnknownEffect(f"no effect {effect_id!r} in the ledger")
    if current.terminal:
        if current.status is wanted:
            return Existing(current)
        raise AlreadySettled(f"effect {effect_id!r} is already {current.status.value}, cannot settle {wanted.value}")
    if current.status is Status.AMBIGUOUS and not ((reconciler and evidence) or (operator and reason)):
        raise LedgerError(f"effect {effect_id!r} is ambiguous: only a verified operator (with a reason) or the "
                          f"reconciler registered for kind {current.kind!r} (with evidence) may settle it")
    if reconciler and by != f"reconciler:{current.kind}":
        raise LedgerError(f"effect {effect_id!r} is of kind {current.kind!r}: {by} is not its reconciler")
    intent = (current.evidence or {}).get(INTENT)
    if intent is not None and not (evidence and INTENT in evidence):  # the start's intent stays on the record
        evidence = {**(evidence or {}), INTENT: intent}
    try:
        settled = Entry.model_validate({
            **current.__dict__, "status": wanted, "settled_ns": now_ns, "reason": reason, "evidence": evidence,
            "settled_by": by,
        })
    except ValidationError as exc:  # e.g. evidence that is not a dict with str keys
        raise LedgerError(f"effect {effect_id!r}: invalid settlement: {exc}") from None
    return Created(settled)


def decide_ambiguous(current: Entry, *, now_ns: int, reason: str = RESTARTED_BEFORE_SETTLEMENT) -> Entry | None:
    """Recovery: a ``started`` entry becomes ``ambiguous`` (never failed); others are left alone."""
    if current.status is not Status.STARTED:
        return None
    return current.model_copy(update={"status": Status.AMBIGUOUS, "reason": reason, "settled_ns": now_ns})
