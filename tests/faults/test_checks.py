"""Each invariant checker on hand-made data: a clean observation passes, each break is named."""

from __future__ import annotations

from typing import Any

import pytest

from ouroactors.authorities.ledger.domain import RESTARTED_BEFORE_SETTLEMENT, Entry, Status
from ouroactors.authorities.workspace.leases import Lease
from ouroactors.faults.checks import (
    CHECKS,
    Observation,
    ambiguous_not_failed,
    check_all,
    double_settlement,
    effect_without_start,
    generation_windows,
    outcome_diverged,
    overlapping_leases,
    reconciled_matches,
    record_lost,
    stale_generation,
)
from ouroactors.faults.workload import DriverRecord, EffectRecord, LeaseRecord
from ouroactors.supervision.events import Event

LEDGER = "agent/ledger"
GEN = 7


def entry(n: int, status: str = "ok", *, kind: str = "http_request", seq: int | None = None, started_ns: int = 100,
          settled_by: str | None = "runner", reason: str | None = None, evidence: dict[str, Any] | None = None,
          stamp: int | None = GEN, grant: bool = False) -> Entry:
    effect_id = f"r/s0/e{n}" + ("/grant" if grant else "")
    key = f"r/s0/k{n}" + ("/grant" if grant else "")
    return Entry(seq=seq if seq is not None else 2 * n + (1 if grant else 2), effect_id=effect_id,
                 kind="permission" if grant else kind, idempotency_key=key, fingerprint="0" * 64, principal="t",
                 session_id="r/s0", turn_id=None, call_id=None,
                 authority={"ledger": stamp} if stamp is not None else {}, grant=None, cause=None,
                 status=Status(status), node="n", started_ns=started_ns,
                 settled_ns=None if status == "started" else started_ns + 1, reason=reason,
                 evidence=evidence, settled_by=None if status in ("started", "ambiguous", "denied") else settled_by)


def delivered(n: int, t_ns: int = 200, count: int = 1) -> list[dict[str, Any]]:
    return [{"key": f"r/s0/k{n}", "event": "delivered", "created": i == 0, "n": i + 1, "t_ns": t_ns + i}
            for i in range(count)]


def refused(n: int) -> dict[str, Any]:
    return {"key": f"r/s0/k{n}", "event": "refused", "created": False, "n": 0, "t_ns": 200}


def record(n: int, expected: str = "ok", **fields: Any) -> EffectRecord:
    base: dict[str, Any] = {"start_answers": ["created:started"], "start_committed": True, "start_seq": 2 * n + 2,
                            "start_generation": GEN, "effect_called": expected != "denied",
                            "settle_answers": ["created:ok"], "settled": expected if expected != "denied" else None,
                            "settle_created": 0 if expected == "denied" else 1,
                            "outcome": f"settled-{expected}" if expected != "denied" else "denied"}
    base.update(fields)
    return EffectRecord(f"r/s0/e{n}", f"r/s0/k{n}", "r/s0", expected, **base)


def started_event(generation: int, t: int, path: str = LEDGER) -> Event:
    return Event("started", path, "agent", "ledger", t, 1, "n", {"generation": generation})


def exited_event(generation: int, t: int, path: str = LEDGER) -> Event:
    return Event("exited", path, "agent", "ledger", t, 1, "n", {"generation": generation, "reason": {"kind": "killed"}})


def lease(lease_id: str, root: str, mode: str = "exclusive", status: str = "active", session: str = "r/s0") -> Lease:
    return Lease(lease_id, root, mode, session, "owner", 1, 0, "0" * 64, status)  # type: ignore[arg-type]


def clean() -> Observation:
    """Four effects: ok, failed (refused by the world), denied, ambiguous (after a crash), all honest."""
    entries = [
        entry(0, grant=True), entry(0, evidence={"world": {"created": True}}),
        entry(1, grant=True), entry(1, "failed", reason="refused by the world"),
        entry(2, grant=True), entry(2, "denied", reason="denied"),
        entry(3, grant=True), entry(3, "ambiguous", reason=RESTARTED_BEFORE_SETTLEMENT),
    ]
    driver = DriverRecord("r")
    driver.effects = {r.effect_id: r for r in [
        record(0), record(1, "failed"), record(2, "denied"),
        record(3, settle_answers=[], settled=None, settle_created=0, outcome="left-started"),
    ]}
    driver.leases = {"r/s0": LeaseRecord("r/s0", "/w/a", "exclusive", grants=[("L1", 1, 0)], released=True,
                                         outcome="released")}
    return Observation(
        run_id="r", entries=entries, first_seq=1, world_log=[*delivered(0), refused(1), *delivered(3)],
        leases=[lease("L9", "/w/other")], lease_snapshots=[[lease("L1", "/w/a"), lease("L2", "/w/b")]],
        events=[started_event(GEN, 50)], driver=driver, ledger_path=LEDGER,
    )


def test_a_clean_observation_passes_every_checker():
    obs = clean()
    for name, checker in CHECKS.items():
        assert checker(obs) == [], name
    assert check_all(obs) == []


def test_unknown_check_name_is_an_error():
    with pytest.raises(ValueError, match="unknown check 'nope'; known checks: effect-without-start"):
        check_all(clean(), ["nope"])


def driver(obs: Observation) -> DriverRecord:
    assert obs.driver is not None
    return obs.driver


def names(violations: list[Any]) -> list[tuple[str, str]]:
    return [(v.invariant, v.subject) for v in violations]


# -- 1. effect without a committed start -------------------------------------------------------------------


def test_effect_without_start():
    obs = clean()
    obs.world_log += delivered(9)  # the world saw a key the ledger never recorded
    found = effect_without_start(obs)
    assert names(found) == [("effect-without-start", "r/s0/k9")]
    assert "no committed start" in found[0].message

    obs = clean()
    obs.world_log += delivered(2)  # a denied effect ran
    assert names(effect_without_start(obs)) == [("effect-without-start", "r/s0/e2")]

    obs = clean()
    obs.entries[1] = entry(0, started_ns=500)  # recorded after the world saw it
    assert "after the world saw the effect" in effect_without_start(obs)[0].message

    obs = clean()
    driver(obs).effects["r/s0/e0"].start_committed = False  # the driver ran it without a committed answer
    assert names(effect_without_start(obs)) == [("effect-without-start", "r/s0/e0")]


# -- 2. double settlement, duplicates ----------------------------------------------------------------------


def test_double_settlement():
    obs = clean()
    obs.world_log = [*delivered(0, count=2), refused(1), *delivered(3)]
    assert "reached the world 2 times" in double_settlement(obs)[0].message

    obs = clean()
    driver(obs).effects["r/s0/e0"].settle_created = 2
    assert names(double_settlement(obs)) == [("double-settlement", "r/s0/e0")]

    obs = clean()
    obs.entries[1] = entry(0, settled_by="reconciler:http_request", evidence={"key": "r/s0/k0", "deliveries": 1})
    assert "settlement by reconciler:http_request" in double_settlement(obs)[0].message


# -- 2. unsettled -> ambiguous, never failed ---------------------------------------------------------------


def test_ambiguous_not_failed():
    obs = clean()
    obs.entries[7] = entry(3, "started")  # recovery left it started
    assert "still 'started' after recovery" in ambiguous_not_failed(obs)[0].message
    obs.recovered = False
    assert ambiguous_not_failed(obs) == []  # before recovery, started is legitimate

    obs = clean()
    obs.entries[7] = entry(3, "failed", settled_by=None, reason=RESTARTED_BEFORE_SETTLEMENT)
    assert "turned into 'failed' by recovery" in ambiguous_not_failed(obs)[0].message

    obs = clean()
    obs.entries[7] = entry(3, "failed", settled_by="reconciler:http_request", reason="reconciled")
    assert "but the world saw the effect 1 time(s)" in ambiguous_not_failed(obs)[0].message

    obs = clean()
    obs.world_log = [*delivered(0), *delivered(3)]  # no refusal of k1 in the world
    assert "without a refusal from the world" in ambiguous_not_failed(obs)[0].message


# -- reconciled entries match the world ---------------------------------------------------------------------


def test_reconciled_matches():
    obs = clean()
    obs.world_log = [refused(1), *delivered(3)]  # ok, but the world never saw k0
    assert "the world never saw the key" in reconciled_matches(obs)[0].message

    obs = clean()
    obs.entries[7] = entry(3, settled_by="reconciler:http_request", evidence={"key": "r/s0/k0", "deliveries": 1})
    assert "evidence for another key" in reconciled_matches(obs)[0].message

    obs = clean()
    obs.entries[7] = entry(3, settled_by="reconciler:http_request", evidence={"key": "r/s0/k3", "deliveries": 3})
    assert "the world logged 1" in reconciled_matches(obs)[0].message

    obs = clean()
    obs.entries[7] = entry(3, settled_by="reconciler:http_request", evidence={"key": "r/s0/k3", "deliveries": 1})
    assert reconciled_matches(obs) == []


# -- 5. leases -----------------------------------------------------------------------------------------------


def test_overlapping_leases():
    obs = clean()
    obs.lease_snapshots.append([lease("L1", "/w/a"), lease("L3", "/w/a/inner", status="reserved", session="r/s1")])
    obs.leases = [lease("L1", "/w/a"), lease("L3", "/w/a/inner", status="reserved", session="r/s1")]
    found = overlapping_leases(obs)
    assert names(found) == [("overlapping-leases", "L1 & L3")]  # reported once, not per table

    obs = clean()
    obs.leases = [lease("L1", "/w/a", "shared_read"), lease("L2", "/w/a", "shared_read")]
    assert overlapping_leases(obs) == []  # both shared_read: allowed
    obs.leases = [lease("L1", "/w/ab"), lease("L2", "/w/a")]
    assert overlapping_leases(obs) == []  # /w/ab is not under /w/a


# -- 6. stale generations -----------------------------------------------------------------------------------


def test_stale_generation():
    obs = clean()
    obs.entries[1] = entry(0, stamp=99)
    assert "never had" in stale_generation(obs)[0].message

    obs = clean()
    obs.events = [started_event(GEN, 10), exited_event(GEN, 90), started_event(8, 95)]
    found = stale_generation(obs)  # every entry was recorded at 100, after generation 7 was gone
    assert found and all("after ledger generation 7" in v.message for v in found)

    obs = clean()
    obs.events = [started_event(GEN, 10), exited_event(GEN, 300), started_event(8, 301)]
    obs.entries[1] = entry(0, stamp=8)  # seq 2 stamped 8; seq 3 (e1's permission) stamped 7 after it
    found = stale_generation(obs)
    assert names(found)[0] == ("stale-generation", "r/s0/e1/grant")
    assert "an older generation acted after a newer one" in found[0].message


def test_generation_windows_follow_changes_without_crash():
    events = [started_event(1, 10), Event("generation_changed", LEDGER, "agent", "ledger", 20, 1, "n",
                                          {"generation": 2, "previous": 1}), exited_event(2, 30)]
    windows = generation_windows(events, LEDGER)
    assert (windows[1].start_ns, windows[1].end_ns) == (10, 20)
    assert (windows[2].start_ns, windows[2].end_ns) == (20, 30)


# -- committed records lost -----------------------------------------------------------------------------------


def test_record_lost():
    obs = clean()
    del obs.entries[3]  # seq 4 (e1) gone
    found = names(record_lost(obs))
    assert ("record-lost", "ledger") in found and ("record-lost", "r/s0/e1") in found

    obs = clean()
    driver(obs).effects["r/s0/e0"].start_seq = 40
    assert "answered with seq 40" in record_lost(obs)[0].message

    obs = clean()
    del obs.entries[0]  # the permission committed with e0's start
    obs.first_seq = 2
    assert names(record_lost(obs)) == [("record-lost", "r/s0/e0/grant")]

    obs = clean()
    obs.entries[7] = entry(3, "ambiguous")
    driver(obs).effects["r/s0/e3"].settled = "ok"  # the runner was told ok
    assert "answered settlement 'ok', it now says 'ambiguous'" in record_lost(obs)[0].message

    obs = clean()
    driver(obs).leases["r/s0"] = LeaseRecord("r/s0", "/w/a", "exclusive", grants=[("L1", 1, 0)], outcome="held")
    assert names(record_lost(obs)) == [("record-lost", "L1")]  # held, never released, not in the table


# -- 7. outcomes ------------------------------------------------------------------------------------------------


def test_outcome_diverged():
    obs = clean()
    obs.entries[1] = entry(0, "failed", reason="x")
    assert "ended 'failed'; the crash-free run ends 'ok'" in outcome_diverged(obs)[0].message
    obs = clean()
    obs.entries[1] = entry(0, "ambiguous")  # visibly unsettled: allowed
    assert outcome_diverged(obs) == []
