"""How a user's steers and interrupts reach a running turn: the part of :class:`~.loop.SessionLoop` that takes them.

**Where a steer goes.** Before each model call (a *point*: the model calls made so far) the loop takes what the
control port holds for its turn; a steer is recorded (``steer``) and becomes a user message of the conversation, so
that call's request carries it; an interrupt stops the turn there. After the model's final answer the turn has one
last point: a steer that came meanwhile is taken there and answered with one more model call. Once the turn has
taken its last point a steer is refused (:meth:`TurnControl.receive_steer`).

**Nothing answered is dropped.** A turn can stop off a point — its model call failed or was interrupted, its tools
ended it — with steers accepted (journaled and answered) after its last take. Those still go in the conversation,
after the turn's last message (:meth:`TurnControl._deliver_leftover`: ``steer`` records marked ``at_end``, a
``steered`` event each), so the next turn's first request carries them: the user was told they were taken. Replay
puts them at the same place (:mod:`.replay_ports`), and a re-run of a lost turn delivers them again past its recorded
calls (:mod:`.reuse`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import steps
from .errors import NoActiveTurn
from .loop_ports import Ports, Steer
from .model import Message


class SteerInDoubt(Exception):
    """A steer's acceptance was committed with an unknown outcome, twice: not a refusal (it may be journaled), so
    the runtime crashes and its turn's re-run decides from the journal (never an OuroactorsError: no refusal)."""


class TurnControl:
    """Steering and interrupts of :class:`~.loop.SessionLoop` (a mixin: it uses the loop's journal and output)."""

    ports: Ports
    conversation: list[Message]
    _closed_turn: int  # the last turn that has taken its last point (a steer for it is delivered nowhere)

    if TYPE_CHECKING:  # the loop's own, see .loop
        def _record(self, kind: str, turn: int | None, fields: dict[str, Any]) -> int: ...
        def _flush(self) -> None: ...
        async def _emit(self, kind: str, turn: int, data: dict[str, Any], *, rides: bool = False) -> None: ...

    def receive_steer(self, turn: int, steer_id: str, text: str) -> bool:
        """Journal that a steer for ``turn`` was accepted and commit it (with whatever is staged); whether it did.
        The runtime calls it in the loop's thread before it queues and answers the steer: a steer it acknowledged is
        evidence, delivered by a re-run if the process is lost first (:mod:`.reuse`). Replay skips the record; its
        time does not move ``last_at``. Refused once the turn took its last point (it would be delivered nowhere);
        before that the next point takes it — after a final answer too, which then gets one more model call."""
        if turn <= self._closed_turn:
            raise NoActiveTurn(f"turn {turn} is settling: no model call is left to take a steer; send a message")
        self.ports.journal.record("steer_received", turn, self.ports.clock.now_ns(), {"id": steer_id, "text": text})
        self._flush()
        # A commit of unknown outcome may have landed: refused as "not recorded", the steer was a journaled promise
        # nobody kept. The next commit reads the durable head and says (a second unknown stops the runtime: its
        # recovery re-runs the turn from the journal, which delivers the steer if it is there).
        if getattr(self.ports.journal, "in_doubt", False):
            self._flush()
            if getattr(self.ports.journal, "in_doubt", False):
                raise SteerInDoubt(f"turn {turn}: the commit of steer {steer_id}'s acceptance is of unknown outcome")
        return not getattr(self.ports.journal, "degraded", False)

    def _deliver_control(self, turn: int, point: int, *, last: bool = False
                         ) -> tuple[steps.Stop | None, list[dict[str, Any]]]:
        """Record and apply what the control port hands over at ``point`` (``last``: after the model's final answer,
        the turn's last point unless a steer comes): the stop an interrupt makes, and the event of each steer."""
        stop: steps.Stop | None = None
        steered: list[dict[str, Any]] = []
        for item in self.ports.control.take(turn, point, last=last):
            if isinstance(item, Steer):
                steered.append(self._deliver_steer(turn, item, point))
            elif stop is None:
                self._record("interrupt", turn, {"at_call": point})
                stop = steps.Stop("interrupted", "interrupted between model calls")
        return stop, steered

    def _deliver_steer(self, turn: int, item: Steer, point: int, *, at_end: bool = False) -> dict[str, Any]:
        """Record ``item`` and put it in the conversation before model call ``point`` (``at_end``: after the turn
        stopped, before none of its calls); the fields of its ``steered`` event."""
        text = steps.repaired(item.text)  # the queue refuses such text; this is the second line
        fields: dict[str, Any] = {"text": text, "at_call": point}
        if item.steer_id:  # only then: a recorded session's steer records keep their shape
            fields["id"] = item.steer_id
        if item.redelivered:
            fields["redelivered"] = True
        if at_end:
            fields["at_end"] = True
        self._record("steer", turn, fields)
        self.conversation.append(Message(role="user", content=text))
        event = {"text": text, "at_call": point, "redelivered": item.redelivered}
        return {**event, "at_end": True} if at_end else event

    async def _deliver_leftover(self, turn: int, point: int) -> None:
        """Once ``turn`` has stopped after ``point`` model calls: put each steer it accepted and no point took in the
        conversation, after its last message (an interrupt has nothing left to stop)."""
        for item in self.ports.control.leftover(turn):
            if isinstance(item, Steer):
                await self._emit("steered", turn, self._deliver_steer(turn, item, point, at_end=True))


__all__ = ["SteerInDoubt", "TurnControl"]
