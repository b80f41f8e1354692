"""The trio side of a live session: its output channel, its grants port and the loop assembled from live ports.

Everything here runs in the runtime's trio thread (:class:`~.bridge.TrioThread`) and never touches thespian
itself. What must cross to the actor goes through two callables the actor gives: ``send(address, message)`` (a
thespian send, which thespian queues safely from a non-main thread and performs on the actor's own loop) and
``push(kind, fields)`` for events. Answers from the grants authority come back the other way: the actor's handler
calls :meth:`ActorGrants.answer` through :meth:`~.bridge.TrioThread.call`.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

import trio
from thespian.actors import PoisonMessage

from ...authorities.grants.approvals import ApprovalRefused
from ...authorities.grants.rules import Request, Verdict
from ...core.codec import digest_of
from ...core.errors import StaleGeneration
from ...supervision.calls import Tagged, TaggedAnswer
from .errors import CursorError
from .output import Batch, OutputBuffer, OutputEvent
from .repeats import RESUMED, Repeats

GRANTS_ANSWER_TIMEOUT_S = 30.0


class OutputChannel:
    """:class:`~.loop.OutputSink` over an :class:`~.output.OutputBuffer`: a full buffer makes ``emit`` wait.

    ``notify(event, rides)`` is called (from the trio thread) for every event appended, so a reader can be pushed
    the event itself (no drain round trip on the publication path); the buffer keeps it until it is acknowledged.
    ``rides``: the loop says a ledger commit follows at once, which may carry the event (:mod:`.carried`).
    """

    def __init__(self, buffer: OutputBuffer, notify: Callable[[OutputEvent, bool], None]) -> None:
        self.buffer = buffer
        self._notify = notify
        self._room = trio.Event()
        self._settling: deque[tuple[int, int]] = deque()  # (cursor, turn) of turn_settled events not acked yet
        # the last turn whose turn_settled event a reader has committed (acked): a replacement runtime would not
        # have to derive that turn's events again (see .snapshot_rider)
        self.published_turn = 0
        self.repeats: Repeats | None = None  # a turn this runtime runs again: what its earlier runs published

    async def emit(self, kind: str, turn: int, data: dict[str, Any], *, rides: bool = False) -> None:
        while not self.buffer.has_room():
            await self._room.wait()
        for event in self.append(kind, turn, data):
            # a re-run's marker goes out at once: the coordinator commits it (it counts the asks it names)
            self._notify(event, rides and event.kind != RESUMED)

    def append(self, kind: str, turn: int, data: dict[str, Any]) -> list[OutputEvent]:
        """Append an event now (the caller's events are owed, e.g. a settled turn's withheld ones), unless it repeats
        what an earlier run of its turn published (:attr:`repeats`): the events appended, the re-run's marker first."""
        emissions = [(kind, turn, data)] if self.repeats is None else self.repeats.take(kind, turn, data)
        events = [self.buffer.append(*emission, force=True) for emission in emissions]
        for event in events:
            if event.kind == "turn_settled":
                self._settling.append((event.cursor, event.turn))
        return events

    def drain(self, after: int, limit: int) -> Batch:
        return self.buffer.drain(after, limit)

    def ack(self, cursor: int) -> int:
        dropped = self.buffer.ack(cursor)
        while self._settling and self._settling[0][0] <= self.buffer.acked:
            self.published_turn = max(self.published_turn, self._settling.popleft()[1])
        if dropped:
            self._room.set()
            self._room = trio.Event()
        return dropped


class ActorGrants:
    """:class:`~.effects.GrantsPort` through messages to the grants authority, one request at a time.

    One request is outstanding at a time (a trio lock). Each goes :class:`~ouroactors.supervision.calls.Tagged`
    with a ref of its own, and only the :class:`~ouroactors.supervision.calls.TaggedAnswer` carrying it is taken:
    an answer that comes after its request gave up (a timeout the caller goes on from, as :meth:`approve` does for
    an approval it cannot look up) is dropped, never taken for the next request's. An authority that does not
    answer within :data:`GRANTS_ANSWER_TIMEOUT_S` is gone (it restarts, and rest_for_one restarts this runtime
    after it): the call raises.
    """

    def __init__(self, send: Callable[[str, Any], None], session: str,
                 make_decide: Callable[[Request, str | None], Any],
                 make_approval: Callable[[str, str, dict[str, Any], str], Any] | None = None,
                 make_wait: Callable[[str], Any] | None = None,
                 make_consume: Callable[[str, str, str, int], Any] | None = None, *, park: bool = False,
                 answered: tuple[str, ...] = ()) -> None:
        self._send = send
        self.park = park  # report the ask and hold the call: the coordinator makes the wait durable
        self.answered = list(answered)  # approvals answered while no runtime ran (see approve)
        self.session = session
        self._make_decide = make_decide
        self._make_approval = make_approval
        self._make_wait = make_wait
        self._make_consume = make_consume
        self._lock = trio.Lock()
        self._waiting: trio.Event | None = None
        self._answer: Any = None
        self._refs = f"g.{uuid.uuid4().hex[:16]}"  # this runtime's request refs: f"{_refs}.{n}"
        self._serial = 0
        self._ref: str | None = None  # the ref of the request waiting for its answer

    def answer(self, message: Any) -> bool:
        """A message from grants arrived (called in the trio thread): True when it answers a request of ours (the
        one waiting, which it resumes, or one given up, dropped); False for anything else."""
        if isinstance(message, TaggedAnswer):
            ref, value = message.ref, message.value
        elif isinstance(message, PoisonMessage) and isinstance(message.poisonMessage, Tagged):
            ref, value = message.poisonMessage.ref, message  # our request came back unhandled
        else:
            return False
        if self._waiting is None or self._waiting.is_set() or ref != self._ref:
            return True  # late: its request gave up
        self._answer = value
        self._waiting.set()
        return True

    async def _ask(self, message: Any, timeout: float = GRANTS_ANSWER_TIMEOUT_S) -> Any:
        async with self._lock:
            self._waiting, self._answer = trio.Event(), None
            self._serial += 1
            self._ref = f"{self._refs}.{self._serial}"
            self._send(self._ref, message)
            with trio.fail_after(timeout):
                await self._waiting.wait()
            answer, self._waiting = self._answer, None
        if isinstance(answer, StaleGeneration):
            return answer
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def decide(self, request: Request, root: str | None) -> Verdict:
        answer = await self._ask(self._make_decide(request, root))
        if isinstance(answer, StaleGeneration):
            raise answer
        if not isinstance(answer, Verdict):
            raise TypeError(f"grants answered Decide with {type(answer).__name__}")
        return answer

    async def approve(self, session: str, tool: str, arguments: dict[str, Any], call_id: str) -> tuple[bool, str]:
        """Request a durable approval, wait for its answer, and consume it (once) if it was approved.

        An approval answered while no runtime ran (``answered``: the coordinator's durable wait) is found by
        the call's digest — the same tool and arguments — and decides the call without asking again. With
        ``park``, a call with no answer is held until the coordinator closes this runtime (the ask was
        reported as ``approval_needed``; the wait is the coordinator's, durable, and this process goes away).
        """
        if self._make_approval is None or self._make_wait is None or self._make_consume is None:
            return False, "this runtime cannot wait for approvals"
        digest = digest_of([tool, arguments])
        for known in list(self.answered):
            try:
                found = await self._ask(self._make_wait(known))
            except Exception:  # pruned or unknown: it decides nothing here
                found = None
            if getattr(found, "call_digest", None) == digest and getattr(found, "session_id", None) == session:
                self.answered.remove(known)  # consumed once: a second identical call asks again
                return await self._use(found, session)
        if self.park:
            await trio.sleep_forever()
        requested = await self._ask(self._make_approval(session, tool, arguments, call_id))
        approval_id = getattr(requested, "approval_id", None)
        if approval_id is None:
            return False, f"the approval could not be requested: {requested!r}"
        waited_s = max(0.0, (requested.deadline_ns - requested.requested_ns) / 1e9)
        answered = await self._ask(self._make_wait(approval_id), timeout=waited_s + GRANTS_ANSWER_TIMEOUT_S)
        return await self._use(answered, session)

    async def _use(self, answered: Any, session: str) -> tuple[bool, str]:
        """Consume an answered approval if it approved the call: (approved, why)."""
        assert self._make_consume is not None
        approval_id = getattr(answered, "approval_id", "?")
        status = getattr(answered, "status", "unknown")
        why = f"approval {approval_id} {status}" + (f" by {answered.answered_by}" if answered.answered_by else "")
        if answered.reason:
            why += f": {answered.reason}"
        if status != "approved":
            return False, why
        try:
            used = await self._ask(self._make_consume(approval_id, session, answered.call_digest,
                                                      answered.state_version))
        except ApprovalRefused as refused:  # approved, but not usable now (its deadline, the policy it was asked under)
            return False, f"approval {approval_id} was approved but cannot be used: {refused}"
        return getattr(used, "status", None) == "consumed", why


__all__ = ["ActorGrants", "CursorError", "OutputChannel"]
