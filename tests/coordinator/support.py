"""Builders shared by the coordinator tests (importable by spawned children too)."""

from __future__ import annotations

from typing import Any

from ouroactors.authorities.storage.commit import Committed
from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
from ouroactors.runtime.coordinator.errors import RevisionConflict
from ouroactors.runtime.coordinator.reads import DirectoryReads, Follower
from ouroactors.runtime.coordinator.record import PendingWait, PinnedVersions, SessionRecord
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import State
from ouroactors.supervision.calls import Asker

PINNED = PinnedVersions(prompt="p1", model="scripted-1", tools="t1", workflow="w1", policy="pol1")


def new_record(session_id: str = "s1", *, node: str = "n1", state: State = State.SUSPENDED,
               **changes: Any) -> SessionRecord:
    base: dict[str, Any] = dict(session_id=session_id, node=node, state=state, state_version=0, revision=0,
                                pinned=PINNED, principal="alice", tenant="t", channels=("cli",))
    if state.wait is not None and "waits" not in changes:
        base["waits"] = (PendingWait(kind=state.wait, wait_id="w1", issued_at_version=0,
                                     due_ns=1000 if state.wait == "timer" else None),)
    base.update(changes)
    return SessionRecord(**base)


def cas_writer(config: StorageConfig, session_id: str, tag: str, ready: Any, go: Any, results: Any) -> None:
    """In a child process: read the session, wait for the signal, claim it at the revision read; report."""
    env = open_env(config)
    try:
        store = SessionStore(env)
        record = store.get(session_id)
        assert record is not None
        ready.put(tag)
        go.wait(60)
        try:
            outcome = store.claim(session_id, record.revision, tag)
        except RevisionConflict as exc:
            results.put(f"conflict:{exc.found}")
            return
        results.put(f"won:{outcome.value.coordinator}" if isinstance(outcome, Committed) else f"other:{outcome}")
    finally:
        close_env(config)


class RecordingDirectory(DirectoryReads):
    """The directory's read side alone: what it sends is recorded, its follow tick only noted (pure tests)."""

    def __init__(self, principals: Any = None) -> None:
        self.followers: list[Follower] = []
        self.serving: dict[str, Any] = {}
        self.sent: list[tuple[Any, Any]] = []
        self.ticking = False
        if principals is not None:
            self.principals = principals

    def send(self, target: Any, message: Any) -> None:
        self.sent.append((target, message))

    def asker_of(self, sender: Any) -> Asker:
        return Asker(sender)

    def wakeupAfter(self, delay: Any, payload: Any = None) -> None:
        self.ticking = True
