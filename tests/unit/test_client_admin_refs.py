"""The system client's admin calls carry a fresh ``ref`` and take only the answer with it.

A fake thespian endpoint (the matching is the client's, not thespian's): its ``ask`` first gives a late
``AdminAnswer`` of an earlier call (another ref), then ``listen`` the one with the call's own ref.
"""

from __future__ import annotations

from typing import Any

import pytest
from thespian.actors import PoisonMessage

from ouroactors.core.errors import ActorCrashed, AskTimeout
from ouroactors.supervision.calls import MAX_REF_CHARS, AdminAnswer, AdminCall, Ok, ref_problem
from ouroactors.supervision.child_info import ChildInfo
from ouroactors.system.client import SystemClient
from ouroactors.system.host_protocol import ListTrees, TreeInfo


class FakeEndpoint:
    """Answers an AdminCall with ``stale`` (late answers of earlier calls) first, then with ``answer(call)``."""

    def __init__(self, answer: Any, stale: list[Any]) -> None:
        self.answer = answer
        self.stale = stale
        self.sent: list[AdminCall] = []
        self.listens: list[float] = []
        self._queue: list[Any] = []

    def createActor(self, cls: Any, globalName: str | None = None) -> str:
        return "host"

    def ask(self, address: Any, message: Any, timeout: float) -> Any:
        if isinstance(message, ListTrees):
            return [TreeInfo("root", "root-address", 1, 1, "running")]
        assert isinstance(message, AdminCall)
        self.sent.append(message)
        self._queue = [*self.stale, self.answer(message)]
        return self._queue.pop(0)

    def listen(self, timeout: float) -> Any:
        self.listens.append(timeout)
        return self._queue.pop(0) if self._queue else None


def info(child_id: str, address: str = "addr") -> ChildInfo:
    return ChildInfo(id=child_id, status="running", pid=1, generation=1, type="worker", actor="m.A", restarts=0,
                     last_exit=None, address=address)


def client(endpoint: FakeEndpoint) -> SystemClient:
    return SystemClient(endpoint, "simple", None, None)  # type: ignore[arg-type]


def test_a_late_admin_answer_with_another_ref_is_dropped_and_the_right_one_taken():
    right = [info("new")]
    endpoint = FakeEndpoint(lambda call: AdminAnswer(call.ref, right), [AdminAnswer("c.earlier", [info("old")])])
    assert client(endpoint).which_children("root") == right
    (sent,) = endpoint.sent
    assert sent.op == "which_children" and ref_problem(sent.ref) is None and sent.ref is not None
    assert len(endpoint.listens) == 1 and 0 < endpoint.listens[0] <= 30.0  # listened on until the same deadline


def test_every_admin_call_gets_a_fresh_ref_and_its_value_unwrapped():
    endpoint = FakeEndpoint(lambda call: AdminAnswer(call.ref, info(call.child_id or "?")), [])
    system = client(endpoint)
    assert system.child_info("root/a").id == "a"
    assert system.child_info("root/b").id == "b"
    refs = [call.ref for call in endpoint.sent]
    assert len(set(refs)) == len(refs) == 2 and all(ref and len(ref) <= MAX_REF_CHARS for ref in refs)


def test_the_walk_and_path_lookups_match_by_ref_too():
    endpoint = FakeEndpoint(
        lambda call: AdminAnswer(call.ref, [info("w")] if call.op == "which_children" else info(call.child_id or "")),
        [AdminAnswer("c.late", [info("stale")]), AdminAnswer("c.later", info("stale"))],
    )
    system = client(endpoint)
    assert [(path, child.id) for path, child in system.walk()] == [("root/w", "w")]
    assert system.resolve("root/w") == "addr"


def test_only_stale_answers_are_a_timeout_and_ok_errors_and_poison_answer_as_before():
    stale_only = FakeEndpoint(lambda call: None, [AdminAnswer("c.late", [info("stale")])])
    with pytest.raises(AskTimeout):
        client(stale_only).which_children("root")

    ok = FakeEndpoint(lambda call: AdminAnswer(call.ref, Ok(3)), [AdminAnswer("c.late", Ok(9))])
    assert client(ok)._admin("root", AdminCall("count_children")) == 3  # what ActorSystem.count_children calls

    err = FakeEndpoint(lambda call: AdminAnswer(call.ref, KeyError("x")), [])
    with pytest.raises(KeyError):
        client(err).which_children("root")

    poisoned = FakeEndpoint(lambda call: PoisonMessage(call, "boom"),
                            [PoisonMessage(AdminCall("which_children", ref="c.late"), "old")])
    with pytest.raises(ActorCrashed) as crashed:
        client(poisoned).which_children("root")
    assert "boom" in str(crashed.value)
