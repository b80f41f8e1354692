"""One bad message must not take the tree down (issue 12 §3): the cases found, as plain tests.

Each request below crashed an authority before the door checks (and four ``Decide(None)`` within
five seconds ended the whole agent tree). Now each is answered with a typed refusal naming the
field, the authority keeps its generation and nothing restarts.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.actor import Decide, ListApprovals, RequestApproval, SetPosture
from ouroactors.authorities.grants.rules import Effect, Request
from ouroactors.authorities.ledger.actor import (
    ListEntries,
    Reconcile,
    ReconcilerKinds,
    RecordBatch,
    RecordSettled,
    SessionReconciled,
)
from ouroactors.authorities.storage.actor import Backup
from ouroactors.authorities.workspace.actor import Acquire, Reclaim
from ouroactors.core.errors import BadRequest, StaleGeneration, StampRequired

pytestmark = pytest.mark.multiproc

AGENT = Path(__file__).resolve().parents[2] / "supervision_trees" / "agent.toml"
AUTHORITIES = ("agent/storage", "agent/ledger", "agent/grants", "agent/workspace")


def snapshot(system) -> dict[str, tuple[int | None, int, int | None]]:
    """Generation, restart count and pid of every authority: a crash changes all three."""
    out = {}
    for path in AUTHORITIES:
        info = system.child_info(path)
        out[path] = (info.generation, info.restarts, info.pid)
    return out


@pytest.fixture
def agent(tree_system):
    return tree_system(AGENT)


def refused(system, path: str, message: object) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        ask_authority(system, path, message)
    return caught.value


@pytest.mark.parametrize("timeout_s", [1e12, math.inf, math.nan, -1.0, 0.0, "300", None])
def test_request_approval_with_an_unbounded_timeout_is_refused(agent, timeout_s):
    before = snapshot(agent)
    bad = refused(agent, "agent/grants", RequestApproval("s1", "Bash", {"command": "ls"}, 1, timeout_s=timeout_s))
    assert bad.message == "RequestApproval" and bad.field == "timeout_s"
    assert ask_authority(agent, "agent/grants", ListApprovals()) == []
    assert snapshot(agent) == before


def test_a_state_version_beyond_64_bits_is_refused(agent):
    before = snapshot(agent)
    bad = refused(agent, "agent/grants", RequestApproval("s1", "Bash", {}, 2**70))
    assert bad.field == "state_version"
    assert snapshot(agent) == before


def test_a_session_id_longer_than_a_key_is_refused(agent):
    before = snapshot(agent)
    assert refused(agent, "agent/grants", SetPosture("s" * 600, "plan")).field == "session_id"
    assert refused(agent, "agent/grants", SetPosture("é" * 150, "plan")).field == "session_id"  # 300 bytes
    assert refused(agent, "agent/grants", SetPosture("s1\udcff", "plan")).field == "session_id"
    assert agent.ask("agent/grants", "status")["postures"] == {}
    assert snapshot(agent) == before


def test_decide_none_four_times_leaves_the_tree_standing(agent):
    before = snapshot(agent)
    for _ in range(4):
        assert refused(agent, "agent/grants", Decide(None)).field == "request"  # type: ignore[arg-type]
    junk = Request.__new__(Request)  # as unpickled from another process: __post_init__ never ran
    object.__setattr__(junk, "__dict__", {"principal": None, "tool": 5, "effect": "x", "paths": "/etc"})
    assert refused(agent, "agent/grants", Decide(junk)).field.startswith("request.")
    assert snapshot(agent) == before
    ok = Request(principal="s1", tool="Read", effect=Effect.READ, paths=("/repo/README.md",))
    assert ask_authority(agent, "agent/grants", Decide(ok)).recorded  # still serving, still recording


def test_ledger_settlement_with_no_effect_id_is_refused(agent):
    before = snapshot(agent)
    assert refused(agent, "agent/ledger", RecordSettled(None, "ok")).field == "effect_id"  # type: ignore[arg-type]
    assert refused(agent, "agent/ledger", RecordSettled("e" * 600, "ok")).field == "effect_id"
    assert refused(agent, "agent/ledger", RecordSettled("e1", "ok", evidence={"x": math.nan})).field.startswith(
        "evidence")
    assert refused(agent, "agent/ledger", RecordBatch(("junk",))).field == "items[0]"  # type: ignore[arg-type]
    assert refused(agent, "agent/ledger", ListEntries(since_seq=2**70)).field == "since_seq"
    assert snapshot(agent) == before


def test_reconciling_a_session_checks_its_name_and_changes_nothing_of_another(agent):
    """The recovery requests (Reconcile for one session, ReconcilerKinds) at the ledger's door: a bad session name is
    refused by name; a well-formed one for a session with nothing unsettled settles nothing and says so."""
    before = snapshot(agent)
    assert refused(agent, "agent/ledger", Reconcile(123)).field == "session"  # type: ignore[arg-type]
    assert refused(agent, "agent/ledger", Reconcile("s" * 600)).field == "session"
    assert refused(agent, "agent/ledger", Reconcile("bad\x00name")).field == "session"
    assert ask_authority(agent, "agent/ledger", Reconcile("nobody")) == SessionReconciled(0, ())
    assert "read" in ask_authority(agent, "agent/ledger", ReconcilerKinds())  # every ledger reconciles reads
    assert snapshot(agent) == before


def test_workspace_reclaim_without_a_capability_is_refused(agent):
    before = snapshot(agent)
    assert refused(agent, "agent/workspace", Reclaim("s1", "/tmp", "exclusive", None)).field == "capability"  # type: ignore[arg-type]
    assert refused(agent, "agent/workspace", Acquire(None, "exclusive", "s1")).field == "root"  # type: ignore[arg-type]
    assert refused(agent, "agent/workspace", Acquire("/tmp", "exclusive", "s1", owner="me")).field == "owner"
    assert snapshot(agent) == before


def test_storage_backup_target_is_checked(agent):
    before = snapshot(agent)
    assert refused(agent, "agent/storage", Backup("relative/dir")).field == "target"
    assert refused(agent, "agent/storage", Backup(None)).field == "target"  # type: ignore[arg-type]
    assert snapshot(agent) == before


def test_unstamped_requests_are_refused_with_a_typed_error(agent):
    before = snapshot(agent)
    ok = Request(principal="s1", tool="Read", effect=Effect.READ, paths=("/repo/README.md",))
    for path, message in (("agent/grants", Decide(ok)), ("agent/grants", SetPosture("s1", "plan")),
                          ("agent/ledger", RecordSettled("e1", "ok")),
                          ("agent/workspace", Acquire("/tmp", "exclusive", "s1")),
                          ("agent/storage", Backup("/tmp/nowhere"))):
        with pytest.raises(StampRequired) as caught:
            agent.ask(path, message)
        assert isinstance(caught.value, StaleGeneration) and caught.value.expected == before[path][0]
    # through a ref too: a ref's messages are addressed to the incarnation it names (a dead one's port reused),
    # which is no authority stamp — fencing stays the sender's to state
    for path, message in (("agent/grants", Decide(ok)), ("agent/ledger", RecordSettled("e1", "ok"))):
        with pytest.raises(StampRequired):
            agent.ref(path).ask(message)
    assert agent.ask("agent/grants", "status")["postures"] == {}
    assert ask_authority(agent, "agent/ledger", ListEntries()) == []  # nothing was decided, nothing recorded
    assert agent.ask("agent/ledger", ListEntries()) == []  # reads may come unstamped
    assert snapshot(agent) == before


def test_without_the_door_the_unbounded_numbers_crash_the_authority(actor_system):
    """The attack against authorities whose door is removed: what the door alone prevents, and what
    the handlers' own hardening (LMDB size errors and codec errors as refusals) catches anyway."""
    from ouroactors import supervisor, worker
    from ouroactors.authorities.ledger.domain import LedgerError
    from ouroactors.core.errors import ActorCrashed, CommitRejected

    actor_system.start_tree(supervisor("agent", strategy="rest_for_one", intensity=20, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "tests.security.message_door_support:DoorlessLedger"),
        worker("grants", "tests.security.message_door_support:DoorlessGrants"),
    ]))
    for message in (RequestApproval("s1", "Bash", {}, 1, timeout_s=math.inf),
                    RequestApproval("s1", "Bash", {}, 2**70)):
        mark = actor_system.mark()
        with pytest.raises(ActorCrashed):
            actor_system.ask("agent/grants", message, timeout=10.0)
        actor_system.wait_for("started", "agent/grants", after=mark, timeout=20.0)
    with pytest.raises(CommitRejected, match="BadValsizeError"):  # a 600-byte key: refused by the commit
        actor_system.ask("agent/grants", SetPosture("s" * 600, "plan"))
    with pytest.raises(LedgerError, match="key must be a str"):  # the codec refuses a None key
        actor_system.ask("agent/ledger", RecordSettled(None, "ok"))  # type: ignore[arg-type]


def test_a_batch_cannot_carry_a_settlement_claiming_an_operator(agent):
    """Sent alone, ``RecordSettled(by="operator:…")`` is refused (operator settlements are verified: OperatorSettle);
    inside a ``RecordBatch`` the nested record's own check did not run, and the forged settlement was recorded."""
    from ouroactors.authorities.ledger.domain import StartRequest, fingerprint
    from ouroactors.authorities.ledger.messages import RecordStarted

    before = snapshot(agent)
    start = StartRequest(effect_id="forged-1", kind="tool_call", idempotency_key="forged-1",
                         fingerprint=fingerprint("tool_call", {}), principal="s1", session_id="s1")
    settle = RecordSettled("forged-1", "ok", by="operator:alice")
    assert refused(agent, "agent/ledger", settle).field == "by"
    bad = refused(agent, "agent/ledger", RecordBatch((RecordStarted(start), settle)))
    assert (bad.message, bad.field) == ("RecordBatch", "items[1].by"), bad
    assert ask_authority(agent, "agent/ledger", ListEntries()) == []  # the batch is refused whole
    assert snapshot(agent) == before
