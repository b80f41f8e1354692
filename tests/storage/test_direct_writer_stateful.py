"""Direct writers, ledger recovery and dead-writer sweeps in random interleavings (hypothesis stateful
testing on a real LMDB environment).

Invariants: a writer whose ledger generation is gone changes nothing (``StaleGeneration``); after a
recovery no entry is ``started``; an entry is never lost and a settled one never changes; a dead
writer's unsettled starts become ``ambiguous``, nobody else's; ``ledger_runs`` indexes every unsettled start of
the watched writers still registered, and besides those only starts their own writer settled since (its next start
takes their keys away).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ouroactors.authorities.ledger.direct import LedgerWriter
from ouroactors.authorities.ledger.domain import DEFAULT_KINDS, LedgerError, Status, UnknownEffect
from ouroactors.authorities.ledger.store import LedgerStore
from ouroactors.authorities.storage.env import (
    GENERATION_KEY,
    StorageConfig,
    close_env,
    encode_u64,
    ensure_schema,
    meta_db,
    open_env,
)
from ouroactors.core.errors import StaleGeneration

from .workers import start_request

EFFECTS = [f"e{i}" for i in range(6)]
STORAGE_GEN = 3


class DirectWriters(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="direct-stateful-"))
        self.config = StorageConfig.under(self.dir)
        env = open_env(self.config)
        ensure_schema(env, self.config.path)
        with env.begin(write=True) as txn:
            txn.put(GENERATION_KEY, encode_u64(STORAGE_GEN), db=meta_db(env))
        self.ledger = LedgerStore(env, node="n", kinds=DEFAULT_KINDS, fence=STORAGE_GEN)
        self.generation = 1
        assert self.ledger.recover(self.generation).value == 0
        self.writers: list[tuple[LedgerWriter, int]] = []  # (writer, the ledger generation it was bound to)
        self.forgotten: set[bytes] = set()
        self.model: dict[str, Status] = {}
        self.started_by: dict[str, bytes | None] = {}  # effect id -> the watched writer that started it
        self.settled_by: dict[str, bytes | None] = {}  # effect id -> the writer that settled it (None: unwatched)

    def teardown(self) -> None:
        close_env(self.config)
        shutil.rmtree(self.dir, ignore_errors=True)

    def live(self, bound: int) -> bool:
        return bound == self.generation

    # -- rules ---------------------------------------------------------------------------------------------

    @rule(watch=st.booleans())
    def open_writer(self, watch: bool) -> None:
        writer = LedgerWriter(self.dir, node="n", watch=watch)
        assert writer.stamp.ledger == self.generation
        self.writers.append((writer, self.generation))

    @precondition(lambda self: self.writers)
    @rule(pick=st.integers(0, 50), effect=st.sampled_from(EFFECTS))
    def start(self, pick: int, effect: str) -> None:
        writer, bound = self.writers[pick % len(self.writers)]
        answer = writer.record_started(start_request(effect))
        if not self.live(bound):
            assert isinstance(answer, StaleGeneration) and answer.authority == "ledger", answer
            return
        if effect in self.model:
            assert answer.answer == "existing" and answer.entry.status is self.model[effect]
            return
        assert answer.answer == "created" and answer.entry.status is Status.STARTED
        self.model[effect] = Status.STARTED
        self.started_by[effect] = writer.writer_id

    @precondition(lambda self: self.writers)
    @rule(pick=st.integers(0, 50), effect=st.sampled_from(EFFECTS), status=st.sampled_from(["ok", "failed"]))
    def settle(self, pick: int, effect: str, status: str) -> None:
        writer, bound = self.writers[pick % len(self.writers)]
        answer = writer.record_settled(effect, status)
        current = self.model.get(effect)
        if not self.live(bound):
            assert isinstance(answer, StaleGeneration), answer
        elif current is None:
            assert isinstance(answer, UnknownEffect), answer
        elif current is Status.STARTED:
            assert answer.answer == "created" and answer.entry.status.value == status
            self.model[effect] = Status(status)
            self.settled_by[effect] = writer.writer_id
        elif current.value == status:
            assert answer.answer == "existing"
        else:  # settled otherwise, or ambiguous without evidence
            assert isinstance(answer, LedgerError), answer

    @rule()
    def ledger_restarts(self) -> None:
        self.generation += 1
        count = self.ledger.recover(self.generation).value
        assert count == sum(status is Status.STARTED for status in self.model.values())
        for effect, status in self.model.items():
            if status is Status.STARTED:
                self.model[effect] = Status.AMBIGUOUS
        self.forgotten |= {writer.writer_id for writer, _ in self.writers if writer.writer_id is not None}

    @precondition(lambda self: any(w.writer_id is not None for w, _ in self.writers))
    @rule(pick=st.integers(0, 50))
    def a_writer_dies(self, pick: int) -> None:
        watched = [writer for writer, _ in self.writers if writer.writer_id is not None]
        dead = watched[pick % len(watched)].writer_id
        assert dead is not None
        lost = self.ledger.forget_writers({dead}, "died").value
        expected = {effect for effect, status in self.model.items()
                    if status is Status.STARTED and self.started_by.get(effect) == dead}
        assert set(lost) == expected
        for effect in expected:
            self.model[effect] = Status.AMBIGUOUS
        self.forgotten.add(dead)
        self.writers = [(writer, bound) for writer, bound in self.writers if writer.writer_id != dead]  # gone

    # -- invariants ----------------------------------------------------------------------------------------

    @invariant()
    def entries_match_the_model(self) -> None:
        stored = {entry.effect_id: entry.status for entry in self.ledger.list(limit=100)}
        assert stored == self.model

    @invariant()
    def runs_index_the_watched_unsettled_starts_and_only_self_settled_others(self) -> None:
        with self.ledger.env.begin() as txn:
            runs = {bytes(key).decode(): bytes(writer) for key, writer in txn.cursor(db=self.ledger.runs)}
        live = {effect: writer for effect, writer in self.started_by.items()
                if writer is not None and writer not in self.forgotten}
        unsettled = {effect: writer for effect, writer in live.items() if self.model[effect] is Status.STARTED}
        assert unsettled.items() <= runs.items()
        for effect, writer in runs.items():
            if effect not in unsettled:  # a start its own writer settled: its key waits for that writer's next start
                assert live.get(effect) == writer and self.model[effect] in (Status.OK, Status.FAILED), effect
                assert self.settled_by.get(effect) == writer, effect


TestDirectWriters = DirectWriters.TestCase
TestDirectWriters.settings = settings(max_examples=100, stateful_step_count=25, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])
