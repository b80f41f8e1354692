"""An approval is bound to the policy it was asked under: used under another, it is refused (ask again)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ouroactors.authorities.grants import approvals as book
from ouroactors.authorities.grants.approvals import Refusal

ASKED_UNDER, CHANGED = "a" * 64, "b" * 64


def approved(policy: str | None = ASKED_UNDER) -> book.Approval:
    asked = book.request([], approval_id="approval-1", session_id="s1", tool="shell", call_digest="d" * 64,
                         state_version=3, answerers=("op",), deadline_ns=10_000, now_ns=0, max_pending=8,
                         arguments={"command": "git push"}, policy=policy)
    assert asked.policy == policy
    return book.answer(asked, approve=True, operator="op", call_digest="d" * 64, state_version=3, now_ns=5,
                       reason=None)


def use(approval: book.Approval, policy: str | None) -> book.Approval:
    return book.consume(approval, session_id="s1", call_digest="d" * 64, state_version=3, now_ns=6, policy=policy)


def test_an_approval_is_used_under_the_policy_it_was_asked_under():
    assert use(approved(), ASKED_UNDER).status == "consumed"


def test_an_approval_used_after_the_policy_changed_is_refused_and_the_refusal_recorded():
    with pytest.raises(Refusal, match=r"policy changed since the approval was asked .*: ask again") as refused:
        use(approved(), CHANGED)
    record = refused.value.record
    assert record.status == "approved"  # still the operator's answer, only not usable under this policy
    assert "policy changed" in record.refusals[-1]
    assert use(record, ASKED_UNDER).status == "consumed"  # the policy it was asked under again: usable


def test_other_refusals_come_before_the_policy_check():
    consumed = use(approved(), ASKED_UNDER)
    with pytest.raises(Refusal, match="already consumed"):
        use(consumed, CHANGED)
    with pytest.raises(Refusal, match="another call or state version"):
        book.consume(approved(), session_id="s1", call_digest="e" * 64, state_version=3, policy=CHANGED)


def test_an_approval_recorded_before_policies_were_bound_is_not_checked_against_one():
    assert use(approved(policy=None), CHANGED).status == "consumed"
    assert use(replace(approved(), policy=ASKED_UNDER), None).status == "consumed"  # a caller that checks nothing
