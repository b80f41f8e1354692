"""Identities and scopes in the grants authority (issue 12 §4), on real processes.

* who may answer an approval is the authority's policy, never the requester's choice;
* the operator is shown (and the approval keeps) the canonical arguments, not a digest prefix;
* an approved approval cannot be used after its deadline; pending approvals are bounded node-wide
  and finished ones are pruned;
* session rules apply to their session only;
* every decision says whether it is in the ledger (an unrecordable deny is still a deny);
* the session's workspace root comes from its lease; a root the session does not hold is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants import approvals as book
from ouroactors.authorities.grants.actor import (
    AddRules,
    AnswerApproval,
    ConsumeApproval,
    Decide,
    ListApprovals,
    RequestApproval,
)
from ouroactors.authorities.grants.approvals import ApprovalRefused, Refusal
from ouroactors.authorities.grants.operators import OPERATORS_FILE, ensure_local_operator, read_credentials
from ouroactors.authorities.grants.rules import Decision, Effect, Request
from ouroactors.authorities.ledger.actor import ListEntries
from ouroactors.authorities.workspace.actor import Acquire
from ouroactors.core.codec import digest_of
from ouroactors.core.errors import BadRequest
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

from ..actor.helpers import wait_until

pytestmark = pytest.mark.multiproc
GRANTS = "agent/grants"


def tree(grants_kwargs: dict | None = None, roots: list[str] | None = None):
    children = [
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        worker("grants", "ouroactors.authorities.grants.actor:Grants", kwargs=grants_kwargs or {}),
    ]
    if roots is not None:
        children.append(worker("workspace", "ouroactors.authorities.workspace.actor:Workspace",
                               kwargs={"allowed_roots": roots}))
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=children)


def add_operator(data_dir: Path, name: str, token: str) -> None:
    """A second verified operator (as an administrator would add one to operators.json)."""
    path = data_dir / OPERATORS_FILE
    operators = json.loads(path.read_text())
    operators[name] = hashlib.sha256(token.encode()).hexdigest()
    path.write_text(json.dumps(operators))
    os.chmod(path, 0o600)


def bash(command: str, session: str = "s1") -> Request:
    return Request(principal=session, tool="Bash", effect=Effect.EXECUTE, command=command)


# -- approvals: who answers, what is shown, until when ---------------------------------------------


def test_the_requester_cannot_choose_who_answers(actor_system):
    ensure_local_operator(actor_system.data_dir)
    local, _ = read_credentials(actor_system.data_dir)
    add_operator(actor_system.data_dir, "bob", "bob-token")
    actor_system.start_tree(tree())
    request = RequestApproval("s1", "Bash", {"command": "git push"}, 1)
    object.__setattr__(request, "answerers", ("*", "bob"))  # a field the protocol no longer has
    approval = ask_authority(actor_system, GRANTS, request)
    assert approval.answerers == (local,)  # policy: the local operator only, by default
    digest = digest_of(["Bash", {"command": "git push"}])
    with pytest.raises(ApprovalRefused, match="not allowed"):  # bob is verified, but not an answerer
        ask_authority(actor_system, GRANTS, AnswerApproval(approval.approval_id, True, "bob", "bob-token", digest, 1))
    [kept] = ask_authority(actor_system, GRANTS, ListApprovals())
    assert kept.status == "pending" and "not allowed" in kept.refusals[-1]


def test_any_verified_operator_answers_only_when_the_operator_configured_it(actor_system):
    ensure_local_operator(actor_system.data_dir)
    add_operator(actor_system.data_dir, "bob", "bob-token")
    actor_system.start_tree(tree({"answerers": ["*"]}))
    approval = ask_authority(actor_system, GRANTS, RequestApproval("s1", "Bash", {"command": "make"}, 1))
    assert approval.answerers == ("*",)
    digest = digest_of(["Bash", {"command": "make"}])
    answered = ask_authority(actor_system, GRANTS, AnswerApproval(approval.approval_id, True, "bob", "bob-token",
                                                                  digest, 1))
    assert answered.status == "approved" and answered.answered_by == "bob"


def test_the_approval_keeps_the_canonical_arguments_for_the_operator(actor_system):
    actor_system.start_tree(tree())
    arguments = {"command": "git push --force origin main", "cwd": "/work/x", "env": {"B": "2", "A": "1"}}
    approval = ask_authority(actor_system, GRANTS, RequestApproval("s1", "Bash", arguments, 4))
    [listed] = ask_authority(actor_system, GRANTS, ListApprovals())
    assert listed.arguments == arguments and listed.call_digest == digest_of(["Bash", arguments])
    assert listed.approval_id == approval.approval_id
    with pytest.raises(BadRequest, match="arguments"):  # too big to show and store: refused, not truncated
        ask_authority(actor_system, GRANTS, RequestApproval("s1", "Bash", {"blob": "x" * 5000}, 4))


def test_an_approved_approval_cannot_be_used_after_its_deadline():
    pending = book.request([], approval_id="a1", session_id="s1", tool="Bash", call_digest="d" * 64,
                           state_version=1, answerers=("ann",), deadline_ns=1_000, now_ns=0, max_pending=8)
    approved = book.answer(pending, approve=True, operator="ann", call_digest="d" * 64, state_version=1,
                           now_ns=500, reason=None)
    with pytest.raises(Refusal) as caught:
        book.consume(approved, session_id="s1", call_digest="d" * 64, state_version=1, now_ns=1_001)
    assert caught.value.record.status == "expired" and "after the deadline" in caught.value.record.refusals[-1]
    used = book.consume(approved, session_id="s1", call_digest="d" * 64, state_version=1, now_ns=1_000)
    assert used.status == "consumed"
    assert book.expire(approved, 1_000) is None
    swept = book.expire(approved, 1_001)  # the periodic sweep: approved but unused in time
    assert swept is not None and swept.status == "expired" and book.expire(used, 10**9) is None


def test_consuming_after_the_deadline_is_refused_by_the_authority(actor_system):
    actor_system.start_tree(tree())
    name, token = read_credentials(actor_system.data_dir)
    approval = ask_authority(actor_system, GRANTS, RequestApproval("s1", "Bash", {"c": 1}, 1, timeout_s=1.5))
    digest = digest_of(["Bash", {"c": 1}])
    ask_authority(actor_system, GRANTS, AnswerApproval(approval.approval_id, True, name, token, digest, 1))
    wait_until(lambda: time.time_ns() > approval.deadline_ns + 50_000_000, timeout=5.0, what="the deadline")
    with pytest.raises(ApprovalRefused, match=r"after the deadline|approval is expired"):  # used, or swept, late
        ask_authority(actor_system, GRANTS, ConsumeApproval(approval.approval_id, "s1", digest, 1))
    [kept] = ask_authority(actor_system, GRANTS, ListApprovals())
    assert kept.status == "expired"


def test_pending_approvals_are_bounded_on_the_node_and_finished_ones_pruned(actor_system):
    actor_system.start_tree(tree({"max_pending": 3, "max_pending_per_session": 8}))
    for session in ("s1", "s2", "s3"):
        ask_authority(actor_system, GRANTS, RequestApproval(session, "Bash", {"s": session}, 1))
    with pytest.raises(ApprovalRefused, match="3 approvals are pending on this node"):
        ask_authority(actor_system, GRANTS, RequestApproval("s4", "Bash", {"s": "s4"}, 1))
    assert len(ask_authority(actor_system, GRANTS, ListApprovals())) == 3


def test_prune_forgets_old_and_excess_finished_approvals_never_pending_ones():
    def made(i: int, status: str, answered: int | None) -> book.Approval:
        return book.Approval(f"a{i}", "s", "Bash", "d" * 64, 1, ("ann",), 10**12, i, status=status,
                             answered_ns=answered)

    approvals = [made(0, "pending", None), made(1, "denied", 100), made(2, "consumed", 900), made(3, "expired", 950),
                 made(4, "approved", 990)]
    assert book.prune(approvals, 1_000, keep_ns=500, keep_max=10) == ["a1"]  # older than the retention
    assert book.prune(approvals, 1_000, keep_ns=10_000, keep_max=2) == ["a1", "a2"]  # the oldest beyond the bound
    assert "a0" not in book.prune(approvals, 10**15, keep_ns=0, keep_max=0)


# -- rules, decisions, roots -----------------------------------------------------------------------


def test_session_rules_apply_to_their_session_only(actor_system):
    actor_system.start_tree(tree())
    with pytest.raises(BadRequest, match="session_id"):
        ask_authority(actor_system, GRANTS, AddRules("session", ("allow:Bash(make)",)))
    ask_authority(actor_system, GRANTS, AddRules("session", ("allow:Bash(make)",), session_id="s1"))
    assert ask_authority(actor_system, GRANTS, Decide(bash("make", "s1"))).decision is Decision.ALLOW
    assert ask_authority(actor_system, GRANTS, Decide(bash("make", "s2"))).decision is Decision.ASK


def test_session_rules_in_the_configuration_are_refused(actor_system):
    from ouroactors.core.errors import StartFailed

    with pytest.raises(StartFailed):
        actor_system.start_tree(tree({"rules": {"session": ["allow:Bash(*)"]}}))


def test_an_unrecordable_deny_is_still_a_deny_and_says_so(actor_system):
    actor_system.start_tree(tree({"rules": {"node": ["deny:Bash(rm *)"], "user": ["allow:Bash(ls)"]}}))
    recorded = ask_authority(actor_system, GRANTS, Decide(bash("rm -rf build")))
    assert recorded.decision is Decision.DENY and recorded.recorded
    actor_system.arm_faults(GRANTS, FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED),)))
    denied = ask_authority(actor_system, GRANTS, Decide(bash("rm -rf build")))
    assert denied.decision is Decision.DENY and not denied.recorded and "not recorded" in denied.reason
    allowed = ask_authority(actor_system, GRANTS, Decide(bash("ls")))
    assert allowed.decision is Decision.ASK and not allowed.recorded  # an unrecordable allow is never an allow
    actor_system.arm_faults(GRANTS, None)
    assert len(ask_authority(actor_system, "agent/ledger", ListEntries(kind="permission"))) == 1


def test_the_sessions_root_comes_from_its_lease(actor_system, tmp_path):
    project = Path(os.path.realpath(tmp_path)) / "proj"
    (project / "src").mkdir(parents=True)
    other = Path(os.path.realpath(tmp_path)) / "other"
    other.mkdir()
    actor_system.start_tree(tree({"rules": {"user": ["allow:Write(src/**)"]}}, roots=[str(tmp_path)]))
    write = Request(principal="s1", tool="Write", effect=Effect.WRITE, paths=("src/a.py",))
    assert ask_authority(actor_system, GRANTS, Decide(write)).decision is Decision.ASK  # no lease: no root
    ask_authority(actor_system, "agent/workspace", Acquire(str(project), "exclusive", "s1"))
    judged = ask_authority(actor_system, GRANTS, Decide(write))
    assert judged.decision is Decision.ALLOW, judged  # the lease's root gives "src/a.py" its meaning
    with pytest.raises(BadRequest, match="not a workspace root session 's1' holds"):
        ask_authority(actor_system, GRANTS, Decide(write, root=str(other)))
    with pytest.raises(BadRequest, match="absolute"):
        ask_authority(actor_system, GRANTS, Decide(write, root="relative"))
