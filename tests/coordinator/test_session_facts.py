"""The coordinator's reader of session facts, which grants and workspace load by dotted path (LMDB on disk)."""

from __future__ import annotations

import pytest

from ouroactors.authorities.session_facts import (
    DEFAULT_READER,
    ApprovalWait,
    Missing,
    SessionFacts,
    Undecodable,
    load_reader,
)
from ouroactors.authorities.storage.commit import Committed, write
from ouroactors.core.errors import OuroactorsError
from ouroactors.runtime.coordinator.record import PendingWait, PinnedVersions, SessionRecord
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import State

PINNED = PinnedVersions(prompt="p", model="m", tools="t", workflow="w", policy="pol")


def record(session_id: str, state: State, waits: tuple[PendingWait, ...] = ()) -> SessionRecord:
    return SessionRecord(session_id=session_id, node="local", state=state, state_version=0, revision=0,
                         pinned=PINNED, principal="alice", tenant="t", channels=("cli",), waits=waits)


def test_the_default_reader_gives_each_session_its_facts_and_fails_closed_on_the_rest(tmp_path):
    store = SessionStore.open(tmp_path)
    ask = PendingWait(kind="approval", wait_id="ask.v0.d", issued_at_version=0, proposal_digest="d" * 64)
    timer = PendingWait(kind="timer", wait_id="t1", issued_at_version=0, due_ns=5)
    assert isinstance(store.create(record("s-wait", State.WAITING_APPROVAL, (ask,))), Committed)
    assert isinstance(store.create(record("s-done", State.COMPLETED)), Committed)
    assert isinstance(store.create(record("s-timer", State.WAITING_TIMER, (timer,))), Committed)
    outcome = write(store.env, lambda txn: txn.put(b"s-bad", b"\xc1 not msgpack", db=store.sessions))
    assert isinstance(outcome, Committed)

    read = load_reader(DEFAULT_READER)(store.env, None)
    assert read("s-wait") == SessionFacts("waiting:approval", False, 0, (ApprovalWait("d" * 64, 0),))
    assert read("s-done") == SessionFacts("completed", True, 0, ())
    assert read("s-timer") == SessionFacts("waiting:timer", False, 0, ())  # only approval waits are told
    assert read("s-none") == Missing()
    assert read("../not an id") == Missing()  # no record can have it
    corrupt = read("s-bad")
    assert isinstance(corrupt, Undecodable) and "s-bad" in corrupt.detail
    with store.env.begin(db=store.quarantine) as txn:  # copied aside by the store it reads through
        assert txn.get(b"sessions/s-bad") == b"\xc1 not msgpack"


@pytest.mark.parametrize("path", ["nowhere.at.all:reader", "ouroactors.runtime.coordinator.facts:nothing",
                                  "no-colon", "ouroactors.authorities.session_facts:DEFAULT_READER", 5, None,
                                  ":", "x" * 10_000 + ":y"])
def test_a_reader_path_that_does_not_name_a_callable_is_refused_naming_it(path):
    with pytest.raises(OuroactorsError, match="session_facts"):
        load_reader(path)


@pytest.mark.multiproc
@pytest.mark.parametrize(("name", "actor", "kwargs"), [
    ("grants", "ouroactors.authorities.grants.actor:Grants", {}),
    ("workspace", "ouroactors.authorities.workspace.actor:Workspace", {"allowed_roots": ["/tmp"]}),
])
def test_an_authority_configured_with_a_reader_it_cannot_load_does_not_start_and_says_why(actor_system, name, actor,
                                                                                          kwargs):
    from ouroactors import StartFailed, supervisor, worker

    with pytest.raises(StartFailed, match="session_facts: cannot load 'nowhere:reader'"):
        actor_system.start_tree(supervisor("agent", strategy="rest_for_one", children=[
            worker("storage", "ouroactors.authorities.storage.actor:Storage"),
            worker(name, actor, kwargs={**kwargs, "session_facts": "nowhere:reader"}),
        ]))
