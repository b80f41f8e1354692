"""The rules every record change passes, whoever asked for it (attacks on the durable record)."""

from __future__ import annotations

import pytest

from ouroactors.authorities.storage.commit import Committed
from ouroactors.runtime.coordinator.mutation import InvalidChange, check_step, moved, next_record
from ouroactors.runtime.coordinator.record import PendingWait, RuntimeAttachment
from ouroactors.runtime.coordinator.workflow import Event, State

from .support import new_record

RT1 = RuntimeAttachment(runtime_id="rt-1", generation=1)
RT2 = RuntimeAttachment(runtime_id="rt-2", generation=2)


def running(**changes):
    return new_record(state=State.RUNNING, runtime=RT1, last_generation=1, **changes)


@pytest.mark.parametrize(("changes", "match"), [
    ({"session_id": "s2"}, "id is fixed"),
    ({"created_ns": 99}, "creation time"),
    ({"committed_cursor": 5}, "only a checkpoint"),
    ({"log_digest": "forged"}, "only a checkpoint"),
    ({"conversation_digest": "forged"}, "only a checkpoint"),
    ({"last_generation": 0, "runtime": None}, "last_generation never goes back"),
    ({"runtime": RuntimeAttachment(runtime_id="rt-zombie", generation=1)}, "used before"),
    ({"runtime": RT2}, "above the last generation"),
    ({"waits": (PendingWait(kind="approval", wait_id="a", issued_at_version=0),)}, "waits on nothing"),
])
def test_forbidden_steps(changes, match) -> None:
    old = running()
    with pytest.raises(InvalidChange, match=match):
        check_step(old, old.model_copy(update=changes))


def test_a_cursor_never_goes_back_even_in_a_checkpoint() -> None:
    old = running(committed_cursor=9)
    with pytest.raises(InvalidChange, match="never goes back"):
        check_step(old, old.model_copy(update={"committed_cursor": 8}), checkpoint=True)


def test_a_suspended_session_names_no_runtime() -> None:
    old = new_record(state=State.SUSPENDED, last_generation=1)
    with pytest.raises(InvalidChange, match="holds no runtime"):
        check_step(old, old.model_copy(update={"runtime": RT2, "last_generation": 2}))


def test_a_replacement_gets_a_fresh_generation() -> None:
    old = moved(running(), Event.RUNTIME_LOST, {})
    assert old.runtime == RT1  # recovering keeps the lost attachment for the probe
    new = moved(old, Event.RECOVERED, {"runtime": RT2, "last_generation": 2})
    stepped = next_record(old, new, 123)
    assert (stepped.revision, stepped.updated_ns, stepped.runtime) == (old.revision + 1, 123, RT2)
    with pytest.raises(InvalidChange, match="used before"):
        next_record(old, moved(old, Event.RECOVERED, {"runtime": RuntimeAttachment(runtime_id="rt-2", generation=1)}),
                    1)


def test_transitions_set_their_own_fields() -> None:
    with pytest.raises(InvalidChange, match="state_version"):
        moved(running(), Event.COMPLETE, {"state_version": 99})


def test_the_store_applies_the_rules(store) -> None:
    rec = store.create(new_record())
    assert isinstance(rec, Committed)
    with pytest.raises(InvalidChange, match="only a checkpoint"):
        store.update("s1", 0, lambda r: r.model_copy(update={"committed_cursor": 100}))
    assert store.get("s1") == rec.value
