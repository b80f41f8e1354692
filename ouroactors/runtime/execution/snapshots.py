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

**When one is written, and where** (:mod:`.snapshot_rider`): by a live runtime at the end of a turn, in the commit
that writes its ``turn_settled`` (so the next open replays nothing), and by an open whose replay verified enough
turns for the snapshot's size (:func:`replays_before_snapshot`). A session has two slots (:func:`slot_keys`): a new
snapshot never replaces the newest one a replacement runtime may still need after a crash; an open tries the newest
first (:func:`candidates`).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import lmdb
import msgpack
import pydantic

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
    """The first of the session's two snapshot slots: ``session ‖ 0x02`` in ``journal_anchor`` (session ids are
    printable ASCII: no clash with the records' keys, ``session ‖ 0x00 ‖ seq``, or the head's, ``session ‖ 0x01``)."""
    return sid + b"\x02"


def slot_keys(sid: bytes) -> tuple[bytes, bytes]:
    """The session's two snapshot slots (``0x02``, ``0x03``): a new snapshot never replaces the newest one a
    replacement runtime may still need (:func:`.snapshot_rider.slot_to_write`)."""
    return sid + b"\x02", sid + b"\x03"


def _decoded(raw: bytes | None) -> ConversationSnapshot | str | None:
    if raw is None:
        return None
    try:
        return decode(raw, ConversationSnapshot)
    except CodecError as exc:
        return f"the snapshot does not decode: {exc}"


def load_slots(env: lmdb.Environment, session: str) -> tuple[ConversationSnapshot | str | None, ...]:
    """Each slot's snapshot: None if empty, a string saying why if it does not decode."""
    sid = check_session(session)
    with env.begin() as txn:
        raws = [txn.get(key, db=db(env, ANCHOR_DB)) for key in slot_keys(sid)]
        data = [None if raw is None else bytes(raw) for raw in raws]
    return tuple(_decoded(d) for d in data)


def load(env: lmdb.Environment, session: str) -> ConversationSnapshot | str | None:
    """The session's newest snapshot; None if it has none; a string saying why if none it has decodes."""
    found = load_slots(env, session)
    snaps = [f for f in found if isinstance(f, ConversationSnapshot)]
    if snaps:
        return max(snaps, key=lambda f: (f.turns, f.seq))
    return next((f for f in found if isinstance(f, str)), None)


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


def candidates(env: lmdb.Environment, session: str, tail_turn: int) -> tuple[list[ConversationSnapshot], str | None]:
    """The snapshots an open may try to continue from, newest first (each is checked against the journal by the
    replay, which takes the first it attests), and why the others may not be (None: no slot was refused)."""
    usable: list[ConversationSnapshot] = []
    refused: list[str] = []
    for found in load_slots(env, session):
        if found is None:
            continue
        problem = found if isinstance(found, str) else usable_for(found, tail_turn)
        if problem is None and isinstance(found, ConversationSnapshot):
            usable.append(found)
        elif problem is not None:
            refused.append(problem)
    usable.sort(key=lambda f: (f.turns, f.seq), reverse=True)
    return usable, "; ".join(refused) or None


def offered(env: lmdb.Environment, session: str, tail_turn: int) -> tuple[ConversationSnapshot | None, str | None]:
    """The newest snapshot an open may try to continue from, or why none may be (``(None, None)``: it has none)."""
    usable, refused = candidates(env, session, tail_turn)
    return (usable[0], None) if usable else (None, refused)


def encoded(seq: int, digest: bytes, state: LoopState, encodings: bytes, opened: dict[str, Any]) -> bytes:
    """The stored bytes of a snapshot of ``state`` (its conversation's ``encodings``), which follows the
    ``turn_settled`` record ``seq`` (``digest``), in a session opened with ``opened``."""
    return encode(ConversationSnapshot(workflow=versions.WORKFLOW, seq=seq, hash=digest, turns=state.turns,
                                       tokens_used=state.tokens_used, count=len(state.conversation),
                                       messages=encodings, opened=opened))


__all__ = [
    "REPLAY_BEFORE_SNAPSHOT",
    "SNAPSHOT_KIB_PER_TURN",
    "ConversationSnapshot",
    "binding_problem",
    "candidates",
    "encoded",
    "load",
    "load_slots",
    "offered",
    "replays_before_snapshot",
    "slot_keys",
    "snapshot_key",
    "state_of",
    "usable_for",
]
