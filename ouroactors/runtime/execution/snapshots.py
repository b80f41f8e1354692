"""Conversation snapshots: a session's open continues from a verified state instead of replaying every turn.

A session's runtime is a new process per message (and after every crash), and its open re-derives the loop's state
— the conversation, the turn count, the tokens used — from the journal (:func:`.replay.replay_session`). Replayed
from the first turn, that cost grows with the session: ~0.6 ms a turn, a quarter of a second per message once a
session has 400 turns. A snapshot bounds it: the state after a settled turn, kept beside the journal's head
(``journal_anchor``, ``session ‖ 0x02``), from which the next open replays only the turns recorded after it.

**A snapshot is a cache, checked against the chain, never trusted for itself.** It names the ``turn_settled``
record it follows (seq and hash), and is used only if

* that record is still in the journal with that hash, and the chain from it to the anchored head follows (witnesses,
  links, head: :func:`.chain.verify` with ``trusted``);
* the record settles the snapshot's turn, with its ``tokens_used``, and its ``conversation_digest`` is the digest of
  the snapshot's conversation — the journal commits to every field of the state, so a snapshot altered or taken from
  another chain is refused at the first differing field (:func:`binding_problem`);
* it was made by code of this workflow version (:data:`.versions.WORKFLOW`): a loop that decides differently bumps
  the version, and the next open replays the whole journal again, as the divergence check needs;
* it stops short of the turn whose events a replacement runtime must derive again (``OpenSession.tail_turn``: that
  turn has to be replayed for :class:`.tail.SettledTail`).

A snapshot that fails any check is ignored and the whole journal replayed, exactly as without one. What an open with
a snapshot does not re-check is the chain *before* it: that was verified when the snapshot was written, and
``ouroactors journal verify`` still checks all of it.

The snapshot also keeps the ``session_opened`` fields its loop was rebuilt from (config, tool specs), so a replay
from it needs no record before it: a journal cut to its size budget (:mod:`.budget`) keeps none, and the budget never
cuts the record a snapshot continues from. What those fields change is checked by the digests of the turns replayed
after the snapshot; fields that do not rebuild a loop refuse the snapshot. A journal cut with no snapshot to continue
from is refused by the open (its conversation is gone), never continued from nothing.

**When one is written.** By an open whose replay verified enough turns (from the first, or from the last snapshot)
for the snapshot's size (:func:`replays_before_snapshot`: one turn while the conversation is small, more as it grows,
never more than :data:`REPLAY_BEFORE_SNAPSHOT`), and by a live runtime every :data:`REPLAY_BEFORE_SNAPSHOT` turns
(:meth:`SnapshotRider.due`), so an open replays at most about that many. It is staged, not committed: it rides in
the journal's next commit, the next turn's start (:class:`SnapshotRider`), so the open still commits nothing of its
own and a message's way gains no synced commit. A runtime lost before that commit loses the snapshot only; a failed
put is logged and changes nothing else.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import lmdb
import msgpack
import pydantic

from ...authorities.storage import commit
from ...authorities.storage.env import db
from ...core.codec import CodecError, Record, decode, encode
from . import steps, versions
from .journal import ANCHOR_DB, check_session
from .loop_ports import LoopState
from .model import Message, ToolCall
from .reading import StoredRecord

log = logging.getLogger(__name__)
REPLAY_BEFORE_SNAPSHOT = 8  # the most turns an open replays before it leaves a snapshot; a live runtime's cadence
SNAPSHOT_KIB_PER_TURN = 40  # the snapshot size whose write costs about what replaying one turn costs (see below)


def replays_before_snapshot(conversation_bytes: int) -> int:
    """How many turns an open replays before it stages a snapshot of a conversation of ``conversation_bytes`` (its
    messages' encodings: the bulk of the snapshot) for the next open.

    Two costs meet here (measured on this project's box, 2 cores, ext4). Each turn left to replay costs every later
    open ~0.6-1 ms (the loop run again on the recorded chunks); a snapshot costs the synced commit it rides in its
    pages, ~0.01 ms a KiB, and it is the whole conversation, written again each time. Snapshotting every ``k`` turns,
    a message pays on average about ``k/2`` replayed turns plus ``1/k`` of a write; the sum is least near
    ``k = sqrt(2 * size * write / replay) ~ sqrt(size / 40 KiB)``. So a small conversation is snapshotted by every
    open that replayed a turn (the next open replays one at most, and a session's runtime is a new process per
    message), a large one less often — never less often than every :data:`REPLAY_BEFORE_SNAPSHOT` turns.
    """
    k = round(math.sqrt(max(conversation_bytes, 0) / (SNAPSHOT_KIB_PER_TURN * 1024)))
    return max(1, min(REPLAY_BEFORE_SNAPSHOT, k))


class ConversationSnapshot(Record):
    """The loop's state after the ``turn_settled`` record at ``seq`` (hash ``hash``), made by ``workflow``.

    The conversation is kept as its ``count`` messages' canonical encodings end to end (``messages``): the very bytes
    the settled turn's ``conversation_digest`` hashes, so checking them is one SHA-256, and the restored loop's first
    request does not encode them again (:meth:`.steps.Digests.seed`)."""

    SCHEMA = "execution.conversation_snapshot"
    workflow: str
    seq: int
    hash: bytes
    turns: int
    tokens_used: int
    count: int
    messages: bytes
    opened: dict[str, Any]  # the session_opened fields the loop was rebuilt from (config, tool specs): replay from
    # here needs no record before it (a truncated journal keeps none); what they change is checked by the digests of
    # the turns replayed after it


_MESSAGE_FIELDS = tuple(Message.model_fields)  # a plain model encodes as its field values in declaration order
_CALL_FIELDS = tuple(ToolCall.model_fields)


def state_of(snapshot: ConversationSnapshot) -> LoopState:
    """Decode the snapshot's state (messages validated as the loop's own); :class:`CodecError` if it does not."""
    unpacker = msgpack.Unpacker(raw=False, use_list=True, strict_map_key=True, max_buffer_size=0)
    unpacker.feed(snapshot.messages)
    conversation: list[Message] = []
    packed: list[bytes] = []
    at = 0
    try:
        for arr in unpacker:
            fields = dict(zip(_MESSAGE_FIELDS, arr, strict=True))
            fields["tool_calls"] = [dict(zip(_CALL_FIELDS, c, strict=True)) for c in fields["tool_calls"]]
            conversation.append(Message.model_validate(fields))
            end = unpacker.tell()
            packed.append(snapshot.messages[at:end])
            at = end
    except (ValueError, TypeError, KeyError, msgpack.UnpackException, pydantic.ValidationError) as exc:
        raise CodecError(f"message {len(conversation)} of the snapshot does not decode: {exc}") from exc
    if len(conversation) != snapshot.count or at != len(snapshot.messages):
        raise CodecError(f"the snapshot holds {len(conversation)} messages, it says {snapshot.count}")
    return LoopState(tuple(conversation), snapshot.turns, snapshot.tokens_used, packed=tuple(packed))


def snapshot_key(sid: bytes) -> bytes:
    """``session ‖ 0x02`` in ``journal_anchor`` (session ids are printable ASCII: no clash with the records' keys,
    ``session ‖ 0x00 ‖ seq``, or the head's, ``session ‖ 0x01``)."""
    return sid + b"\x02"


def load(env: lmdb.Environment, session: str) -> ConversationSnapshot | str | None:
    """The session's snapshot; None if it has none; a string saying why if it does not decode."""
    sid = check_session(session)
    with env.begin() as txn:
        raw = txn.get(snapshot_key(sid), db=db(env, ANCHOR_DB))
        data = None if raw is None else bytes(raw)
    if data is None:
        return None
    try:
        return decode(data, ConversationSnapshot)
    except CodecError as exc:
        return f"the snapshot does not decode: {exc}"


def usable_for(snapshot: ConversationSnapshot, tail_turn: int) -> str | None:
    """Why an open must not continue from ``snapshot`` before reading the journal (None: it may try)."""
    if snapshot.workflow != versions.WORKFLOW:
        return f"made by workflow {snapshot.workflow!r}, not {versions.WORKFLOW!r}"
    if tail_turn and snapshot.turns >= tail_turn:
        return f"turn {tail_turn}'s events must be derived again, and the snapshot is past it (turn {snapshot.turns})"
    return None


def binding_problem(snapshot: ConversationSnapshot, record: StoredRecord) -> str | None:
    """Why ``record`` (the chain's record at the snapshot's seq, its hash checked) does not attest the snapshot's
    state; None when every field of the state is the one the journal settled."""
    fields: dict[str, Any] = record.fields
    if record.kind != "turn_settled":
        return f"record {record.seq} is {record.kind!r}, not turn_settled"
    if record.turn != snapshot.turns:
        return f"record {record.seq} settles turn {record.turn}, the snapshot says {snapshot.turns}"
    if fields.get("tokens_used") != snapshot.tokens_used:
        return f"record {record.seq} settled with {fields.get('tokens_used')!r} tokens used, the snapshot says " \
               f"{snapshot.tokens_used}"
    if fields.get("conversation_digest") != steps.run_digest(snapshot.count, snapshot.messages):
        return f"the snapshot's conversation is not the one record {record.seq} settled (digest differs)"
    return None


def offered(env: lmdb.Environment, session: str, tail_turn: int) -> tuple[ConversationSnapshot | None, str | None]:
    """The snapshot an open may try to continue from (it is checked against the journal by the replay), or why the
    session's snapshot may not be (``(None, None)``: it has none)."""
    found = load(env, session)
    if found is None or isinstance(found, str):
        return None, found
    problem = usable_for(found, tail_turn)
    return (found, None) if problem is None else (None, problem)


class SnapshotRider:
    """A session's snapshot waiting for the journal's next commit — the first turn's start, which follows the open —
    to ride in (a journal rider, as :class:`.carried.CarriedOutput` is): an open writes no commit of its own, and a
    message's way keeps its synced commits. Lost with its runtime if no commit follows; the next open replays more."""

    def __init__(self, env: lmdb.Environment, session: str) -> None:
        self.env, self.sid = env, check_session(session)
        self.pending: tuple[int, bytes] | None = None  # (seq, encoded snapshot)
        self.saved: int | None = None  # the seq of the snapshot last committed
        self.turns_at = 0  # the turn of the last snapshot this runtime started from or staged
        self.gaps_seen = 0  # the journal's gap records when this runtime last staged one

    def due(self, turns: int, gaps_written: int = 0) -> bool:
        """Whether a live runtime stages a snapshot after the turn that brought its loop to ``turns``: once it is
        :data:`REPLAY_BEFORE_SNAPSHOT` turns past the last one (so a long-lived runtime, too, leaves the next open
        little to replay, and a journal that drops old turns to its budget keeps a snapshot to continue from: see
        :mod:`.budget`), and once its journal wrote a ``gap`` record since (``gaps_written``: a replay stops at a
        gap, so the next open would continue from before it; from a snapshot after it, it goes on)."""
        return turns - self.turns_at >= REPLAY_BEFORE_SNAPSHOT or gaps_written > self.gaps_seen

    def stage(self, replayed: int, state: LoopState | None, settled_at: tuple[int, bytes] | None,
              encodings: bytes | None, opened: dict[str, Any] | None, *, tail_turn: int = 0
              ) -> tuple[int | None, str | None]:
        """After an open's replay of ``replayed`` turns ending at ``state`` (which follows the ``turn_settled`` record
        ``settled_at``; ``encodings``: its conversation's, :meth:`.loop.SessionLoop.encodings`): stage a snapshot
        there if the replay was long enough for its size (:func:`replays_before_snapshot`). Not at or past
        ``tail_turn`` (a turn whose events the opener has not all committed: an open after a crash of this runtime
        must still replay it, :func:`usable_for`).
        ``(seq staged, why not staged)``."""
        if state is not None:
            self.turns_at = max(self.turns_at, state.turns - replayed)
        if state is None or settled_at is None or encodings is None or opened is None \
                or replayed < replays_before_snapshot(len(encodings)):
            return None, None
        if tail_turn and state.turns >= tail_turn:
            return None, f"turn {tail_turn}'s events are not all committed by the opener yet"
        return self._stage(state, settled_at, encodings, opened)

    def stage_after_turn(self, state: LoopState, settled_at: tuple[int, bytes] | None, encodings: bytes,
                         opened: dict[str, Any] | None, gaps_written: int = 0) -> tuple[int | None, str | None]:
        """A live runtime's, after a turn settled when :meth:`due`: a snapshot of ``state`` (which follows the
        journal's committed head ``settled_at``, that turn's ``turn_settled``)."""
        self.gaps_seen = gaps_written
        if settled_at is None or opened is None:
            return None, "no committed turn_settled to bind it to"
        return self._stage(state, settled_at, encodings, opened)

    def _stage(self, state: LoopState, settled_at: tuple[int, bytes], encodings: bytes, opened: dict[str, Any]
               ) -> tuple[int | None, str | None]:
        seq, digest = settled_at
        try:
            data = encoded(seq, digest, state, encodings, opened)
        except CodecError as exc:
            return None, f"the state does not encode: {exc}"
        self.pending, self.turns_at = (seq, data), state.turns
        return seq, None

    def put_staged(self, txn: lmdb.Transaction, *, isolate: bool = False) -> int | None:
        """Put the staged snapshot in ``txn`` (in a nested transaction with ``isolate``). Never raises: a snapshot
        is a cache, and the commit it rides in is the journal's."""
        pending = self.pending
        if pending is None:
            return None
        try:
            with commit.nested(self.env, txn, isolate) as target:
                target.put(snapshot_key(self.sid), pending[1], db=db(self.env, ANCHOR_DB))
        except Exception as exc:
            log.warning("snapshot of session %s not written: %s: %s", self.sid.decode(), type(exc).__name__, exc)
            return None
        return pending[0]

    def settle_staged(self, staged: int | None, outcome: Any) -> None:
        if staged is not None and isinstance(outcome, commit.Committed):
            self.pending, self.saved = None, staged


def encoded(seq: int, digest: bytes, state: LoopState, encodings: bytes, opened: dict[str, Any]) -> bytes:
    """The stored bytes of a snapshot of ``state`` (its conversation's ``encodings``), which follows the
    ``turn_settled`` record ``seq`` (``digest``), in a session opened with ``opened``."""
    return encode(ConversationSnapshot(workflow=versions.WORKFLOW, seq=seq, hash=digest, turns=state.turns,
                                       tokens_used=state.tokens_used, count=len(state.conversation),
                                       messages=encodings, opened=opened))


def save(env: lmdb.Environment, session: str, seq: int, digest: bytes, state: LoopState,
         opened: dict[str, Any]) -> str | None:
    """Write the session's snapshot in a commit of its own (replacing the last; an open stages one on a
    :class:`SnapshotRider` instead); None when committed, else why not (nothing written)."""
    sid = check_session(session)
    try:
        data = encoded(seq, digest, state, steps.Digests().encodings(state.conversation), opened)
    except CodecError as exc:
        return f"the state does not encode: {exc}"

    def put(txn: lmdb.Transaction) -> None:
        txn.put(snapshot_key(sid), data, db=db(env, ANCHOR_DB))

    outcome = commit.write(env, put)
    if isinstance(outcome, commit.Committed):
        return None
    return getattr(outcome, "reason", type(outcome).__name__)


__all__ = [
    "REPLAY_BEFORE_SNAPSHOT",
    "SNAPSHOT_KIB_PER_TURN",
    "ConversationSnapshot",
    "binding_problem",
    "encoded",
    "load",
    "offered",
    "replays_before_snapshot",
    "save",
    "snapshot_key",
    "state_of",
    "usable_for",
]
