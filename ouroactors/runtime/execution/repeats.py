"""A turn run again does not publish again what an earlier run of it published.

A turn that did not settle is run again from its start by the next runtime: after an approval wait (the runtime
that asked went away with the wait) or after a crash. The re-run takes the model's recorded answers and the settled
effects (:mod:`.reuse`), so it emits, event for event, what the earlier run emitted — and the session's log, which
already holds those events, used to get them a second time under new cursors: a follower read the turn's text, its
tool calls and its approval twice (three times after an approval and a crash).

**The rule.** The runtime that continues a turn reads what the log holds of it (:func:`published_run`) and compares
what it emits for that turn, in order, with it (:class:`Repeats`). While they are equal (kind and data, canonically
encoded, less a field that only says which run emitted it) nothing is emitted: the event is in the log already. The
first event that differs — or goes beyond what was published — is emitted after a :data:`RESUMED` event,
``{"not_repeated": k, "asks": [...]}``, which says that a new runtime goes on with the turn and that its first ``k``
events were the published ones. From then on every event of the run is emitted. Events of another turn are never
held back.

**Why a marker, and why ``k``.** The log must say what the latest run emitted, for the run after it (another crash)
to compare with: the events of the turn in log order, except that a :data:`RESUMED` event cuts them back to their
first ``k`` before the rest follows. When a re-run differs from what was published (a model call that had no
recording is asked again, and a real model answers differently), the log keeps the earlier run's events — they were
published — and the marker's ``k`` tells where the new run left them. Logs written before this rule published a
re-run's ``turn_started`` again; one found in the middle of a turn starts the run afresh, as it meant then.

**Approvals.** A re-run asks again for the approvals its turn asked for; an ask already answered decides the call at
once, and its ``approval_needed`` (published when it was asked) is held back like any repeat. A call that settled
since is not decided again, so its ask is not made at all: a published ``approval_needed`` the run does not repeat is
passed over (it stays among the run's first ``k``, where it was published). An ask with no answer
parks the turn and must be published — the coordinator makes the wait durable when it commits that event — so only
an ask in ``answered`` (the call digests of the approvals answered since the turn began, as the coordinator counts
them) may be held back. The coordinator also counts the answered asks the runtime consumes; the marker's ``asks``
names those it held back, so both count the same.

Pure and synchronous: the output channel (:class:`~.live.OutputChannel`) applies it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from ...core.codec import CodecError, digest_of

__all__ = ["RESUMED", "Repeats", "ask_digest", "event_key", "published_run"]

RESUMED = "turn_resumed"
_STARTED = "turn_started"
_ASK = "approval_needed"

Emission = tuple[str, int, dict[str, Any]]  # (kind, turn, data): what the channel appends
# Fields that say which run emitted an event, not what happened: a steer the lost run delivered is delivered again at
# the same point by the re-run (.reuse), flagged ``redelivered`` — the same steer, published already.
_NOT_COMPARED = {"steered": frozenset({"redelivered"})}


class _Event(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def turn(self) -> int: ...
    @property
    def data(self) -> Mapping[str, Any]: ...


def ask_digest(data: Mapping[str, Any]) -> str:
    """The call digest of an ``approval_needed`` event: its tool and arguments (what an approval is bound to)."""
    return digest_of([data.get("tool"), data.get("arguments")])


def event_key(kind: str, data: Mapping[str, Any]) -> str | None:
    """What decides whether two events are the same event (the rule's equality; None: never equal to any)."""
    ignored = _NOT_COMPARED.get(kind)
    if ignored:
        data = {k: v for k, v in data.items() if k not in ignored}
    try:
        return digest_of([kind, data])
    except CodecError:  # not encodable, so never equal to a logged event: it is emitted
        return None


def published_run(events: Iterable[_Event], turn: int) -> list[tuple[str, Mapping[str, Any]]]:
    """What the latest run of ``turn`` emitted, as far as the log holds it: ``events`` are the log's, in cursor order.

    A :data:`RESUMED` event cuts the run back to its first ``not_repeated`` events (a value that is not a count
    cuts nothing); a ``turn_started`` after the turn's first event is a re-run that published from its start."""
    run: list[tuple[str, Mapping[str, Any]]] = []
    for event in events:
        if event.turn != turn:
            continue
        if event.kind == RESUMED:
            kept = event.data.get("not_repeated")
            if isinstance(kept, int) and not isinstance(kept, bool) and kept >= 0:
                del run[kept:]
        elif event.kind == _STARTED and run:
            run = [(event.kind, event.data)]
        else:
            run.append((event.kind, event.data))
    return run


class Repeats:
    """The emissions of one run of ``turn``, held back while they repeat ``published`` (see the module doc).

    ``answered``: the call digests of the approvals answered since the turn began (each may hold back one ask)."""

    def __init__(self, turn: int, published: Sequence[tuple[str, Mapping[str, Any]]],
                 answered: Iterable[str] = ()) -> None:
        self.turn = turn
        self._published = [(kind, event_key(kind, data)) for kind, data in published]
        self._answered = list(answered)
        self.held = 0  # events held back so far (the marker's ``not_repeated``)
        self._asks: list[str] = []  # the answered asks among them
        self.done = not self._published  # nothing (more) to compare with: every emission goes out

    def take(self, kind: str, turn: int, data: dict[str, Any]) -> list[Emission]:
        """What to emit for this emission: nothing (published already), itself, or the marker and itself."""
        if self.done or turn != self.turn:
            return [(kind, turn, data)]
        key = event_key(kind, data)
        at = self.held
        while at < len(self._published):
            if key == self._published[at][1]:
                if kind != _ASK:
                    self.held = at + 1
                    return []
                digest = ask_digest(data)
                if digest in self._answered:  # answered: the call goes on at once, as it did not before
                    self._answered.remove(digest)
                    self._asks.append(digest)
                    self.held = at + 1
                    return []
                break
            if self._published[at][0] != _ASK:
                break
            at += 1  # a published ask this run does not make (its call is settled now): passed over, kept above
        self.done = True
        return [(RESUMED, self.turn, {"not_repeated": self.held, "asks": list(self._asks)}), (kind, turn, data)]
