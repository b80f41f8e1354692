"""The observable world: deliveries counted per key (a duplicate is visible), look-ups by key, the
log, refusals, late replies, bad requests; its process never outlives its owner."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from ouroactors.authorities.ledger.domain import Entry, Status
from ouroactors.faults.world import WORLD_URL_ENV, World, WorldError, reconcile


def test_counts_every_delivery_and_answers_lookups(fault_world):
    with fault_world.client() as client:
        assert client.create("k1", {"n": 1}) == {"created": True, "deliveries": 1}
        assert client.create("k1", {"n": 1}) == {"created": False, "deliveries": 2}  # the duplicate shows
        assert client.create("k2") == {"created": True, "deliveries": 1}
        found = client.lookup("k1")
        assert found["deliveries"] == 2 and found["payload"] == {"n": 1} and found["found"] is True
        assert client.lookup("never") is None
        log = client.log()
        assert [(e["key"], e["event"], e["n"]) for e in log] == [("k1", "delivered", 1), ("k1", "delivered", 2),
                                                                 ("k2", "delivered", 1)]
        assert [e["key"] for e in client.log(prefix="k2")] == ["k2"]
        assert all(a["t_ns"] <= b["t_ns"] for a, b in itertools.pairwise(log))


def test_keys_with_slashes_and_odd_characters_round_trip(fault_world):
    with fault_world.client() as client:
        key = "run 1/s0/k0?x=1#y"
        client.create(key)
        assert client.lookup(key)["key"] == key
        assert client.log(prefix="run 1/")[0]["key"] == key


def test_refusal_is_not_a_delivery(fault_world):
    with fault_world.client() as client:
        assert client.create("r", {"refuse": True}) == {"created": False, "refused": True, "deliveries": 0}
        assert client.lookup("r") is None
        assert client.log() == [{"key": "r", "event": "refused", "created": False, "n": 0,
                                 "t_ns": client.log()[0]["t_ns"]}]


def test_a_late_reply_still_delivered(fault_world):
    with fault_world.client() as client:
        with pytest.raises(httpx.TimeoutException):
            client.create("slow", {"reply_delay_s": 1.0}, timeout=0.2)
        assert client.lookup("slow")["deliveries"] == 1  # it happened; only the answer was late


def test_bad_requests_are_refused_with_400(fault_world):
    raw = httpx.Client(base_url=fault_world.url)
    try:
        assert raw.post("/items", content=b"not json").status_code == 400
        assert raw.post("/items", json={"payload": 1}).status_code == 400  # no key
        assert raw.post("/items", json={"key": ""}).status_code == 400
        assert raw.post("/elsewhere", json={"key": "k"}).status_code == 404
        assert raw.get("/nothing").status_code == 404
    finally:
        raw.close()
    with fault_world.client() as client:
        assert client.log() == []  # nothing bad reached the world


def test_stop_leaves_no_process_and_start_twice_is_refused():
    world = World().start()
    pid = world.pid
    assert world.running and pid is not None
    with pytest.raises(WorldError, match="already running"):
        world.start()
    world.stop()
    assert not world.running
    with pytest.raises(OSError):
        os.kill(pid, 0)
    world.stop()  # idempotent
    with pytest.raises(WorldError, match="not running"):
        world.url  # noqa: B018


def test_the_world_dies_with_its_owner():
    """The service watches its parent: an owner killed with SIGKILL leaves nothing behind."""
    code = ("import sys, time; from ouroactors.faults.world import World; w = World().start(); "
            "print(w.pid, flush=True); time.sleep(60)")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert owner.stdout is not None
        pid = int(owner.stdout.readline())
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 10
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, "the world outlived its owner"
            time.sleep(0.05)  # bounded poll for the watchdog to notice
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(10)
        if owner.stdout is not None:
            owner.stdout.close()


def _entry(key: str) -> Entry:
    return Entry(seq=1, effect_id="e", kind="http_request", idempotency_key=key, fingerprint="0" * 64,
                 principal="t", session_id=None, turn_id=None, call_id=None, authority={}, grant=None,
                 cause=None, status=Status.AMBIGUOUS, node="n", started_ns=1)


def test_reconciler_settles_ok_only_what_the_world_saw(fault_world, monkeypatch):
    monkeypatch.setenv(WORLD_URL_ENV, fault_world.url)
    with fault_world.client() as client:
        client.create("seen", {})
    verdict = reconcile(_entry("seen"))
    assert verdict is not None and verdict.status == "ok"
    assert verdict.evidence["key"] == "seen" and verdict.evidence["deliveries"] == 1
    assert reconcile(_entry("unseen")) is None  # absence is not proof: stays ambiguous
    monkeypatch.delenv(WORLD_URL_ENV)
    assert reconcile(_entry("seen")) is None  # no world configured: nothing proven
