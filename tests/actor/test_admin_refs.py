"""An AdminCall's ``ref`` on a real supervisor: with a ref the answer is ``AdminAnswer(ref, value)``, without one the
bare value as before (OTP's reply); a ref that is not a short str is refused with a BadRequest naming the field, and
the supervisor serves on."""

from __future__ import annotations

from typing import Any

import pytest

from ouroactors import ChildNotFound, supervisor, worker
from ouroactors.core.errors import BadRequest
from ouroactors.supervision.calls import MAX_REF_CHARS, AdminAnswer, AdminCall

from .helpers import ECHO

TREE = supervisor("root", [worker("echo", ECHO), supervisor("inner", [worker("deep", ECHO)])])


@pytest.mark.multiproc
def test_a_call_with_a_ref_is_answered_with_admin_answer_and_one_without_with_the_bare_value(actor_system):
    actor_system.start_tree(TREE)
    bare = actor_system.ask("root", AdminCall("which_child", "echo"), timeout=10.0)
    assert not isinstance(bare, AdminAnswer) and (bare.id, bare.status) == ("echo", "running")

    answer = actor_system.ask("root", AdminCall("which_child", "echo", ref="r-1"), timeout=10.0)
    assert type(answer) is AdminAnswer and answer.ref == "r-1"
    assert (answer.value.id, answer.value.pid, answer.value.generation) == (bare.id, bare.pid, bare.generation)

    missing = actor_system.ask("root", AdminCall("which_child", "nope", ref="r-2"), timeout=10.0)
    assert missing.ref == "r-2" and isinstance(missing.value, ChildNotFound)  # an error travels inside, not raised
    with pytest.raises(ChildNotFound):
        actor_system.ask("root", AdminCall("which_child", "nope"), timeout=10.0)

    listed = actor_system.ask("root/inner", AdminCall("which_children", ref="x" * MAX_REF_CHARS), timeout=10.0)
    assert listed.ref == "x" * MAX_REF_CHARS and [c.id for c in listed.value] == ["deep"]
    counted = actor_system.ask("root", AdminCall("count_children", ref="r-3"), timeout=10.0)
    assert counted == AdminAnswer("r-3", actor_system.count_children("root"))


@pytest.mark.multiproc
def test_a_bad_ref_is_refused_naming_the_field_and_the_supervisor_serves_on(actor_system):
    actor_system.start_tree(TREE)
    before = actor_system.child_info("root/inner")
    bad_refs: list[Any] = [7, b"r-1", "", "x" * (MAX_REF_CHARS + 1), ["r"]]
    for bad in bad_refs:
        with pytest.raises(BadRequest) as caught:
            actor_system.ask("root/inner", AdminCall("which_children", ref=bad), timeout=10.0)
        assert (caught.value.message, caught.value.field) == ("AdminCall", "ref"), caught.value
        assert "AdminCall.ref" in str(caught.value)
    after = actor_system.child_info("root/inner")
    assert (after.pid, after.generation, after.restarts) == (before.pid, before.generation, before.restarts)
    answer = actor_system.ask("root/inner", AdminCall("which_children", ref="ok"), timeout=10.0)
    assert answer.ref == "ok" and [c.id for c in answer.value] == ["deep"]
