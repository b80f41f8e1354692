"""Commit before publish, end to end on real LMDB: a runtime's buffer, the store, faults and coordinator crashes.

Hypothesis drives a real :class:`OutputBuffer` (the runtime's output), the real store and the pure
publication plan through random interleavings of: the runtime producing events, the coordinator
draining and checkpointing (with the commit injected as rejected or unknown at random), the
coordinator crashing (its memory gone; the next one reads the durable record back) and subscribers
reading the log. Invariant 3 of DESIGN.md after every step: nothing is published beyond the
committed cursor, cursors never go back, and the log is exactly the events 1..cursor, each once,
digest-chained to the record's digest.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ouroactors.authorities.storage.commit import Committed, Unknown
from ouroactors.authorities.storage.env import StorageConfig, close_env, ensure_schema, open_env
from ouroactors.core import faults
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.coordinator.publication import (
    Abandon,
    Plan,
    Publish,
    Reconcile,
    after_commit,
    chain,
    plan,
    reconciled,
)
from ouroactors.runtime.coordinator.record import RuntimeAttachment
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import Event
from ouroactors.runtime.execution.output import OutputBuffer

from .support import new_record

_IDS = itertools.count()
FAULTS = {"none": None, "rejected": FaultAction.COMMIT_REJECTED, "unknown_before": FaultAction.COMMIT_UNKNOWN,
          "unknown_after": FaultAction.COMMIT_UNKNOWN}


class Publication(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="coord-stateful-"))
        self.config = StorageConfig.under(self.dir)
        env = open_env(self.config)
        ensure_schema(env, self.config.path)
        self.store = SessionStore(env)
        self.sid = f"s{next(_IDS)}"
        rec = self.store.create(new_record(self.sid))
        assert isinstance(rec, Committed)
        moved = self.store.transition(self.sid, 0, Event.MESSAGE, last_generation=1,
                                      runtime=RuntimeAttachment(runtime_id="rt", generation=1))
        assert isinstance(moved, Committed)
        self.buffer = OutputBuffer(capacity=64)
        self.record = moved.value  # the coordinator's memory (None after a crash)
        self.published: list[int] = []  # what subscribers were handed live, in order
        self.high_water = 0
        self.pending: Plan | None = None  # a checkpoint whose outcome was unknown

    def teardown(self) -> None:
        faults.disarm()
        close_env(self.config)
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(n=st.integers(min_value=1, max_value=5))
    def produce(self, n: int) -> None:
        for _ in range(n):
            if self.buffer.has_room():
                self.buffer.append("text", 1, {"i": self.buffer.produced + 1})

    @rule(fault=st.sampled_from(sorted(FAULTS)))
    def drain_and_commit(self, fault: str) -> None:
        if self.record is None:
            return
        rec = self.record
        step = plan(self.buffer.drain(rec.committed_cursor, limit=7), rec.committed_cursor, rec.log_digest,
                    rec.conversation_digest)
        if step.empty:
            return
        action = FAULTS[fault]
        if action is not None:
            point = "storage.after_commit" if fault == "unknown_after" else "storage.before_commit"
            faults.arm(FaultPlan((FaultRule(point, action),)))
        try:
            outcome = self.store.checkpoint(self.sid, rec.revision, step)
        finally:
            faults.disarm()
        next_step = after_commit(step, outcome)
        if isinstance(next_step, Publish):
            assert isinstance(outcome, Committed)
            self.record = outcome.value
            self.buffer.ack(next_step.ack)
            self.published.extend(e.cursor for e in next_step.events)
        elif isinstance(next_step, Abandon):
            assert self.store.get(self.sid) == rec  # definitely not written
        else:
            assert isinstance(next_step, Reconcile) and isinstance(outcome, Unknown)
            self.record, self.pending = None, step  # the coordinator stops; the next one reconciles

    @rule()
    def coordinator_restarts(self) -> None:
        """A new coordinator reads the record back (and, if the last outcome was unknown, learns which won)."""
        durable = self.store.get(self.sid)
        assert durable is not None
        if self.pending is not None:
            landed = reconciled(self.pending, durable.committed_cursor, durable.log_digest)  # never a guess
            assert landed is (self.pending.events[0].cursor in [e.cursor for e in self.store.events(self.sid)])
            if landed:  # its events were never pushed live: subscribers read them from the log
                self.buffer.ack(self.pending.cursor)
            self.pending = None
        self.record = durable

    @rule(after=st.integers(min_value=0, max_value=40))
    def subscriber_reads(self, after: int) -> None:
        got = [e.cursor for e in self.store.events(self.sid, after=after)]
        durable = self.store.get(self.sid)
        assert got == list(range(after + 1, durable.committed_cursor + 1))

    @invariant()
    def nothing_beyond_the_committed_cursor(self) -> None:
        durable = self.store.get(self.sid)
        assert durable is not None
        assert durable.committed_cursor >= self.high_water  # cursors never go back
        self.high_water = durable.committed_cursor
        assert all(c <= durable.committed_cursor for c in self.published)
        assert self.published == sorted(set(self.published))  # each once, in order
        log = self.store.events(self.sid, limit=10_000)
        assert [e.cursor for e in log] == list(range(1, durable.committed_cursor + 1))
        assert chain("", log) == durable.log_digest
        assert self.buffer.acked <= durable.committed_cursor


Publication.TestCase.settings = settings(max_examples=15, stateful_step_count=20, deadline=None)
test_commit_before_publish = Publication.TestCase
