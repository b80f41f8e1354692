"""An answer is final, and the same answer again is done already (a retry), never a second decision."""

from __future__ import annotations

import itertools

import pytest

from ouroactors.authorities.grants import approvals as book
from ouroactors.authorities.grants.approvals import Refusal

DIGEST = "d" * 64


def pending() -> book.Approval:
    return book.request([], approval_id="approval-1", session_id="s1", tool="shell", call_digest=DIGEST,
                        state_version=3, answerers=("op", "other"), deadline_ns=10_000, now_ns=0, max_pending=8)


def answer(approval: book.Approval, approve: bool, operator: str = "op", reason: str | None = None,
           now: int = 5) -> book.Approval:
    return book.answer(approval, approve=approve, operator=operator, call_digest=DIGEST, state_version=3,
                       now_ns=now, reason=reason)


@pytest.mark.parametrize("approve,used", [(True, False), (True, True), (False, False)],
                         ids=["approved", "approved and used", "denied"])
def test_the_same_answer_again_is_the_approval_as_it_stands(approve, used) -> None:
    given = answer(pending(), approve, reason="looked at it")
    if used:
        given = book.consume(given, session_id="s1", call_digest=DIGEST, state_version=3, now_ns=6)
    assert answer(given, approve, reason="looked at it", now=7) is given  # nothing changes: nothing to commit
    # any other answer is refused, and says what the approval is and who answered it
    for other_approve, operator, reason in itertools.product((True, False), ("op", "other"),
                                                            ("looked at it", None)):
        if (other_approve, operator, reason) == (approve, "op", "looked at it"):
            continue
        with pytest.raises(Refusal, match=rf"approval is {given.status} by op already \(an answer is final\)"):
            answer(given, other_approve, operator, reason)


def test_an_expired_approval_is_not_answered_by_repeating_anything() -> None:
    expired = book.expire(pending(), now_ns=20_000)
    assert expired is not None
    for approve in (True, False):
        with pytest.raises(Refusal, match="approval is expired already"):
            answer(expired, approve, now=20_001)
