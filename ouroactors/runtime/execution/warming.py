"""What a runtime does before any session is opened on it, so that the open (and the first turn) need not.

A runtime is a fresh process forked from the execution supervisor, and much of what a session's open costs is paid
once per process: the first run through the code of the grants evaluator, the sandbox's planner, the session
configuration's validators and the journal's encoder touches memory the process shares copy-on-write with its
parent, and fills caches (parsed rules, digests) that later calls find warm. Two places take that cost off a
message's way:

* :func:`preload`, in the **execution supervisor** before it forks any runtime: what is the same in every runtime
  and needs no LMDB environment of the node's (a supervisor must not hold one open: it forks) — the digest of the
  default tool set and a default session configuration parsed once, the encoding of every record a runtime writes
  planned (:func:`~ouroactors.core.codec.prepare`, :func:`written_records`), httpx imported and its TLS contexts
  built (:mod:`.tls`), and last a whole rehearsal turn (:mod:`.rehearsal_turn`) on a scratch environment it opens
  and closes, so every runtime inherits those caches and code the interpreter has already run. The turn is what a
  runtime forked in a burst (no idle time to rehearse on its own) gains most from: its first turn's thread spent
  less CPU in each of 7 A/B pairs of bench_peers (e.g. 18.7 → 14.7, 13.8 → 12.5, 16.6 → 14.2, 20.4 → 19.2 ms per
  3-step turn), for ~75 ms once, when the supervisor starts.
* :func:`rehearse`, in a **runtime nobody has opened yet** (:data:`REHEARSE_AFTER_S` after its start: a spare the
  session directory keeps, see :mod:`..coordinator.spares`; a runtime its coordinator started for a message is
  opened well before then): a dry run of the open's process-wide work — a sandbox plan in a scratch directory,
  one grants decision made on the node's durable policy and thrown away, a session configuration parsed and a
  ``session_opened``-like record encoded, and a turn's write transaction run dry (:func:`rehearse_writes`:
  begun, the newest record of each database a turn writes read, decoded, encoded and put back, then **aborted**).
  Nothing durable is written and nothing is sent (the event log gets ``runtime_rehearsed``, with its duration);
  nothing it computes is kept as a session's state: the open still reads, parses and decides everything afresh.
  Measured in the agent tree (bench_peers' sessions, trace marks): ~1.5 ms less per open on a spare, of ~11 ms.
  The dry write transaction and the planned records took ~0.5 ms off the first turn's first commit in one A/B of
  three interleaved runs (p50 2.5-3.9 → 2.3-2.6 ms), within the noise in a later one of five.

A failure here is nobody's: the open that meets the same problem reports it (the rehearsal swallows every error).
"""

from __future__ import annotations

import logging
import tempfile
from typing import Any

from ...core import codec

log = logging.getLogger("ouroactors.runtime")

REHEARSE_AFTER_S = 0.05  # an unopened runtime rehearses its open after this long (its opener, if any, came first)
WARM_SESSION = "warm-up"  # the session id of the rehearsal's throwaway decision (nothing is recorded under it)


def sandbox_modes() -> tuple[Any, ...]:
    """The sandbox modes a session may run in here: ``none``, and ``bwrap`` when the (cached) probe says it works."""
    from ..sandbox import SandboxMode, probe_cached

    return (SandboxMode.NONE, SandboxMode.BWRAP) if probe_cached().available else (SandboxMode.NONE,)


def preload() -> None:
    """In the execution supervisor: fill the caches every runtime it forks inherits (see the module docstring) — the
    sandbox's probe and planner (one command planned in each mode: the account database, the read-only view), the
    default tool set's digest, a default configuration parsed — and run one whole turn
    (:func:`~.rehearsal_turn.rehearse_turn`) on a scratch data dir whose environment is closed again before this
    returns, so no LMDB handle is open when the supervisor forks."""
    from . import tls, tool_set
    from .config import TOOL_NAMES, parse_session_config
    from .rehearsal_turn import rehearse_turn
    from .tools.shell import warm as warm_shell

    with tempfile.TemporaryDirectory(prefix="ouroactors-preload-") as root:
        for mode in sandbox_modes():
            warm_shell(root, mode, None)
    tool_set.digest(TOOL_NAMES)
    parse_session_config({}, "preload")
    codec.prepare(*written_records())
    tls.preload()  # httpx and its TLS contexts: a runtime's first model call paid them, 170-260 ms (see .tls)
    status = rehearse_turn()  # last: a whole turn on a scratch data dir, opened and closed here (see the docstring)
    log.debug("execution supervisor: rehearsal turn before forking runtimes: %s", status)


def written_records() -> tuple[type, ...]:
    """The record types a runtime encodes or decodes on a turn's way (its ledger entries and watch record, journal
    records and blobs, the model's messages and tool calls, the session record and events it carries)."""
    from ...authorities.ledger.domain import Entry
    from ...authorities.ledger.watch import WriterRecord
    from ..coordinator.record import PublishedEvent, SessionRecord
    from .blobs import BlobValue
    from .chain import JournalEntry, JournalHead
    from .model import Message, ToolCall, ToolSpec

    return (Entry, WriterRecord, PublishedEvent, SessionRecord, BlobValue, JournalEntry, JournalHead, Message,
            ToolCall, ToolSpec)


def rehearse(env: Any, data_dir: str) -> None:
    """In an unopened runtime: run the open's process-wide work once, keeping nothing (see the module docstring)."""
    from ...authorities.grants.inline import InlineGrants
    from .config import parse_session_config
    from .journal_format import _encode
    from .tools.shell import warm as warm_shell

    modes = sandbox_modes()
    try:
        config = parse_session_config({}, "rehearsal")
        _encode("session_opened", {"config": config.model_dump(mode="python"), "config_digest": config.digest()},
                None, 0)
        with tempfile.TemporaryDirectory(prefix="ouroactors-rehearsal-") as root:
            for mode in modes:
                warm_shell(root, mode, data_dir)
            InlineGrants(env).warm(WARM_SESSION, root)
        rehearse_writes(env)
    except Exception as exc:  # the open that meets it reports it
        log.debug("a runtime's rehearsal failed (the open will say why): %r", exc)


def rehearse_writes(env: Any) -> None:
    """The first turn's transactions, dry: the newest record of each database a turn writes decoded, encoded and put
    back where it is in a write transaction that is then aborted (nothing is written). A process's first decode of a
    record type plans its fields (cached per type), and its first write transaction touches LMDB's dirty-page lists
    and the trees' upper pages in its own address space; here, not on a message's way."""
    from ...authorities.ledger.domain import Entry
    from ...authorities.storage.env import db
    from ...core.codec import decode, encode
    from ..coordinator.record import PublishedEvent, SessionRecord

    kinds: tuple[tuple[bytes, Any], ...] = ((b"ledger", Entry), (b"sessions", SessionRecord),
                                            (b"session_events", PublishedEvent), (b"journal", None),
                                            (b"journal_anchor", None), (b"ledger_seq", None), (b"ledger_runs", None))
    txn = env.begin(write=True)
    try:
        for name, kind in kinds:
            where = db(env, name)
            cursor = txn.cursor(db=where)
            if not cursor.last():
                continue
            key, value = bytes(cursor.key()), bytes(cursor.value())
            if kind is not None:
                value = encode(decode(value, kind))
            txn.put(key, value, db=where)
    finally:
        txn.abort()


__all__ = ["REHEARSE_AFTER_S", "WARM_SESSION", "preload", "rehearse", "rehearse_writes", "sandbox_modes",
           "written_records"]
