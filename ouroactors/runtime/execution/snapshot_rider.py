"""Writing conversation snapshots (:mod:`.snapshots`): staged, then put inside a commit of the journal's.

**When.** A live runtime snapshots the loop's state at the end of a turn (:meth:`SnapshotRider.stage_tail`), in the
very commit that writes the turn's ``turn_settled`` — the journal's flush at the end of every turn — bound to that
record: so the next open (a session's runtime is a new process per message) continues from the state it left and
replays nothing, and the snapshot costs no synced commit of its own. Not after every turn: once it is
:func:`~.snapshots.replays_before_snapshot` turns past the last one (every turn while the conversation is small,
less often as it grows), and after a turn whose journal lost records (a replay stops at the ``gap`` record, so the
next open would continue from before it; from a snapshot after it, it goes on). An open whose replay verified
enough turns stages one too (:meth:`SnapshotRider.stage`), which rides in the journal's next commit.

**Two slots, so a crash never costs the session its conversation.** A runtime lost after it committed a turn but
before the coordinator committed that turn's last events is replaced by one that must derive those events again by
replaying the turn (``OpenSession.tail_turn``): a snapshot at that turn is of no use to it
(:func:`~.snapshots.usable_for`). With one slot, the tail snapshot would have replaced the one before it; if the
journal's budget had dropped the turns before both, the replacement could not rebuild the conversation at all. So
there are two (:func:`~.snapshots.slot_keys`), and a new snapshot goes into the slot *not* holding the newest snapshot
a replacement may continue from: one at or before :meth:`SnapshotRider.bound`, the last turn whose events the
session's committed log holds — as the open was told, or later, as the reader's acks say (:func:`slot_to_write`).
The journal's budget keeps the records both continue from (:mod:`.budget`).

**A failed put is a lost cache, never a failed commit**: logged, and the journal's commit goes on without it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import lmdb

from ...authorities.storage import commit
from ...authorities.storage.env import db
from ...core.codec import CodecError, decode
from . import steps, versions
from .journal import ANCHOR_DB, Journal, check_session
from .loop_ports import LoopState
from .snapshots import ConversationSnapshot, encoded, replays_before_snapshot, slot_keys

log = logging.getLogger(__name__)
EVERY_TURN_SAFE = sys.maxsize  # a rider told nothing: every snapshot in a slot is one a replacement may use


def slot_to_write(turns: Sequence[int | None], safe_through: int) -> int:
    """The slot a new snapshot goes into, given the turns of the snapshots in the slots (None: empty, undecodable or
    of another workflow): never the one holding the newest snapshot at or before ``safe_through``; of the others,
    an empty one first, else the oldest."""
    safe = [(t, i) for i, t in enumerate(turns) if t is not None and t <= safe_through]
    keep = max(safe)[1] if safe else None
    others = [i for i in range(len(turns)) if i != keep]
    return min(others, key=lambda i: (turns[i] is not None, turns[i] or 0, i))


@dataclass(frozen=True)
class _Tail:
    """A turn's end state, bound at put time to the ``turn_settled`` record (written at ``at``) of that commit."""

    at: int
    state: LoopState
    encodings: bytes
    opened: dict[str, Any]
    gaps_written: int  # the journal's gap records when it was staged


class SnapshotRider:
    """A session's snapshot waiting for the journal's next commit to ride in (a journal rider, as
    :class:`.carried.CarriedOutput` is). ``journal``: the session's, whose last put a tail snapshot binds to."""

    def __init__(self, env: lmdb.Environment, session: str, journal: Journal | None = None) -> None:
        self.env, self.sid = env, check_session(session)
        self.journal = journal
        self.pending: tuple[int, bytes] | None = None  # an open's: (seq, encoded snapshot)
        self.tail: _Tail | None = None  # a turn's end: for the commit that writes its turn_settled
        self.saved: int | None = None  # the seq of the snapshot last committed
        self.turns_at = 0  # the turn of the last snapshot this runtime started from or staged
        self.gaps_seen = 0  # the journal's gap records when this runtime last staged one
        self.safe_through = EVERY_TURN_SAFE  # see the module docstring (the runtime sets it at its open)
        self.published: Callable[[], int] | None = None  # the last turn whose events a reader committed since
        self._put_tail: _Tail | None = None  # the tail put in the transaction whose outcome is awaited

    def bound(self) -> int:
        """The last turn a replacement of this runtime would not replay to derive its events: the open's
        :attr:`safe_through`, or a later turn whose ``turn_settled`` event a reader has committed since."""
        return max(self.safe_through, self.published() if self.published is not None else 0)

    # -- an open's ---------------------------------------------------------------------------------------------

    def stage(self, replayed: int, state: LoopState | None, settled_at: tuple[int, bytes] | None,
              encodings: bytes | None, opened: dict[str, Any] | None, *, tail_turn: int = 0
              ) -> tuple[int | None, str | None]:
        """After an open's replay of ``replayed`` turns ending at ``state`` (which follows the ``turn_settled`` record
        ``settled_at``; ``encodings``: its conversation's, :meth:`.loop.SessionLoop.encodings`): stage a snapshot
        there if the replay was long enough for its size (:func:`~.snapshots.replays_before_snapshot`). Not at or
        past ``tail_turn`` (a turn whose events the opener has not all committed: an open after a crash of this
        runtime must still replay it, :func:`~.snapshots.usable_for`). ``(seq staged, why not staged)``."""
        if state is not None:
            self.turns_at = max(self.turns_at, state.turns - replayed)
        if state is None or settled_at is None or encodings is None or opened is None \
                or replayed < replays_before_snapshot(len(encodings)):
            return None, None
        if tail_turn and state.turns >= tail_turn:
            return None, f"turn {tail_turn}'s events are not all committed by the opener yet"
        seq, digest = settled_at
        try:
            data = encoded(seq, digest, state, encodings, opened)
        except CodecError as exc:
            return None, f"the state does not encode: {exc}"
        self.pending, self.turns_at = (seq, data), state.turns
        return seq, None

    # -- a turn's end ------------------------------------------------------------------------------------------

    def tail_due(self, turns: int, conversation_bytes: int, gaps_written: int = 0, degraded: bool = False) -> bool:
        """Whether the end of the turn that brought the loop to ``turns`` is snapshotted (see the module docstring):
        far enough past the last snapshot for its size, or the journal lost records since (``degraded``: this
        flush writes the gap; ``gaps_written``: a commit of the turn wrote it)."""
        return (turns - self.turns_at >= replays_before_snapshot(conversation_bytes)
                or gaps_written > self.gaps_seen or degraded)

    def stage_tail(self, at: int, state: LoopState, encodings: bytes, opened: dict[str, Any] | None,
                   gaps_written: int = 0) -> bool:
        """Stage ``state``, the loop's at the end of its turn, for the commit that writes the turn's ``turn_settled``
        record (recorded at ``at``): bound to it at put time, or dropped if that commit writes another record last."""
        if opened is None or self.journal is None:
            return False
        self.tail = _Tail(at, state, encodings, opened, gaps_written)
        return True

    # -- riding ------------------------------------------------------------------------------------------------

    def put_staged(self, txn: lmdb.Transaction, *, isolate: bool = False) -> int | None:
        """Put the staged snapshot in ``txn`` (in a nested transaction with ``isolate``): a tail bound to the record
        the journal's put in ``txn`` ended with, else an open's. Never raises: a snapshot is a cache, and the commit
        it rides in is the journal's."""
        self._put_tail = None
        ready = self._bound_tail() or self.pending
        if ready is None:
            return None
        seq, data = ready
        try:
            with commit.nested(self.env, txn, isolate) as target:
                keys = slot_keys(self.sid)
                turns = [_turns_in(target, self.env, key) for key in keys]
                target.put(keys[slot_to_write(turns, self.bound())], data, db=db(self.env, ANCHOR_DB))
        except Exception as exc:
            log.warning("snapshot of session %s not written: %s: %s", self.sid.decode(), type(exc).__name__, exc)
            return None
        return seq

    def _bound_tail(self) -> tuple[int, bytes] | None:
        """The staged tail as the snapshot of the ``turn_settled`` the journal just put (None: it put another record
        last, or nothing: the tail is dropped — it binds to that one record only)."""
        tail, self.tail = self.tail, None
        batch = self.journal.last_put if tail is not None and self.journal is not None else None
        if tail is None or batch is None or not batch.items or batch.items[-1] != ("turn_settled", tail.at) \
                or not batch.seqs or batch.seqs[-1] != batch.head_seq:
            return None
        try:
            bound = batch.head_seq, encoded(batch.head_seq, batch.head_hash, tail.state, tail.encodings, tail.opened)
            # the gap this very commit writes counts as seen: the next turn is not snapshotted for it again
            self._put_tail = replace(tail, gaps_written=tail.gaps_written + (batch.lost is not None))
            return bound
        except CodecError as exc:
            log.warning("snapshot of session %s not staged: the state does not encode: %s", self.sid.decode(), exc)
            return None

    def settle_staged(self, staged: int | None, outcome: Any) -> None:
        """The outcome of the commit :meth:`put_staged` put ``staged`` in: committed, the snapshot is saved (a tail
        replaces an open's staged one, which is older); else an open's stays staged and a tail is gone."""
        put_tail, self._put_tail = self._put_tail, None
        if staged is None or not isinstance(outcome, commit.Committed):
            return
        self.pending, self.saved = None, staged
        if put_tail is not None:
            self.turns_at, self.gaps_seen = put_tail.state.turns, put_tail.gaps_written


def tail_hook(rider: SnapshotRider, loop: Any, journal: Journal) -> Callable[[int, int], None]:
    """``(turn, at)`` called when the loop records a turn's ``turn_settled`` (before its flush): stages the loop's
    state on ``rider`` when it is due. ``loop``: the :class:`~.loop.SessionLoop` whose state it is."""

    def on_settled(turn: int, at: int) -> None:
        state = loop.state()
        encodings = loop.encodings(state)
        if rider.tail_due(state.turns, len(encodings), journal.gaps_written, journal.degraded):
            rider.stage_tail(at, state, encodings, loop.opened, journal.gaps_written)

    return on_settled


def _turns_in(txn: lmdb.Transaction, env: lmdb.Environment, key: bytes) -> int | None:
    raw = txn.get(key, db=db(env, ANCHOR_DB))
    if raw is None:
        return None
    try:
        found = decode(bytes(raw), ConversationSnapshot)
    except CodecError:
        return None
    return found.turns if found.workflow == versions.WORKFLOW else None


def save(env: lmdb.Environment, session: str, seq: int, digest: bytes, state: LoopState,
         opened: dict[str, Any]) -> str | None:
    """Write the session's snapshot in a commit of its own, into the slot a rider would choose; None when
    committed, else why not (nothing written)."""
    rider = SnapshotRider(env, session)
    try:
        rider.pending = (seq, encoded(seq, digest, state, steps.Digests().encodings(state.conversation), opened))
    except CodecError as exc:
        return f"the state does not encode: {exc}"
    put: list[int | None] = []
    outcome = commit.write(env, lambda txn: put.append(rider.put_staged(txn)))
    if isinstance(outcome, commit.Committed) and put and put[0] is not None:
        return None
    return getattr(outcome, "reason", None) or "the snapshot was not put"


__all__ = ["EVERY_TURN_SAFE", "SnapshotRider", "save", "slot_to_write", "tail_hook"]
