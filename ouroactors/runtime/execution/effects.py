"""The live effect port: every tool call goes grants → ledger start → tool → settlement, in that order.

The decisions at each step are :mod:`.honesty`'s table (the one implementation; the chaos workload's
driver follows the same table); this module is the shell that asks and acts (DESIGN.md "Ledger"):

* **No durable start, no effect.** A tool runs only after the ledger answered ``created`` for its start. An
  ``existing`` entry (the same effect id recorded before — a turn replayed after a restart) is never run again:
  the model is told what the ledger holds. A start the ledger could not record (``CommitRejected``, a bad
  request) runs nothing.
* **Decisions come first and are fenced.** The grants authority judges the call's real action (paths resolved
  on disk, the command unwrapped) for this session and its workspace root. ``deny`` is recorded
  (``record_denied``) and reported to the model as a tool error; ``ask`` parks the call on a durable approval
  and goes on only when an operator answered it. A start whose decision was made under a grants generation that
  has gone since is refused by the ledger's transaction; the call is decided again (at most
  :data:`~.honesty.REDECIDE_TRIES` decisions).
* **Uncertainty stays visible.** A tool that cannot tell whether its effect happened (``unknown``: a request sent
  but no reply) is *not* settled: the entry stays ``started`` and becomes ``ambiguous`` for the reconciler. A
  cancelled tool (interrupt, deadline, runtime stop) is not settled either, for the same reason. Only ``ok`` and
  ``failed`` — what the tool observed — are settled, with the tool's evidence.
* **One file, one call at a time.** A tool that writes files (``Tool.writes_files``: write, edit) holds their write
  locks (:mod:`.tools._serial`) from its intent through its run — an ask's wait included — so sibling calls of a
  turn on one file run in turn, each start's digests those of the content it ran on.
* **Stale stamps crash the runtime.** ``StaleGeneration`` for storage or the ledger, or a commit whose outcome
  is unknown, means the authorities this runtime was started against are gone or unsure: the runtime crashes and
  rest_for_one restarts it against the new generations. It never guesses.

**Where the ledger calls run.** They block for a synced LMDB commit (0.3-1 ms). A call that is alone (the usual
case: one tool call per model turn) commits **on the loop's own thread**: a hop to a worker thread and back costs
about as much as the commit (two thread wake-ups and two GIL hand-offs, 0.2-0.4 ms each way measured here), and the
loop has nothing else to do meanwhile — an actor call into the loop (drain, steer, interrupt) waits at most that
commit and the step's own work around it (a model turn's lone call does not yield before its commits: no sibling
waits to run), well under a millisecond. When several calls of one model turn are in flight they go through trio's
worker threads instead, so they share group commits (:class:`~ouroactors.authorities.ledger.LedgerWriter` commits
what its threads queued together). Either way the commit is not cancellable: a start or a settlement is recorded or
it is not.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import trio

from ...authorities.grants.inline import InlineGrants, NoPolicy, permission_entry
from ...authorities.grants.proposal import shown
from ...authorities.grants.rules import Decision, Request, Verdict
from ...authorities.ledger.domain import StartRequest, fingerprint
from ...authorities.ledger.messages import RecordDecision, RecordDenied, RecordStarted
from ...core import faults
from ...core.errors import OuroactorsError, StaleGeneration
from ..sandbox import SandboxMode
from . import timing
from .binding import KEY as BINDING_KEY
from .binding import judged_against
from .effect_ports import GrantsPort as GrantsPort  # re-exported: declared there
from .effect_ports import LedgerPort as LedgerPort
from .honesty import (
    REDECIDE_TRIES,
    Admission,
    RecordAction,
    StartAction,
    ToolAction,
    on_approval,
    on_denial_answer,
    on_record_answer,
    on_settle_answer,
    on_start_answer,
    on_tool_outcome,
    on_verdict,
)
from .loop import CallContext, ParsedCall, ToolResult
from .metrics import TurnStats
from .recorded import recorded_result, report
from .tools import ToolContext, ToolError
from .tools._serial import serialised
from .tools.base import BoundaryRecord

# Named boundaries for crash enumeration (ouroactors.faults.session_enumerate); free unless a plan is armed.
EFFECT_STARTED = faults.register_point("effect.started", "the ledger holds the start, the tool has not run")
EFFECT_RAN = faults.register_point("effect.ran", "the tool ran, its settlement is not committed")
EFFECT_SETTLED = faults.register_point("effect.settled", "the settlement is committed, the loop not yet told")


def cut_short(cause: str) -> str:
    """The ledger's reason for a start whose tool a cancel stopped while it ran (``cause``: the loop's word for the
    cancel: ``interrupted``, the deadline, a stop; :meth:`LedgerWriter.record_cut_short`)."""
    return f"cancelled while it ran ({cause}): the tool was stopped, and what it did before that is unknown"


def unknown_outcome(error: str | None) -> str:
    """The ledger's reason for a start whose tool could not tell whether it acted (a request sent, no answer)."""
    return f"the tool could not tell whether it acted: {error or 'no reason given'}"[:500]


T = TypeVar("T")
_MAX_ID = 200  # ToolContext's max_length for its call and effect ids (effect ids are cut to it: effect_id_of)


class EffectPathBroken(OuroactorsError):
    """The authorities this runtime was bound to are gone or unsure (stale stamp, unknown commit): crash."""


@dataclass
class EffectSettings:
    """What every call of one session shares."""

    session: str
    root: str | None  # the leased workspace root (canonical); None: no file or shell tool may run
    sandbox_mode: SandboxMode
    data_dir: str | None
    authority: dict[str, int]  # the authority snapshot stamped on every start (name -> generation)
    network_domains: tuple[str, ...] = ()
    network_private: tuple[str, ...] = ()
    # True when the session continues an earlier runtime's journal: a turn may be re-run, so an effect may be in the
    # ledger already and is looked up before anything is decided. A fresh session has nothing to look up.
    resumed: bool = False


def effect_id_of(session: str, turn: int, call_id: str) -> str:
    """A call's effect id: stable for the same session, turn and model call id (a replayed start is ``existing``)."""
    return f"{session}/t{turn}/{call_id}"[:200]


class LiveEffects:
    """:class:`~.loop.EffectPort` for a live session (see the module docstring for the rules)."""

    def __init__(self, settings: EffectSettings, grants: GrantsPort, ledger: LedgerPort,
                 on_event: Callable[[str, dict[str, Any]], None] | None = None, journal: Any = None,
                 inline: InlineGrants | None = None, stats: TurnStats | None = None, publication: Any = None) -> None:
        self.settings = settings
        self.stats = stats  # counts each call's outcome and its effect path's latency (runtime metrics)
        self.inline = inline
        self.grants = grants
        self.ledger = ledger
        self.on_event = on_event or (lambda kind, fields: None)
        # The session's journal rides in the ledger's start and settle transactions (its staged records are put
        # inside them): a tool call costs those two synced commits and no commit of the journal's own.
        self.journal = journal
        # So does the output a tool call's start follows (``publication``, :mod:`.carried`): no checkpoint commit of
        # the coordinator's for it.
        self._riders: tuple[Any, ...] = tuple(r for r in (journal, publication) if r is not None)
        self._in_flight = 0  # calls of this session between entering run() and returning from it
        self._alone = False  # the call in flight is its turn's only one (then no other is: see _ledger)
        self._contexts: dict[tuple[int, float], ToolContext] = {}  # validated once per (output cap, timeout)

    async def _ledger(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the loop's thread when this call is alone, else in a worker thread (group commit).

        A checkpoint first lets sibling calls the nursery started together reach :meth:`run` (and count
        themselves), so two calls of one batch never both take the inline path; it is shielded, like the commit.
        A call the loop says is alone (``ctx.alone``: the one call of its model turn, run without a nursery) has
        no sibling to let in, and commits without that yield (two scheduler rounds a call).
        """
        if self._alone:
            return fn(*args)
        await trio.lowlevel.cancel_shielded_checkpoint()
        if self._in_flight <= 1:
            return fn(*args)
        return await trio.to_thread.run_sync(fn, *args)

    async def _decide(self, request: Request) -> tuple[Verdict, list[Any]]:
        """The verdict, and the records that make it durable (to ride in the start's transaction).

        Inline (:class:`~ouroactors.authorities.grants.inline.InlineGrants`): the grants authority's own function
        on its durable policy, recorded with the start — no message, no commit of its own. Otherwise the authority
        is asked and records the decision itself.
        """
        if self.inline is not None:
            try:
                verdict = self.inline.decide(request, self.settings.root)
            except NoPolicy:
                self.inline = None  # an authority that publishes no policy: ask it from now on
            else:
                entry = permission_entry(request, verdict, self.settings.authority.get("grants", 0))
                allowed = verdict.decision is Decision.ALLOW
                return verdict, [RecordDecision(entry, allowed, f"{verdict.decision.value}: {verdict.reason}"[:500])]
        return await self.grants.decide(request, self.settings.root), []

    def _tool_context(self, root: str, ctx: CallContext, call_id: str, effect_id: str) -> ToolContext:
        """The call's :class:`~.tools.ToolContext`: what every call of the session shares is validated once (per
        output cap and timeout), then copied with the call's ids. The root is checked on every call, as the
        context's own validator would (still canonical: a root swapped for a link since is refused); a call id
        its ``max_length`` refuses, or a root that fails the check, goes through the full validation (which
        raises what it always raised)."""
        s = self.settings
        shared = (ctx.output_cap_bytes, ctx.timeout_s)
        template = self._contexts.get(shared)
        if template is None:
            template = ToolContext(session_id=s.session, root=root, sandbox_mode=s.sandbox_mode, data_dir=s.data_dir,
                                   output_cap_bytes=ctx.output_cap_bytes, timeout_s=ctx.timeout_s,
                                   network_domains=s.network_domains, network_private=s.network_private,
                                   call_id=None, effect_id=None, idempotency_key=None)
            self._contexts[shared] = template
        if type(call_id) is not str or len(call_id) > _MAX_ID or os.path.realpath(root) != root:
            return ToolContext(**{**template.__dict__, "root": root, "call_id": call_id, "effect_id": effect_id,
                                  "idempotency_key": effect_id})
        return template.model_copy(update={"call_id": call_id, "effect_id": effect_id, "idempotency_key": effect_id})

    def _evidence(self, evidence: dict[str, Any]) -> dict[str, Any]:
        """The tool's plain evidence, plus the journal head committed so far (an anchor kept outside it)."""
        plain = {k: v for k, v in evidence.items() if isinstance(v, str | int | float | bool) or v is None}
        anchor = self.journal.anchor_evidence() if self.journal is not None else None
        return {**plain, **(anchor or {})}

    async def run(self, call: ParsedCall, ctx: CallContext) -> ToolResult:
        self._in_flight += 1
        self._alone = getattr(ctx, "alone", False) is True and self._in_flight == 1
        began = time.perf_counter()
        outcome = "error"  # the effect path broke (the runtime crashes)
        try:
            result = await self._run(call, ctx)
            outcome = result.status
            return result
        except trio.Cancelled:
            outcome = "cancelled"
            raise
        finally:
            self._in_flight -= 1
            self._alone = False
            if self.stats is not None:
                self.stats.tool_call(outcome, time.perf_counter() - began)

    async def _run(self, call: ParsedCall, ctx: CallContext) -> ToolResult:
        timing.mark("eff.begin")
        tool, args = call.payload
        s = self.settings
        model_call = call.call
        effect_id = effect_id_of(s.session, ctx.turn, model_call.id)
        try:
            if s.root is None:
                raise ToolError(tool.name, "the session holds no workspace lease: no tool may run", kind="no_lease")
            tool_ctx = self._tool_context(s.root, ctx, model_call.id, effect_id)
            request = tool.grant_request(args, tool_ctx)
        except ToolError as refused:
            return _refused(model_call.id, model_call.name, refused)
        if not tool.writes_files:
            return await self._effect(call, ctx, tool_ctx, request, effect_id)
        # the files it writes are locked from its intent through its run: the digests its start records (and an
        # approval is bound to) are those of the content it runs on, not one a sibling call changes meanwhile
        async with serialised(request.paths):
            return await self._effect(call, ctx, tool_ctx, request, effect_id)

    async def _effect(self, call: ParsedCall, ctx: CallContext, tool_ctx: ToolContext, request: Request,
                      effect_id: str) -> ToolResult:
        tool, args = call.payload
        s = self.settings
        model_call = call.call
        try:
            intent = tool.intent(args, tool_ctx)
            timing.mark("eff.request")
        except ToolError as refused:
            return _refused(model_call.id, model_call.name, refused)
        start = StartRequest(effect_id=effect_id, kind=tool.ledger_kind, idempotency_key=effect_id,
                             fingerprint=fingerprint(tool.ledger_kind, tool.fingerprint_args(args)),
                             principal=s.session, session_id=s.session, turn_id=f"t{ctx.turn}",
                             call_id=model_call.id, authority=dict(s.authority), grant=None, cause=None,
                             intent=intent)
        timing.mark("eff.startreq")
        admitted = await self._admit(tool.name, request, start, args, ctx)
        timing.mark("eff.admitted")
        if isinstance(admitted, ToolResult):
            return admitted
        faults.point(EFFECT_STARTED)
        if request.domains:  # the hosts grants judged for this call are the ones its network policy admits
            tool_ctx = tool_ctx.model_copy(update={
                "network_domains": tuple(dict.fromkeys((*tool_ctx.network_domains, *request.domains)))})
        try:
            outcome = await tool.run(args, tool_ctx)
            timing.mark("eff.ran")
        except trio.Cancelled:
            self.on_event("activity_cancelled", {"effect_id": effect_id, "tool": tool.name})
            # never settled as failed: it may have acted before it was stopped. Ambiguous at once, saying so (one
            # commit on the loop's thread: the tool's process group is killed already), for its reconciler or the
            # operator; a mark that does not commit leaves it started, for the writer's exit to mark
            self.ledger.record_cut_short(effect_id, cut_short(ctx.cancel_cause()))
            raise
        result = ToolResult(model_call.id, model_call.name, outcome.status, outcome.output, outcome.truncated,
                            outcome.error, outcome.error_kind, {**outcome.evidence, "effect_id": effect_id},
                            _boundary_fields(outcome.boundary))
        faults.point(EFFECT_RAN)
        ctx.record_result(result)  # staged before the settling commit
        if on_tool_outcome(outcome.status) is ToolAction.SETTLE:  # unknown: left started, never settled failed
            await ctx.result_ready()  # a lone call's tool_result event rides in the settlement too (.carried)
            tries = 1
            while True:  # a refused commit changed nothing: made again (.honesty SETTLE_TRIES), then broken
                settled = await self._ledger(
                    lambda: self.ledger.record_settled(effect_id, outcome.status, outcome.error,
                                                       self._evidence(outcome.evidence), riders=self._riders))
                step = on_settle_answer(settled, tries)
                if step is not RecordAction.RETRY:
                    break
                tries += 1
            if step is RecordAction.BROKEN:
                raise EffectPathBroken(f"ledger settle ({tries} commit(s)): {type(settled).__name__}: {settled}")
            faults.point(EFFECT_SETTLED)
        else:  # unknown: ambiguous now with the tool's own word for why, not the writer's exit's "exited" later
            self.ledger.record_cut_short(effect_id, unknown_outcome(outcome.error))
        timing.mark("eff.settled")
        return result

    def _not_again(self, call_id: str, tool: str, entry: Any) -> ToolResult:
        """A call whose effect the ledger holds already: reported as the ledger has it, with the result the journal
        recorded when it ran (:mod:`.recorded`), never as a failure it was not."""
        status = entry.status.value
        recorded = recorded_result(self.journal, entry.effect_id) if status in ("ok", "failed") else None
        return report(call_id, tool, entry.effect_id, status, recorded, entry.settled_by, entry.reason)

    async def _admit(self, tool: str, request: Request, start: StartRequest, args: Any, ctx: CallContext
                     ) -> StartRequest | ToolResult:
        """Decide, park on approval if asked, and record the start; a ToolResult means: do not run."""
        call_id = start.call_id or "?"
        known = await self._ledger(self.ledger.get, start.effect_id) if self.settings.resumed else None
        if known is not None:  # a turn re-run after a crash: this effect is recorded already — never decide
            return self._not_again(call_id, tool, known)  # (nor ask an operator) again
        decisions = 0
        while True:
            verdict, recording = await self._decide(request)
            timing.mark("eff.decided")
            decisions += 1
            grant = str(verdict.rule) if verdict.rule is not None else f"{verdict.decision.value}: {verdict.reason}"
            if recording:  # the start names the permission entry that admitted it
                grant = f"{recording[0].request.effect_id}: {grant}"
            decided = start.model_copy(update={"grant": grant[:500], "cause": verdict.reason[:500]})
            admission = on_verdict(verdict.decision)
            if admission is Admission.APPROVAL:
                # the proposal is bound to the workspace content it is judged against (.binding): an answer given
                # about other content is not found by the re-run, which asks again
                proposal = args.model_dump(mode="json")
                bound = judged_against(start.intent, request.effect.value, self.settings.root)
                if bound is not None:
                    proposal[BINDING_KEY] = bound
                proposal = shown(proposal)  # bounded as an approval keeps it (a large write's content: its digest)
                needed = {"tool": tool, "reason": verdict.reason, "call_id": call_id, "arguments": proposal}
                # the event is journaled with the ask, so that replay derives the turn's output exactly (.tail); it
                # is staged first, to ride in the commit below: a run whose process the wait closes (or whose session
                # is cancelled in the wait) leaves in its journal the question it asked
                ctx.record_approval({"asked": verdict.reason, "event": needed})
                if recording:  # the ask is recorded before anyone is asked
                    _check_answer((await self._ledger(self.ledger.submit, recording, self._riders))[0],
                                  "decision")
                    recording = []
                else:  # nothing of it to record: the model's answer that asks it is still made durable first, so a
                    # runtime closed for the wait leaves it for the re-run to take (.reuse), not to ask again
                    await self._ledger(self.ledger.carry, self._riders)
                await ctx.emit("approval_needed", needed)
                approved, why = await self.grants.approve(self.settings.session, tool, proposal, call_id)
                ctx.record_approval({"approved": approved, "why": why})
                admission = on_approval(approved)
                if admission is Admission.DENY:
                    verdict = Verdict(Decision.DENY, f"approval refused: {why}", verdict.rule)
                    decided = decided.model_copy(update={"cause": verdict.reason[:500]})
                else:  # the approval admitted it: the entry names it and who answered (seed: it changes who authorized)
                    decided = decided.model_copy(update={"grant": f"{decided.grant}; {why}"[:500]})
            if admission is Admission.DENY:
                tries = 1
                while True:  # a refused commit changed nothing: made again (.honesty on_denial_answer)
                    answers = await self._ledger(
                        self.ledger.submit, [*recording, RecordDenied(decided, verdict.reason)], self._riders)
                    if on_denial_answer(answers[-1], tries) is not RecordAction.RETRY:
                        break
                    tries += 1
                _check_answer(answers[-1], "deny")
                return ToolResult(call_id, tool, "denied", error=verdict.reason, error_kind="denied")
            answer = (await self._ledger(
                self.ledger.submit, [*recording, RecordStarted(decided)], self._riders))[-1]
            step = on_start_answer(answer, decisions)
            if step.action is StartAction.REDECIDE:
                continue  # decided under a grants generation that is gone: decide again
            if step.action is StartAction.BROKEN:
                raise EffectPathBroken(f"ledger start: {type(answer).__name__}: {answer}")
            if step.action is StartAction.NOT_RECORDED:
                kind = "grants_changing" if isinstance(answer, StaleGeneration) else "not_recorded"
                return ToolResult(call_id, tool, "failed", error=step.why, error_kind=kind, evidence={"ran": False})
            if step.action is StartAction.NOT_AGAIN:
                return self._not_again(call_id, tool, answer.entry)
            return decided


def _boundary_fields(boundary: BoundaryRecord | None) -> dict[str, Any] | None:
    """``boundary.model_dump()``: its fields are plain values (str, bool, None, tuples of str), so a copy of the
    model's field dict is that dump, without pydantic's serializer on every call."""
    return None if boundary is None else dict(boundary.__dict__)




def _check_answer(answer: Any, what: str) -> None:
    """Stale stamps and unknown commit outcomes end the runtime (see the module docstring)."""
    if on_record_answer(answer) is RecordAction.BROKEN:
        raise EffectPathBroken(f"ledger {what}: {type(answer).__name__}: {answer}")


def _refused(call_id: str, name: str, refused: ToolError) -> ToolResult:
    return ToolResult(call_id, name, "failed", error=str(refused), error_kind=refused.kind, evidence={"ran": False})


__all__ = ["REDECIDE_TRIES", "EffectPathBroken", "EffectSettings", "GrantsPort", "LedgerPort", "LiveEffects",
           "effect_id_of"]
