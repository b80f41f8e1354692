"""Worktree ownership and corrupt workspace records: the pure decisions, exhaustively and by property."""

from __future__ import annotations

import os
import pickle
from dataclasses import asdict, replace
from pathlib import Path

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.authorities.workspace import worktrees as wt
from ouroactors.authorities.workspace.leases import Lease, LeaseTable
from ouroactors.authorities.workspace.paths import overlaps
from ouroactors.authorities.workspace.worktree_owners import (
    CorruptRecordHolds,
    NotWorktreeOwner,
    Quarantined,
    WorktreeHeld,
    WorktreeRecord,
    check_admission,
    decide_cleanup,
    decide_create,
    decode_entry,
    worktree_key,
    worktree_record,
)

TREE = "/w/repo.worktrees/s1"
RECORD = WorktreeRecord(path=TREE, repo="/w/repo", session_id="s1", branch="ouroactors/s1", created_ns=1)


def lease(root: str, session: str = "s1", mode: str = "exclusive", status: str = "active", n: int = 1) -> Lease:
    return Lease(f"lease-{n:016x}", root, mode, session, "owner", n, 0, "ab" * 32, status)  # type: ignore[arg-type]


# Leases placed around the worktree: on it, inside it, on an ancestor, beside it (no overlap), a reservation.
LEASE_SETS: dict[str, list[Lease]] = {
    "none": [],
    "own on it": [lease(TREE)],
    "other inside": [lease(TREE + "/src", "s2", "shared_read")],
    "other on ancestor": [lease("/w", "s2", "shared_read")],
    "beside": [lease("/w/repo.worktrees/s10", "s2")],
    "reserved on it": [lease(TREE, "s1", status="reserved")],
}
QUARANTINE_SETS: dict[str, list[Quarantined]] = {
    "none": [],
    "unknown root": [Quarantined("lease/x", "not msgpack")],
    "root elsewhere": [Quarantined("lease/x", "bad", root="/elsewhere")],
    "root on ancestor": [Quarantined("lease/x", "bad", root="/w/repo.worktrees")],
    "worktree record": [Quarantined(worktree_key("/w/other").decode(), "bad", holds_leases=False)],
}


def overlapping(leases: list[Lease], quarantined: list[Quarantined], path: str, but: str | None = None) -> bool:
    return (any(overlaps(x.root, path) and x.session_id != but for x in leases)
            or any(q.holds_leases and (q.root is None or overlaps(q.root, path)) for q in quarantined))


@pytest.mark.parametrize("record", [None, RECORD], ids=["no record", "owned by s1"])
@pytest.mark.parametrize("session", [None, "s1", "s2"])
@pytest.mark.parametrize("operator", [None, "op"])
@pytest.mark.parametrize("leases", LEASE_SETS, ids=str)
@pytest.mark.parametrize("quarantined", QUARANTINE_SETS, ids=str)
def test_cleanup_decision_table(record, session, operator, leases, quarantined):
    live, bad = LEASE_SETS[leases], QUARANTINE_SETS[quarantined]
    authorised = operator is not None or (record is not None and session == record.session_id)
    held = overlapping(live, bad, TREE)
    try:
        who = decide_cleanup(TREE, record, session_id=session, operator=operator, live=live, quarantined=bad)
    except NotWorktreeOwner as exc:
        assert not authorised
        assert (record is None and "no recorded owner" in str(exc)) or "'s1'" in str(exc)
        return
    except WorktreeHeld as exc:
        assert authorised and held  # who is checked first: a stranger learns nothing about holders
        assert all(x.lease_id in str(exc) and repr(x.session_id) in str(exc) for x in exc.holders)
        assert len(exc.holders) + len(exc.quarantined) >= 1
        return
    assert authorised and not held
    assert who == (f"operator:{operator}" if operator else f"session:{session}")


@pytest.mark.parametrize("record", [None, RECORD, replace(RECORD, session_id="s2")], ids=["none", "s1", "s2"])
@pytest.mark.parametrize("leases", LEASE_SETS, ids=str)
@pytest.mark.parametrize("quarantined", [*QUARANTINE_SETS, "its own record"], ids=str)
def test_create_decision_table(record, leases, quarantined):
    live = LEASE_SETS[leases]
    bad = ([Quarantined(worktree_key(TREE).decode(), "bad", holds_leases=False)] if quarantined == "its own record"
           else QUARANTINE_SETS[quarantined])
    expected_owner_ok = quarantined != "its own record" and (record is None or record.session_id == "s1")
    held = overlapping(live, bad, TREE, but="s1")  # its own session's leases do not stop it
    try:
        decide_create(TREE, "s1", record, live=live, quarantined=bad)
    except NotWorktreeOwner:
        assert not expected_owner_ok
        return
    except WorktreeHeld:
        assert expected_owner_ok and held
        return
    assert expected_owner_ok and not held


canonical = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3).map(lambda p: "/" + "/".join(p))


@given(root=canonical, quarantined=st.lists(st.builds(
    Quarantined, key=st.just("lease/x"), detail=st.just("bad"), root=st.none() | canonical,
    holds_leases=st.booleans()), max_size=3))
def test_admission_is_refused_exactly_when_a_quarantined_lease_may_hold_the_root(root, quarantined):
    may_hold = [q for q in quarantined if q.holds_leases and (q.root is None or overlaps(q.root, root))]
    if may_hold:
        with pytest.raises(CorruptRecordHolds) as caught:
            check_admission(root, quarantined)
        assert "workspace/lease/x" in str(caught.value) and root in str(caught.value)
    else:
        check_admission(root, quarantined)


# -- decoding ----------------------------------------------------------------------------------------


def test_decode_entry_reads_good_records_and_quarantines_the_rest():
    good = lease("/p")
    assert decode_entry(b"lease/" + good.lease_id.encode(), msgpack.packb(asdict(good))) == good
    assert decode_entry(worktree_key(TREE), msgpack.packb(worktree_record(RECORD))) == RECORD

    garbage = decode_entry(b"lease/l1", b"\xc1\xc1garbage")
    assert isinstance(garbage, Quarantined) and garbage.where == "workspace/lease/l1"
    assert garbage.root is None and garbage.holds_leases and "FormatError" in garbage.detail

    partial = decode_entry(b"lease/l2", msgpack.packb({"root": "/p", "mode": "exclusive"}))  # fields missing
    assert isinstance(partial, Quarantined) and partial.root == "/p"
    for broken in ({**asdict(good), "mode": "weird"}, {**asdict(good), "fencing_token": -1},
                   {**asdict(good), "lease_id": "lease-other"}, {**asdict(good), "extra": 1}):
        entry = decode_entry(b"lease/" + good.lease_id.encode(), msgpack.packb(broken))
        assert isinstance(entry, Quarantined) and entry.root == "/p", broken
    bad_root = decode_entry(b"lease/" + good.lease_id.encode(), msgpack.packb({**asdict(good), "root": "p/../x"}))
    assert isinstance(bad_root, Quarantined) and bad_root.root is None  # an unreadable root holds everything

    tree = decode_entry(worktree_key(TREE), b"\xc1")
    assert isinstance(tree, Quarantined) and not tree.holds_leases  # an owner lost, no root held
    unknown = decode_entry(b"future/x", msgpack.packb({"root": "/p"}))
    assert isinstance(unknown, Quarantined) and unknown.root is None and unknown.holds_leases


@given(key=st.sampled_from([b"lease/lease-0000000000000001", b"worktree/x", b"other"]),
       raw=st.binary(max_size=64) | st.dictionaries(st.sampled_from(sorted(asdict(lease("/p")))),
                                                   st.none() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5)
                                                   | st.sampled_from(["/p", "exclusive", "active"]),
                                                   max_size=12).map(msgpack.packb))
def test_decode_entry_never_raises_and_what_it_accepts_loads(key, raw):
    entry = decode_entry(key, raw)
    if isinstance(entry, Lease):
        LeaseTable(next_token=entry.fencing_token + 1, leases=[entry] if entry.live else [],
                   tombstones=[] if entry.live else [entry])
    else:
        assert isinstance(entry, Quarantined | WorktreeRecord)


def test_the_errors_cross_processes():
    for exc in (NotWorktreeOwner(TREE, "s1", "s2"), WorktreeHeld(TREE, [lease(TREE)], ["workspace/lease/x"]),
                CorruptRecordHolds("workspace/lease/x", None, "/p", "bad")):
        again = pickle.loads(pickle.dumps(exc))
        assert type(again) is type(exc) and str(again) == str(exc)


# -- plan: the path create will use, known before git runs -------------------------------------------


@pytest.mark.skipif(not wt.git_available(), reason="git is not installed")
def test_plan_names_the_path_create_then_uses(tmp_path: Path):
    repo = Path(os.path.realpath(tmp_path)) / "repo"
    repo.mkdir()
    wt.git(str(repo), "init", "-q", "-b", "main")
    wt.git(str(repo), "commit", "-q", "--allow-empty", "-m", "initial")
    for root_dir, session in ((None, "s1"), (None, "s2"), (str(tmp_path / "trees"), "s3")):
        top, path = wt.plan(str(repo), session, root_dir=root_dir)
        assert top == str(repo) and not os.path.exists(path)
        assert wt.create(str(repo), session, root_dir=root_dir).path == path
    with pytest.raises(wt.UnsafeSessionId):
        wt.plan(str(repo), "../x")
