"""The grants authority on real processes: decisions recorded first, durable approvals, revocation."""

from __future__ import annotations

import threading
import time

import msgpack
import pytest

from ouroactors import StaleGeneration, supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.actor import (
    AddRules,
    AnswerApproval,
    ConsumeApproval,
    Decide,
    ListApprovals,
    RequestApproval,
    RevokeRules,
    SetPosture,
    WaitApproval,
)
from ouroactors.authorities.grants.approvals import ApprovalRefused
from ouroactors.authorities.grants.operators import read_credentials
from ouroactors.authorities.grants.rules import Decision, Effect, Request, RuleError
from ouroactors.authorities.ledger.actor import ListEntries, RecordStarted
from ouroactors.authorities.ledger.direct import LedgerWriter
from ouroactors.authorities.ledger.domain import StartRequest, fingerprint
from ouroactors.authorities.storage.commit import Committed
from ouroactors.authorities.storage.env import StorageConfig, close_env, db, open_env
from ouroactors.core.codec import digest_of
from ouroactors.core.errors import BadRequest, CorruptRecord
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.coordinator.record import PendingWait, PinnedVersions, SessionRecord
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import State
from ouroactors.supervision.protocol import Stamped

from .helpers import ECHO

pytestmark = pytest.mark.multiproc

GARBAGE = b"\xc1\xc1garbage"
RULES = {"node": ["deny:Bash(rm *)"], "user": ["allow:Bash(git status)", "allow:Read(**)", "ask:Bash(git push *)"]}


def tree():
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        worker("grants", "ouroactors.authorities.grants.actor:Grants", kwargs={"rules": RULES}),
        worker("consumer", ECHO),
    ])


def bash(command: str, session: str = "s1") -> Request:
    return Request(principal=session, tool="Bash", effect=Effect.EXECUTE, command=command)


def test_decisions_are_recorded_in_the_ledger_before_they_are_returned(actor_system, tmp_path):
    actor_system.start_tree(tree())
    assert ask_authority(actor_system, "agent/grants", Decide(bash("git status"))).decision is Decision.ALLOW
    assert ask_authority(actor_system, "agent/grants", Decide(bash("git status && rm -rf /"))).decision is Decision.DENY
    assert ask_authority(actor_system, "agent/grants", Decide(bash("make"))).decision is Decision.ASK  # nothing matched
    entries = ask_authority(actor_system, "agent/ledger", ListEntries(kind="permission"))
    assert [e.cause.split(":")[0] for e in entries] == ["allow", "deny", "ask"]
    assert [e.status.value for e in entries] == ["ok", "denied", "denied"]

    assert ask_authority(actor_system, "agent/grants", SetPosture("s1", "plan")) == "plan"
    planned = ask_authority(actor_system, "agent/grants", Decide(bash("git status")))
    assert planned.decision is Decision.DENY and "plan mode" in planned.reason
    (tmp_path / "README.md").write_text("hello")
    read = Request(principal="s1", tool="Read", effect=Effect.READ, paths=(str(tmp_path / "README.md"),))
    kept = ask_authority(actor_system, "agent/grants", Decide(read, root=str(tmp_path)))
    assert kept.decision is Decision.ALLOW and kept.recorded  # plan mode keeps reads


def test_an_allow_that_cannot_be_recorded_is_answered_as_ask(actor_system):
    actor_system.start_tree(tree())
    reject = FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED)
    actor_system.arm_faults("agent/grants", FaultPlan((reject,)))
    verdict = ask_authority(actor_system, "agent/grants", Decide(bash("git status")))
    assert verdict.decision is Decision.ASK and verdict.reason.startswith("unrecordable")


def test_approvals_answered_by_a_verified_operator_once(actor_system):
    actor_system.start_tree(tree())
    call = ("Bash", {"command": "git push origin main"})
    approval = ask_authority(actor_system, "agent/grants", RequestApproval("s1", call[0], call[1], state_version=3))
    digest = digest_of(list(call))
    waited: list[object] = []
    address = actor_system.resolve("agent/grants")
    request = Stamped(actor_system.child_info("agent/grants").generation, WaitApproval(approval.approval_id))

    def wait() -> None:
        with actor_system._thespian.private() as endpoint:
            waited.append(endpoint.ask(address, request, 20))

    waiter = threading.Thread(target=wait)
    waiter.start()
    name, token = read_credentials(actor_system.data_dir)
    with pytest.raises(ApprovalRefused, match="credentials not verified"):  # a forged principal
        ask_authority(actor_system, "agent/grants",
                      AnswerApproval(approval.approval_id, True, name, "forged", digest, 3))
    with pytest.raises(ApprovalRefused, match="state version"):
        ask_authority(actor_system, "agent/grants", AnswerApproval(approval.approval_id, True, name, token, digest, 2))
    with pytest.raises(ApprovalRefused, match="arguments changed"):
        ask_authority(actor_system, "agent/grants",
                      AnswerApproval(approval.approval_id, True, name, token, "0" * 64, 3))
    answered = ask_authority(actor_system, "agent/grants",
                             AnswerApproval(approval.approval_id, True, name, token, digest, 3))
    assert answered.status == "approved" and answered.answered_by == name
    waiter.join(30)
    assert waited and waited[0].status == "approved"  # told only after the answer was durable
    with pytest.raises(ApprovalRefused, match=f"approved by {name} already"):  # an answer is final
        ask_authority(actor_system, "agent/grants", AnswerApproval(approval.approval_id, False, name, token, digest, 3))
    again = ask_authority(actor_system, "agent/grants",  # the same answer retried: done already, nothing recorded
                          AnswerApproval(approval.approval_id, True, name, token, digest, 3))
    assert (again.status, again.answered_by, again.answered_ns) == ("approved", name, answered.answered_ns)
    used = ask_authority(actor_system, "agent/grants", ConsumeApproval(approval.approval_id, "s1", digest, 3))
    assert used.status == "consumed"
    with pytest.raises(ApprovalRefused, match="already consumed"):
        ask_authority(actor_system, "agent/grants", ConsumeApproval(approval.approval_id, "s1", digest, 3))
    [record] = ask_authority(actor_system, "agent/grants", ListApprovals())
    assert len(record.refusals) == 5  # every refusal was recorded on the approval


def test_an_approval_is_refused_when_the_sessions_policy_changed_since_it_was_asked(actor_system):
    """Seed 001: reject or ask again when the permissions or policy changed while the session waited."""
    actor_system.start_tree(tree())
    call = ("Bash", {"command": "git push origin main"})
    digest = digest_of(list(call))
    name, token = read_credentials(actor_system.data_dir)

    def approve() -> str:
        approval = ask_authority(actor_system, "agent/grants", RequestApproval("s1", call[0], call[1], state_version=3))
        ask_authority(actor_system, "agent/grants", AnswerApproval(approval.approval_id, True, name, token, digest, 3))
        return approval.approval_id

    other_session = approve()
    ask_authority(actor_system, "agent/grants", AddRules("session", ("allow:Bash(make *)",), session_id="s2"))
    used = ask_authority(actor_system, "agent/grants", ConsumeApproval(other_session, "s1", digest, 3))
    assert used.status == "consumed"  # another session's rules are not this session's policy

    approval_id = approve()
    ask_authority(actor_system, "agent/grants", SetPosture("s1", "plan"))  # while the answer waited to be used
    with pytest.raises(ApprovalRefused, match="policy changed since the approval was asked"):
        ask_authority(actor_system, "agent/grants", ConsumeApproval(approval_id, "s1", digest, 3))
    [record] = [a for a in ask_authority(actor_system, "agent/grants", ListApprovals()) if a.approval_id == approval_id]
    assert record.status == "approved" and "policy changed" in record.refusals[-1]  # the refusal is recorded
    ask_authority(actor_system, "agent/grants", SetPosture("s1", "default"))  # the policy it was asked under again
    used = ask_authority(actor_system, "agent/grants", ConsumeApproval(approval_id, "s1", digest, 3))
    assert used.status == "consumed"

    approval_id = approve()
    ask_authority(actor_system, "agent/grants", AddRules("session", ("allow:Bash(make *)",), session_id="s1"))
    with pytest.raises(ApprovalRefused, match="policy changed"):
        ask_authority(actor_system, "agent/grants", ConsumeApproval(approval_id, "s1", digest, 3))


def test_queue_is_bounded_and_a_restart_denies_approvals_no_live_interaction_waits_for(actor_system):
    """Session s1 has no durable record: its waiters lived in memory and died with the authority."""
    actor_system.start_tree(tree())
    for i in range(8):
        ask_authority(actor_system, "agent/grants", RequestApproval("s1", "Bash", {"i": i}, state_version=1))
    with pytest.raises(ApprovalRefused, match="queue holds 8"):
        ask_authority(actor_system, "agent/grants", RequestApproval("s1", "Bash", {"i": 99}, state_version=1))
    mark = actor_system.mark()
    actor_system.kill("agent/grants")
    actor_system.wait_for("started", "agent/consumer", after=mark)
    after = ask_authority(actor_system, "agent/grants", ListApprovals())
    assert {a.status for a in after} == {"denied"}
    assert all("no live interaction" in a.reason and "no durable record" in a.reason for a in after)


def _sessions(data_dir, *records: SessionRecord) -> None:
    """Write coordinator session records into the node's environment (from this process, then closed)."""
    config = StorageConfig.under(data_dir)
    store = SessionStore(open_env(config))
    try:
        for record in records:
            assert isinstance(store.create(record), Committed)
    finally:
        close_env(config)


def _record(session_id: str, state: State, version: int, waits: tuple[PendingWait, ...] = ()) -> SessionRecord:
    return SessionRecord(session_id=session_id, node="n1", state=state, state_version=version, revision=0,
                         pinned=PinnedVersions(prompt="p", model="m", tools="t", workflow="w", policy="pol"),
                         principal="alice", tenant="t", channels=("cli",), waits=waits)


def test_a_restart_keeps_the_approvals_durable_sessions_still_wait_on(actor_system):
    """Seed 001: "An approval may arrive tomorrow… Workers restart… None of those events should force the user to
    restart the interaction." A coordinator-managed session waits durably (its record: waiting:approval at the
    version the approval was asked at, with a wait binding the call's digest); a grants restart keeps its approval
    pending, and the operator's answer after the restart is taken. The others are denied, each saying why."""
    actor_system.start_tree(tree())
    call = ("Bash", {"command": "git push origin main"})
    digest = digest_of(list(call))
    wait = PendingWait(kind="approval", wait_id=f"ask.v5.{digest[:16]}", issued_at_version=5,
                       proposal_digest=digest, call={"tool": call[0], "arguments": call[1], "call_id": "c1"})
    other = PendingWait(kind="approval", wait_id="ask.v5.other", issued_at_version=5, proposal_digest="0" * 64)
    _sessions(actor_system.data_dir,
              _record("live", State.WAITING_APPROVAL, 5, (wait,)),
              _record("moved", State.WAITING_APPROVAL, 6, (wait.model_copy(update={"issued_at_version": 6}),)),
              _record("elsewhere", State.WAITING_APPROVAL, 5, (other,)),
              _record("over", State.COMPLETED, 5),
              _record("running", State.RUNNING, 5))
    asked = {sid: ask_authority(actor_system, "agent/grants", RequestApproval(sid, call[0], call[1], state_version=5))
             for sid in ("live", "moved", "elsewhere", "over", "running", "bare")}

    mark = actor_system.mark()
    actor_system.kill("agent/grants")
    actor_system.wait_for("started", "agent/consumer", after=mark)
    after = {a.session_id: a for a in ask_authority(actor_system, "agent/grants", ListApprovals())}
    assert after["live"].status == "pending" and after["live"].approval_id == asked["live"].approval_id
    expected = {"moved": "waits at state version 6", "elsewhere": "waits on another call", "over": "is completed",
                "running": "not waiting on an approval", "bare": "no durable record"}
    for sid, why in expected.items():
        assert after[sid].status == "denied" and after[sid].answered_by == "authority", sid
        assert "no live interaction" in after[sid].reason and why in after[sid].reason, (sid, after[sid].reason)

    # a whole-node restart (storage's generation changes: rest_for_one restarts grants) keeps it too
    mark = actor_system.mark()
    actor_system.kill("agent/storage")
    actor_system.wait_for("started", "agent/consumer", after=mark)
    [kept] = ask_authority(actor_system, "agent/grants", ListApprovals(session_id="live"))
    assert kept.status == "pending"
    name, token = read_credentials(actor_system.data_dir)
    answered = ask_authority(actor_system, "agent/grants",
                             AnswerApproval(kept.approval_id, True, name, token, digest, 5))
    assert answered.status == "approved"  # the answer that arrived "tomorrow" is taken


def test_revoking_rules_changes_generation_and_restarts_consumers(actor_system):
    actor_system.start_tree(tree())
    consumer = actor_system.child_info("agent/consumer").pid
    old = actor_system.child_info("agent/grants").generation
    mark = actor_system.mark()
    assert ask_authority(actor_system, "agent/grants", RevokeRules("user", ("allow:Bash(git status)",))) == "revoked"
    actor_system.wait_for("started", "agent/consumer", after=mark)
    assert actor_system.child_info("agent/consumer").pid != consumer
    assert actor_system.child_info("agent/grants").generation > old
    assert ask_authority(actor_system, "agent/grants", Decide(bash("git status"))).decision is Decision.ASK  # rule gone


def test_rules_and_postures_only_for_a_session_id_and_no_control_characters_at_the_door(actor_system):
    # a session id no session can have was kept ("session/../x"); a rule with a control character was stored and
    # listed raw by `ouroactors grants list`: both refused now, nothing stored, and the "rules" read shows the rest
    actor_system.start_tree(tree())
    before = actor_system.ask("agent/grants", "rules")
    for bad in (AddRules("session", ("allow:Bash(make *)",), session_id="../x"),
                RevokeRules("session", ("allow:Bash(make *)",), session_id=" s1"), SetPosture("s1/..", "plan")):
        with pytest.raises(BadRequest, match="session_id"):
            ask_authority(actor_system, "agent/grants", bad)
    with pytest.raises(RuleError, match="control character"):
        ask_authority(actor_system, "agent/grants", AddRules("user", ("allow:Bash(make *)", "allow:Bash(ls \x1b[2J)")))
    assert actor_system.ask("agent/grants", "rules") == before
    # wrong types, None, over-long and too many: a typed refusal at the door, nothing stored, nothing restarted
    generation = actor_system.child_info("agent/grants").generation
    for bad in (AddRules(None, ("allow:Bash(make *)",)), AddRules("user", "allow:Bash(make *)"),  # type: ignore[arg-type]
                AddRules("user", ("allow:Bash(" + "m" * 2000 + ")",)),
                AddRules("user", tuple(f"allow:Bash(m{i} *)" for i in range(65))),
                AddRules("session", ("allow:Bash(make *)",), session_id=123),  # type: ignore[arg-type]
                AddRules("x" * 10_000, ("allow:Bash(make *)",)), SetPosture("s1", "x" * 100),
                SetPosture(None, "plan"), RevokeRules("user", (None,))):  # type: ignore[arg-type]
        with pytest.raises((BadRequest, RuleError, ValueError)):
            ask_authority(actor_system, "agent/grants", bad)
    for bad_scope in (AddRules("global", ("allow:Bash(make *)",)), SetPosture("s1", "yolo")):
        with pytest.raises(ValueError):  # not a scope, not a posture: named by the authority's enums
            ask_authority(actor_system, "agent/grants", bad_scope)
    assert actor_system.ask("agent/grants", "rules") == before
    assert actor_system.child_info("agent/grants").generation == generation
    assert ask_authority(actor_system, "agent/grants", AddRules("session", ("allow:Bash(make *)",), session_id="s1.a"))
    after = actor_system.ask("agent/grants", "rules")
    assert after["rules"]["session/s1.a"] == ["allow:Bash(make *)"]
    assert after["rules"]["node"] == before["rules"]["node"]


def test_an_effect_admitted_by_a_revoked_grants_generation_is_refused_by_the_ledger(actor_system):
    """Grants publishes its generation in LMDB; the ledger's start transaction checks the request's
    authority snapshot against it, through the ledger actor and a direct writer alike."""
    actor_system.start_tree(tree())
    old = actor_system.child_info("agent/grants").generation

    def effect(effect_id: str, grants: int | None) -> StartRequest:
        return StartRequest(effect_id=effect_id, kind="shell", idempotency_key=effect_id,
                            fingerprint=fingerprint("shell", {"id": effect_id}), principal="s1", session_id="s1",
                            turn_id=None, call_id=None, authority={} if grants is None else {"grants": grants},
                            grant="g", cause=None)

    assert ask_authority(actor_system, "agent/ledger", RecordStarted(effect("before", old))).answer == "created"
    mark = actor_system.mark()
    ask_authority(actor_system, "agent/grants", RevokeRules("user", ("allow:Bash(git status)",)))
    actor_system.wait_for("started", "agent/consumer", after=mark)  # adopted (published), consumers restarted
    new = actor_system.child_info("agent/grants").generation
    assert new != old

    with pytest.raises(StaleGeneration) as refused:  # the handle raises the errors it is answered
        ask_authority(actor_system, "agent/ledger", RecordStarted(effect("after", old)))
    assert (refused.value.authority, refused.value.expected, refused.value.got) == ("grants", new, old)
    with pytest.raises(StaleGeneration) as unnamed:  # leaving grants out of the snapshot is no way around it
        ask_authority(actor_system, "agent/ledger", RecordStarted(effect("unnamed", None)))
    assert (unnamed.value.authority, unnamed.value.expected, unnamed.value.got) == ("grants", new, None)
    writer = LedgerWriter(actor_system.context.data_dir, watch=False)
    try:
        assert isinstance(writer.record_started(effect("direct", old)), StaleGeneration)
        assert isinstance(writer.record_started(effect("direct", None)), StaleGeneration)
        assert writer.record_started(effect("direct", new)).answer == "created"
    finally:
        close_env(StorageConfig.under(actor_system.context.data_dir))
    assert ask_authority(actor_system, "agent/ledger", RecordStarted(effect("after", new))).answer == "created"
    ids = {entry.effect_id for entry in ask_authority(actor_system, "agent/ledger", ListEntries(kind="shell"))}
    assert ids == {"before", "after", "direct"}


def _plant(data_dir, records: dict[bytes, bytes]) -> None:
    """Write raw records into the grants database (from this process, then closed): what a bad disk leaves."""
    config = StorageConfig.under(data_dir)
    env = open_env(config)
    try:
        with env.begin(write=True) as txn:
            for key, value in records.items():
                txn.put(key, value, db=db(env, b"grants"))
    finally:
        close_env(config)


def _quarantined(data_dir) -> dict[bytes, bytes]:
    config = StorageConfig.under(data_dir)
    env = open_env(config)
    try:
        with env.begin() as txn:
            return {bytes(k): bytes(v) for k, v in txn.cursor(db=db(env, b"quarantine")) if k.startswith(b"grants/")}
    finally:
        close_env(config)


def _logged(data_dir, text: str, timeout_s: float = 10.0) -> str:
    """The line of the data dir's logs holding ``text`` (actors' records reach actors.log — or the detached admin's
    admin.out — through thespian's logger: polled with a deadline)."""
    deadline = time.monotonic() + timeout_s
    while True:
        lines = [line for name in ("actors.log", "admin.out") if (data_dir / name).exists()
                 for line in (data_dir / name).read_text(errors="replace").splitlines()]
        found = [line for line in lines if text in line]
        if found:
            return found[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not logged within {timeout_s}s ({len(lines)} lines)")
        time.sleep(0.05)  # polling a file another process writes, not synchronising on time


def _restart_grants(actor_system) -> None:
    mark = actor_system.mark()
    actor_system.kill("agent/grants")
    actor_system.wait_for("started", "agent/consumer", after=mark)


def test_a_corrupt_approval_is_quarantined_reported_and_not_approved_and_the_rest_loads(actor_system):
    """DESIGN.md "Bad input": a corrupt durable record fails closed, is quarantined and reported. It used to stop
    the whole tree with ``failed_to_start_child grants: crash(FormatError…)``, naming no key."""
    actor_system.start_tree(tree())
    good = ask_authority(actor_system, "agent/grants", RequestApproval("s1", "Bash", {"i": 1}, state_version=1))
    ask_authority(actor_system, "agent/grants", SetPosture("s2", "plan"))
    _plant(actor_system.data_dir, {b"approval/a1": GARBAGE})

    _restart_grants(actor_system)  # it boots; the tree goes on
    status = ask_authority(actor_system, "agent/grants", "status")
    assert set(status["quarantined"]) == {"approval/a1"} and "not msgpack" in status["quarantined"]["approval/a1"]
    assert status["postures"] == {"s2": "plan"}  # the rest loaded
    listed = ask_authority(actor_system, "agent/grants", ListApprovals())
    assert [a.approval_id for a in listed] == [good.approval_id]  # a1 is not in the pending set
    name, token = read_credentials(actor_system.data_dir)
    for refused in (WaitApproval("a1"), ConsumeApproval("a1", "s1", "0" * 64, 1),
                    AnswerApproval("a1", True, name, token, "0" * 64, 1)):
        with pytest.raises(ApprovalRefused, match=r"'a1' is corrupt .*not approved"):
            ask_authority(actor_system, "agent/grants", refused)
    assert _quarantined(actor_system.data_dir) == {b"grants/approval/a1": GARBAGE}  # the evidence, under its key
    reported = _logged(actor_system.data_dir, "grants database, key b'approval/a1'")  # reported: db and key named
    assert "not msgpack" in reported and "quarantined" in reported

    _restart_grants(actor_system)  # still there, still failing closed: a restart does not lose it nor loop
    assert set(ask_authority(actor_system, "agent/grants", "status")["quarantined"]) == {"approval/a1"}


def test_a_corrupt_stored_rule_or_posture_never_allows_and_is_not_silently_replaced(actor_system):
    actor_system.start_tree(tree())
    assert ask_authority(actor_system, "agent/grants", Decide(bash("git status", "s1"))).decision is Decision.ALLOW
    _plant(actor_system.data_dir, {b"rules/user": GARBAGE, b"posture/s3": msgpack.packb("anything"),
                                   b"rules/session/s4": msgpack.packb("allow:Bash(*)")})
    _restart_grants(actor_system)
    status = ask_authority(actor_system, "agent/grants", "status")
    assert set(status["quarantined"]) == {"rules/user", "posture/s3", "rules/session/s4"}

    # rules/user applies to every session: what it held is unknown, so every decision asks (never allow) …
    verdict = ask_authority(actor_system, "agent/grants", Decide(bash("git status", "s1")))
    assert verdict.decision is Decision.ASK and "grants/rules/user" in verdict.reason
    # … but node rules never came from the database: nothing here widens (a deny could have been lost: ask)
    denied = ask_authority(actor_system, "agent/grants", Decide(bash("rm -rf /", "s1")))
    assert denied.decision is not Decision.ALLOW
    # merging into it would silently drop what it held: refused, naming the record
    with pytest.raises(CorruptRecord, match="grants/rules/user"):
        ask_authority(actor_system, "agent/grants", AddRules("user", ("allow:Bash(ls)",)))
    with pytest.raises(CorruptRecord, match="grants/rules/session/s4"):
        ask_authority(actor_system, "agent/grants", RevokeRules("session", ("allow:Bash(*)",), session_id="s4"))
    # an approval can still be asked and answered under it (asking is how a human decides now)
    asked = ask_authority(actor_system, "agent/grants", RequestApproval("s1", "Bash", {"c": 1}, state_version=1))
    assert asked.pending

    # a corrupt posture: that session's decisions ask, until an operator sets its posture again (set in full)
    s3 = ask_authority(actor_system, "agent/grants", Decide(bash("git status", "s3")))
    assert s3.decision is Decision.ASK and "grants/posture/s3" in s3.reason
    assert ask_authority(actor_system, "agent/grants", SetPosture("s3", "plan")) == "plan"
    assert "posture/s3" not in ask_authority(actor_system, "agent/grants", "status")["quarantined"]
    assert set(_quarantined(actor_system.data_dir)) == {b"grants/rules/user", b"grants/posture/s3",
                                                        b"grants/rules/session/s4"}  # the copy stays


def test_a_review_denies_nothing_of_a_session_with_no_durable_record(actor_system):
    """A review judges only sessions a coordinator manages: an approval of a session with no record has a waiter in
    memory (a bare runtime), alive while its process is, so it stays pending (a restart would deny it)."""
    from ouroactors.authorities.grants.actor import ReviewApprovals

    actor_system.start_tree(tree())
    approval = ask_authority(actor_system, "agent/grants", RequestApproval("bare", "Bash", {"c": 1}, state_version=1))
    assert ask_authority(actor_system, "agent/grants", ReviewApprovals("bare")) == []
    [still] = ask_authority(actor_system, "agent/grants", ListApprovals())
    assert (still.approval_id, still.status) == (approval.approval_id, "pending")

