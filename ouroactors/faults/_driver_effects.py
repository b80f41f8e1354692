"""The synthetic driver's effect steps: grant → record the start → the effect → record the settlement.

**Honesty rules.** The decisions are the runtime's own: :mod:`ouroactors.runtime.execution.honesty`
(one table, used by the live runtime's effect path too). A tool runs only on a ``created`` start;
an ``existing`` one is never run again (``ambiguous``: recovery and its reconciler own it);
``StaleGeneration`` for ``grants`` decides again (bounded); a world answer that is no answer
(timeout, transport error) is ``unknown`` and is **never** settled — left ``started``, ambiguous
after recovery; only a definite refusal by the world (HTTP 409, nothing created) is ``failed``;
``deny`` is ``record_denied`` and never runs. Where the table says *stop* (a stale stamp of
another authority, a commit outcome unknown) the runtime crashes; this driver gives the effect up.

**Transport rules** (only because this driver is outside the tree and talks by messages; the
runtime's ledger writes are direct, so it never needs them):

* Any error or timeout while recording a start: the start is asked again (same id, same
  fingerprint: idempotent) until the ledger answers or the deadline passes; nothing runs meanwhile.
* ``existing`` with status ``started`` for an effect this driver never called: our own earlier
  ask was committed but its answer lost. The world is asked for the key: seen → settled ``ok``
  with the world's record as evidence; not seen → the effect is run (this driver never ran it).
* The grant: an answer lost (timeout, crash, restart) → ask again; ``ask`` (nobody answers
  approvals here; also the authority's answer for an allow it could not record) → ask again until
  the deadline, then give the effect up unrecorded.
* Every request to an authority is stamped with the generation the driver is bound to; a
  ``StaleGeneration`` answer re-binds (looks the generation up again) and asks again.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

import httpx

from ..authorities.grants.actor import Decide
from ..authorities.grants.rules import Effect, Request, Verdict
from ..authorities.ledger.actor import (
    LedgerAnswer,
    RecordBatch,
    RecordDenied,
    RecordSettled,
    RecordStarted,
)
from ..authorities.ledger.domain import StartRequest, Status, fingerprint
from ..core import clock
from ..core.errors import StaleGeneration
from ..runtime.execution.honesty import (
    Admission,
    RecordAction,
    StartAction,
    StartStep,
    ToolAction,
    on_record_answer,
    on_settle_answer,
    on_start_answer,
    on_tool_outcome,
    on_verdict,
)
from ._driver_base import _STEP, _WAIT, DriverBase, _describe
from .workload_config import DENIED_HOST, EFFECT_KIND, PERMISSION_KIND, PRINCIPAL, EffectSpec, GrantDecision
from .workload_record import EffectRecord
from .world import WorldError


class EffectSteps(DriverBase):
    """The effect steps of :class:`~.workload.Driver` (its base class)."""

    # -- the grant ------------------------------------------------------------------------------------------

    def grant_request(self, spec: EffectSpec) -> Request:
        """What the grants authority is asked for ``spec``: a network call of tool ``http_request`` — the POST the
        world is sent, with its method, so grants judge it as the write it is (``WebWrite``), as they judge the
        runtime's ``http`` tool."""
        host = DENIED_HOST if spec.forbidden else self.world_host
        return Request(principal=spec.session_id, tool=EFFECT_KIND, effect=Effect.NETWORK, domains=(host,),
                       method="POST")

    def _decide(self, spec: EffectSpec, record: EffectRecord) -> Generator[str, None, GrantDecision | str]:
        """The grant for ``spec`` (a string: why there is none; the effect is then given up unrecorded)."""
        if self.targets.grants is None:
            decision = self.grant(spec)
            record.grant_answers.append("allow" if decision.allow else "deny")
            return decision
        path = self.targets.grants
        deadline = clock.monotonic() + self.config.op_deadline
        request = self.grant_request(spec)
        while True:
            # _ask stamps the generation, asks again after a lost answer (timeout, crash, restart) and
            # after StaleGeneration; every Decide is recorded by the authority (a new decision each time).
            result = yield from self._ask(path, Decide(request))
            verdict = result.value if result.ok else None
            if not isinstance(verdict, Verdict):
                answer = result.error if result.error is not None else result.value
                record.grant_answers.append(f"error:{type(answer).__name__}")
                return f"no grant ({_describe(answer)})"
            record.grant_answers.append(verdict.decision.value)
            if on_verdict(verdict.decision) is not Admission.APPROVAL:
                rule = str(verdict.rule) if verdict.rule is not None else "grants"
                return GrantDecision(on_verdict(verdict.decision) is Admission.START, verdict.reason[:400],
                                     rule=rule[:200],
                                     generation=self.generations.get(path))  # the stamp it was answered under
            # ask: nobody answers approvals in this workload (a session would wait for an operator).
            # It is also the answer for an allow the authority could not record: ask again.
            if clock.monotonic() > deadline:
                return f"not granted: asked for approval ({verdict.reason[:200]})"
            yield _WAIT

    # -- one effect ------------------------------------------------------------------------------------------

    def _effect(self, spec: EffectSpec) -> Generator[str, None, None]:
        """Decide, record the start and act on the ledger's answer by :mod:`~ouroactors.runtime.execution.honesty`'s
        table (the runtime's own rules); what differs is transport, handled here and in :meth:`_ask`."""
        record = self.record.effects[spec.effect_id]
        decisions = 0
        while True:
            admitted = yield from self._admit(spec, record)
            if admitted is None:
                return
            decision, answer = admitted
            decisions += 1
            if not decision.allow:
                self._denied(record, answer)
                return
            step = on_start_answer(answer, decisions)
            if step.action is not StartAction.REDECIDE:
                break
            # The grant was decided under a grants generation that is gone: the ledger refused the
            # start (nothing recorded, nothing run). Decide again under the current one.
            self.generations.pop(self.targets.grants or "", None)
            record.start_answers.append(f"error:StaleGeneration({answer.authority})")
        if step.action is StartAction.NOT_RECORDED and isinstance(answer, StaleGeneration):
            record.start_answers.append(f"error:StaleGeneration({answer.authority})")
            record.outcome = f"abandoned: grants changed generation {decisions} times in a row"
            return
        if step.action in (StartAction.NOT_RECORDED, StartAction.BROKEN):
            # The runtime would crash on BROKEN; a driver outside the tree can only stop this effect. The
            # transient answers were asked again by _ask until its deadline: nothing is known, nothing runs.
            record.start_answers.append(f"error:{type(answer).__name__}")
            record.outcome = (f"abandoned: start not recorded ({_describe(answer)})" if answer is not None
                              else "abandoned: start not recorded")
            return
        assert isinstance(answer, LedgerAnswer)
        yield from self._run(spec, record, step, answer)

    def _admit(self, spec: EffectSpec, record: EffectRecord
               ) -> Generator[str, None, tuple[GrantDecision, Any] | None]:
        """Decide and ask the ledger to record the start (or the denial): the decision and the ledger's answer
        (a LedgerAnswer, a refusal or an error), or None when there is no grant (``record.outcome`` says why)."""
        granted = yield from self._decide(spec, record)
        if isinstance(granted, str):
            record.outcome = f"abandoned: {granted}"  # nothing recorded, nothing run
            return None
        decision = granted
        by = "grants" if self.targets.grants is not None else "callable"

        def batch() -> RecordBatch:  # built per try: the authority snapshot follows re-binding
            request = self._start_request(spec, decision)
            permission = self._permission_request(spec, decision)
            return RecordBatch((
                RecordStarted(permission),
                RecordSettled(permission.effect_id, "ok", reason=decision.reason,
                              evidence={"allow": decision.allow, "rule": decision.rule, "by": by,
                                        "generation": decision.generation}),
                RecordStarted(request) if decision.allow else RecordDenied(request, decision.reason),
            ))

        result = yield from self._ask(self.targets.ledger, batch)
        answer = result.value[-1] if result.ok and isinstance(result.value, list) else result.error
        return decision, answer

    def _denied(self, record: EffectRecord, answer: Any) -> None:
        if on_record_answer(answer) is not RecordAction.RECORDED:
            record.start_answers.append(f"error:{type(answer).__name__}")
            record.outcome = f"abandoned: denial not recorded ({_describe(answer)})"
            return
        entry = answer.entry
        self._committed(record, answer)
        record.outcome = "denied" if entry.status is Status.DENIED else f"already-{entry.status.value}"

    @staticmethod
    def _committed(record: EffectRecord, answer: LedgerAnswer) -> None:
        entry = answer.entry
        record.start_answers.append(f"{answer.answer}:{entry.status.value}")
        record.start_committed = True
        record.start_seq = entry.seq
        record.start_generation = entry.authority.get("ledger")

    def _run(self, spec: EffectSpec, record: EffectRecord, step: StartStep,
             answer: LedgerAnswer) -> Generator[str, None, None]:
        """Run the effect if the table says so, then settle what the world told us."""
        entry = answer.entry
        self._committed(record, answer)
        if step.action is StartAction.NOT_AGAIN:
            if entry.status is not Status.STARTED:
                # ambiguous: recovery and its reconciler own it; terminal: it is done.
                ambiguous = entry.status is Status.AMBIGUOUS
                record.outcome = "left-ambiguous" if ambiguous else f"already-{entry.status.value}"
                return
            # Transport, not honesty: the runtime never meets an ``existing`` start it has not run (its
            # writes are direct). This driver does — its own earlier ask committed, the answer lost — and
            # it knows it never called the world for this key. It asks the world which is true.
            try:
                seen = self.world.lookup(spec.key)
            except (httpx.HTTPError, WorldError) as exc:
                record.outcome = f"left-started: world unreachable for the check ({exc!r})"
                return
            if seen is not None:
                yield from self._settle(spec, record, "ok", {"world": seen, "reconciled_by": "driver"})
                return
        yield _STEP
        record.effect_called = True
        record.effect_called_ns = time.time_ns()
        try:
            world_answer: dict[str, Any] | None = self.world.create(
                spec.key, spec.payload(self.config.effect_timeout * 2), timeout=self.config.effect_timeout)
            status = "failed" if world_answer and world_answer.get("refused") else "ok"  # a 409: nothing created
        except (httpx.HTTPError, WorldError) as exc:
            world_answer, status = None, "unknown"
            why = type(exc).__name__
        record.effect_answer = world_answer
        if on_tool_outcome(status) is ToolAction.LEAVE_STARTED:
            record.outcome = f"left-started: no answer from the world ({why})"
            return  # it may have happened: never settled as failed
        yield from self._settle(spec, record, status, {"world": world_answer})

    def _settle(self, spec: EffectSpec, record: EffectRecord, status: str,
                evidence: dict[str, Any]) -> Generator[str, None, None]:
        reason = "refused by the world" if status == "failed" else None
        tries = 1
        while True:  # a refused settlement is made again, as the runtime does (.honesty SETTLE_TRIES)
            result = yield from self._ask(self.targets.ledger, RecordSettled(spec.effect_id, status, reason=reason,
                                                                             evidence=evidence))
            answer = result.value if result.ok else result.error
            if on_settle_answer(answer, tries) is not RecordAction.RETRY:
                break
            record.settle_answers.append(f"error:{type(answer).__name__}")
            tries += 1
        if isinstance(answer, LedgerAnswer):
            record.settle_answers.append(f"{answer.answer}:{answer.entry.status.value}")
            if answer.answer == "created":
                record.settle_created += 1
            record.settled = answer.entry.status.value
            record.outcome = f"settled-{answer.entry.status.value}"
            return
        record.settle_answers.append(f"error:{type(answer).__name__}")
        record.outcome = f"left-started: settlement not recorded ({_describe(answer)})"

    def _start_request(self, spec: EffectSpec, decision: GrantDecision) -> StartRequest:
        return StartRequest(
            effect_id=spec.effect_id, kind=EFFECT_KIND, idempotency_key=spec.key,
            fingerprint=fingerprint(EFFECT_KIND, spec.arguments()), principal=PRINCIPAL,
            session_id=spec.session_id, turn_id=f"t{spec.index}", call_id=f"c{spec.index}",
            authority=self._authority_snapshot(decision), grant=f"{spec.effect_id}/grant", cause=None,
        )

    def _permission_request(self, spec: EffectSpec, decision: GrantDecision) -> StartRequest:
        return StartRequest(
            effect_id=f"{spec.effect_id}/grant", kind=PERMISSION_KIND, idempotency_key=f"{spec.key}/grant",
            fingerprint=fingerprint(PERMISSION_KIND, {"effect": spec.effect_id, "allow": decision.allow,
                                                      "rule": decision.rule}),
            principal=PRINCIPAL, session_id=spec.session_id, turn_id=f"t{spec.index}",
            call_id=f"c{spec.index}", authority=self._authority_snapshot(decision), grant=None, cause=decision.reason,
        )
