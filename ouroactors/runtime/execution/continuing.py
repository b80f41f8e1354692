"""Continuing a session at open: its journal replayed into the new runtime's loop, its lease's root checked.

A mixin of :class:`~.runtime.Runtime`, used by its open (:mod:`.opening`). A runtime is started per turn and after
a crash, so an open continues whatever the session already has: the conversation its journal attests
(:meth:`SessionContinuing._restore`: a replay through the same loop, nothing runs) and the root of the lease the
coordinator took for it (:meth:`SessionContinuing._leased_root`, read from the workspace's durable records, never
taken from the message). The refusals an open may answer for these are defined here and re-exported from
:mod:`.runtime`; they travel pickled, by module path.
"""

from __future__ import annotations

import os
from functools import partial
from typing import TYPE_CHECKING

import msgpack

from ...authorities.storage.env import db
from ...authorities.workspace.leases import lease_from_record
from . import reading, snapshots
from .errors import RuntimeRefusal
from .replay import ReplayReport, replay_session

if TYPE_CHECKING:
    from ...authorities.ledger.direct import LedgerWriter
    from ...supervision.events import EventWriter
    from .bridge import TrioThread
    from .config import SessionConfig
    from .loop import SessionLoop
    from .snapshot_rider import SnapshotRider
    from .tail import SettledTail


class LeaseRefused(RuntimeRefusal):
    """The lease named at open is not this session's live lease on the configured workspace."""


class JournalRefused(RuntimeRefusal):
    """The session's journal cannot be continued by this runtime (it diverges from what this loop derives)."""


class SessionContinuing:
    """The runtime's continuation of a session at open; see the module docstring."""

    if TYPE_CHECKING:  # what the runtime provides
        ledger: LedgerWriter
        trio: TrioThread
        events: EventWriter

    def _restore(self, loop: SessionLoop, session: str, tail: SettledTail,
                 snapshot: SnapshotRider) -> ReplayReport | None:
        """Continue a session that already has a journal: the conversation after its last verified turn.

        A runtime is started per turn and after a crash, so it must not begin with an empty conversation (turn
        numbers would repeat, and with them effect ids). The journal is re-derived through the loop (replay: no
        tool, no write); a journal that diverges from this code cannot be continued honestly and is refused. The
        replay starts from the session's newest conversation snapshot the journal attests (the last runtime left one
        at the end of its turn), and a long replay stages one for the next open, to ride in the journal's next commit
        (:mod:`.snapshot_rider`). The report (None: the session has no journal yet) also holds the records after the
        last verified turn: the model results a re-run of the next turn takes instead of asking again (:mod:`.reuse`).
        """
        env = self.ledger.env
        snapshot.safe_through = 0  # no turn's events are known to be committed yet: the acks will tell
        if reading.head(env, session) is None:
            return None
        # continue from the newest snapshot the journal attests (see .snapshots)
        offers, refused = snapshots.candidates(env, session, tail.turn)
        report = self.trio.run(partial(replay_session, env, session, sink=tail, start=offers))
        if report.divergence is not None:
            d = report.divergence
            raise JournalRefused(f"session {session!r}: its journal diverges from this runtime at seq {d.seq} "
                                 f"({d.field}); it cannot be continued — see `ouroactors journal replay {session}`")
        if report.boundary is not None and report.boundary.reason == "truncated" and not report.snapshot_turns \
                and not report.verified_turns:  # its first turns are gone, and no snapshot holds their conversation
            why = report.snapshot_refused or refused
            raise JournalRefused(f"session {session!r}: its journal dropped its oldest turns to its size budget (seq "
                                 f"{report.boundary.seq}) and holds no conversation snapshot to continue from"
                                 + (f" ({why})" if why else "") + "; it cannot be continued with its context")
        if report.state is not None:
            loop.restore(report.state)
        # the turns whose events the opener's committed log holds: a snapshot of one of them is what a replacement of
        # this runtime may continue from, and is kept in its slot (.snapshot_rider)
        restored = report.state.turns if report.state is not None else 0
        snapshot.safe_through = tail.turn - 1 if tail.turn else restored
        staged, unstaged = snapshot.stage(report.verified_turns, report.state, report.settled_at, report.encodings,
                                        report.opened, tail_turn=tail.turn)
        self.events.write("runtime_restored", None, {
            "session": session, "turns": report.snapshot_turns + report.verified_turns,
            "replayed": report.verified_turns, "from_snapshot": report.snapshot_turns,
            "snapshot_refused": report.snapshot_refused or refused, "snapshot_staged": staged,
            "snapshot_not_staged": unstaged,
            "boundary": report.boundary.reason if report.boundary else None})
        return report

    def _leased_root(self, session: str, lease_id: str | None, config: SessionConfig) -> str | None:
        """The canonical root of the session's live lease, checked in the workspace's durable records."""
        if lease_id is None:
            if config.workspace is not None:
                raise LeaseRefused(f"session {session!r} names workspace {config.workspace!r} but holds no lease: "
                                   "acquire one from the workspace authority and pass its lease_id")
            return None
        with self.ledger.env.begin() as txn:
            raw = txn.get(f"lease/{lease_id}".encode(), db=db(self.ledger.env, b"workspace"))
        if raw is None:
            raise LeaseRefused(f"lease {lease_id!r} does not exist")
        lease = lease_from_record(msgpack.unpackb(bytes(raw), raw=False))
        if lease.status != "active" or lease.session_id != session:
            raise LeaseRefused(f"lease {lease_id!r} is {lease.status} and belongs to session {lease.session_id!r}, "
                               f"not a live lease of {session!r}")
        if config.workspace is not None and os.path.realpath(config.workspace) != lease.root:
            raise LeaseRefused(f"lease {lease_id!r} covers {lease.root!r}, not the configured workspace "
                               f"{config.workspace!r}")
        return lease.root


__all__ = ["JournalRefused", "LeaseRefused", "SessionContinuing"]
