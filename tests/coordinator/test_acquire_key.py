"""The coordinator's workspace Acquire key: stable per (session, generation), unguessable (no actor system).

The workspace replays a request_id's grant *with its capability* to whoever presents the key, so the key of a
session's Acquire must not be derivable from what others know (the session id, a count of generations): it is an
HMAC under a secret kept 0600 in the data dir (:mod:`ouroactors.runtime.coordinator.request_keys`). Yet every
coordinator incarnation on that data dir must recompute the key of the runtime before its own (the ``earlier``
fallback of ``_lease_workspace``), which is driven here against the workspace authority's own handlers.
"""

from __future__ import annotations

import multiprocessing
import os
import stat
from collections.abc import Generator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ouroactors.authorities.workspace.actor import Granted
from ouroactors.authorities.workspace.leases import (
    MAX_REQUEST_ID,
    MIN_REQUEST_ID,
    LeaseConflict,
    ReservationPending,
    request_digest,
)
from ouroactors.authorities.workspace.messages import Acquire
from ouroactors.core.boundary import check_message
from ouroactors.core.errors import ActorSystemError
from ouroactors.core.trusted_files import UntrustedFile
from ouroactors.runtime.coordinator import leasing, request_keys
from ouroactors.runtime.coordinator.calls import Ask
from ouroactors.runtime.coordinator.commands import CoordinatorError
from ouroactors.runtime.coordinator.configs import get_lease
from ouroactors.runtime.coordinator.request_keys import KEY_FILE, acquire_request_id, load_or_create_key
from ouroactors.supervision.protocol import AdminCall
from ouroactors.system import _secret

from .test_reclaim_key import Link, Ws, run

SESSION = "session-7f3a"  # 's' and 't' are no hex digits: a key naming the session would show it
G1, G2 = (5 << 48) | 1_234_567, (5 << 48) | 2_345_678  # runtime generations as the supervisors make them


def data_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


class Incarnation(Link):
    """A coordinator incarnation of ``SESSION`` on ``directory`` (what ``_start_once`` keys its Acquire with)."""

    session_id = SESSION
    store = None  # read only through configs.get_lease, which the test replaces

    def __init__(self, directory: Path) -> None:
        self.context = SimpleNamespace(data_dir=str(directory))  # type: ignore[assignment]


# -- the key: stable, distinct, not the old form, within the workspace's bounds ---------------------------------------

def test_the_key_is_the_same_for_a_session_and_generation_in_every_call_and_incarnation_on_one_data_dir(tmp_path):
    where = data_dir(tmp_path / "data")
    secret = load_or_create_key(where)
    assert load_or_create_key(where) == secret  # created once, read back by every later coordinator
    key = acquire_request_id(secret, SESSION, G1)
    assert acquire_request_id(secret, SESSION, G1) == key
    first, second = Incarnation(where), Incarnation(where)
    assert first._acquire_request_id(G1) == second._acquire_request_id(G1) == key
    assert first._acquire_request_id(G1) == key  # its key read once, the same on every call


def test_the_key_differs_per_session_generation_and_data_dir(tmp_path):
    one, other = data_dir(tmp_path / "one"), data_dir(tmp_path / "other")
    here, there = load_or_create_key(one), load_or_create_key(other)
    assert here != there  # a fresh random secret per data dir
    keys = {acquire_request_id(here, SESSION, G1), acquire_request_id(here, SESSION, G2),
            acquire_request_id(here, SESSION + "x", G1), acquire_request_id(there, SESSION, G1)}
    assert len(keys) == 4
    assert Incarnation(one)._acquire_request_id(G2) != Incarnation(other)._acquire_request_id(G2)
    # the parts are length-prefixed: no (session, generation) pair shares its message with another
    assert acquire_request_id(here, "a1", 23) != acquire_request_id(here, "a12", 3)


def test_the_key_is_not_the_old_guessable_form_and_fits_the_workspace_bounds(tmp_path):
    where = data_dir(tmp_path / "data")
    key = Incarnation(where)._acquire_request_id(G1)
    assert key != f"{SESSION}.g{G1}"  # the old key: anyone knowing the session and counting generations had it
    assert SESSION not in key and str(G1) not in key
    assert MIN_REQUEST_ID <= len(key) <= min(MAX_REQUEST_ID, 200)  # the lease table's bounds, and Name's
    assert key.isascii() and key.isprintable()
    check_message(Acquire("/w", "exclusive", SESSION, request_id=key))  # accepted at the workspace's door
    ws = Ws(str(tmp_path))
    granted = ws.ask(Acquire(str(tmp_path), "exclusive", SESSION, owner="runtime-1", request_id=key))
    assert isinstance(granted, Granted)
    assert granted.lease.request_sha256 == request_digest(SESSION, key)


def test_the_key_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="16 bytes"):
        acquire_request_id(b"short", SESSION, G1)
    with pytest.raises(ValueError, match="generation"):
        acquire_request_id(bytes(32), SESSION, True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="generation"):
        acquire_request_id(bytes(32), SESSION, -1)
    with pytest.raises(ValueError, match="session_id"):
        acquire_request_id(bytes(32), "", G1)


# -- unguessable: it depends on the data dir's secret -----------------------------------------------------------------

def test_who_knows_the_session_and_generation_but_not_the_secret_cannot_reproduce_the_key(tmp_path):
    where = data_dir(tmp_path / "data")
    secret = load_or_create_key(where)
    key = Incarnation(where)._acquire_request_id(G1)
    assert key == acquire_request_id(secret, SESSION, G1)  # a function of the secret...
    guesses = {acquire_request_id(other, SESSION, G1) for other in (
        bytes(32), bytes(range(32)), os.urandom(32), secret[:-1] + bytes([secret[-1] ^ 1]),
        _secret.load_or_create(where),  # ...not the system's frame secret, which every convention node holds
    )}
    assert key not in guesses and len(guesses) == 5  # ...and of nothing else: another secret, another key


def test_an_attacker_with_the_session_id_and_generation_gets_no_grant_but_the_next_incarnation_does(tmp_path,
                                                                                                    monkeypatch):
    """The ``earlier`` fallback: the workspace recorded runtime G1's grant and died before answering (its lease
    then a reservation, no lease kept beside the record); the next incarnation recomputes G1's key and reclaims it.
    One that merely knows the session id and the generation — the old key, or a key under another secret — does not
    get the capability."""
    monkeypatch.setattr(leasing, "get_lease", lambda store, session_id: None)  # nothing kept beside the record
    where, root = data_dir(tmp_path / "data"), str(tmp_path)
    ws = Ws(root)
    lost = ws.ask(Acquire(root, "exclusive", SESSION, owner="runtime-1",
                          request_id=Incarnation(where)._acquire_request_id(G1)))
    assert isinstance(lost, Granted)  # recorded; its answer lost with the workspace
    for guess in (f"{SESSION}.g{G1}", Incarnation(data_dir(tmp_path / "elsewhere"))._acquire_request_id(G1)):
        answer = ws.ask(Acquire(root, "exclusive", SESSION, owner="attacker", request_id=guess))
        assert isinstance(answer, LeaseConflict), answer  # while active: no replay, no capability
    ws.owner_died("runtime-1")  # the workspace restarted: every active lease became a reservation
    attacker = Incarnation(data_dir(tmp_path / "elsewhere"))  # the same session id and generations, another secret
    refused, _ = run(attacker._lease_workspace(root, "attacker", attacker._acquire_request_id(G2), None,
                                               earlier=attacker._acquire_request_id(G1)), ws)
    assert isinstance(refused, ReservationPending), refused
    answer = ws.ask(Acquire(root, "exclusive", SESSION, owner="attacker", request_id=f"{SESSION}.g{G1}"))
    assert isinstance(answer, ReservationPending), answer
    nxt = Incarnation(where)  # the next coordinator on the same data dir
    granted, _ = run(nxt._lease_workspace(root, "runtime-2", nxt._acquire_request_id(G2), None,
                                          earlier=nxt._acquire_request_id(G1)), ws)
    assert isinstance(granted, Granted) and granted.replayed, granted  # reclaimed by the earlier runtime's key
    assert granted.lease.owner == "runtime-2" and granted.lease.fencing_token > lost.lease.fencing_token
    assert granted.capability != lost.capability
    assert [(x.lease_id, x.status) for x in ws.live()] == [(granted.lease.lease_id, "active")]


# -- the coordinator's start of a runtime: the keys its Acquires carry ----------------------------------------------

class Starting(Incarnation):
    """An incarnation whose ``_start_once`` runs on a real session store; its asks are answered by :func:`drive`."""

    record = None
    spare = None  # no spare runtime offered: _start_once starts one (asked of "execution" below)
    spare_trusted = False

    def __init__(self, directory: Path, store: Any) -> None:
        super().__init__(directory)
        self.store = store

    def _execution(self, call: AdminCall, timeout_s: float = 30.0) -> Ask:
        return Ask("execution", call, timeout_s)


def drive(job: Generator[Ask, Any, Any], ws: Ws, generation: int, lose_grant: bool = False) -> list[str]:
    """Run ``_start_once`` until it asks its runtime to open; the request ids of the Acquires it sent, in order.
    ``lose_grant``: the workspace records the first Acquire and dies before answering (so does the job)."""
    sent: list[str] = []
    answer: Any = None
    while True:
        ask = job.send(answer)
        if isinstance(ask.message, AdminCall) and ask.message.op == "start_child":
            answer = SimpleNamespace(id="runtime", generation=generation, address=f"runtime@{generation}")
        elif isinstance(ask.message, Acquire):
            sent.append(ask.message.request_id)
            answer = ws.ask(ask.message)
            if lose_grant:
                job.close()
                return sent
        else:  # the open: the lease is kept by now
            job.close()
            return sent


def test_a_runtimes_acquire_carries_its_generations_key_and_the_next_incarnation_recomputes_the_earlier_one(
        tmp_path, store):
    """What ``_start_once`` sends: the HMAC key of its runtime's generation, never ``<session>.g<generation>``;
    and after a grant lost with the workspace, the next incarnation's fallback key is the lost runtime's."""
    root = str(tmp_path / "ws")
    os.mkdir(root)
    ws = Ws(root)
    secret = load_or_create_key(tmp_path)
    first = drive(Starting(tmp_path, store)._start_once({"workspace": root}, 0, None, (), (0, 0)), ws, G1,
                  lose_grant=True)
    assert first == [acquire_request_id(secret, SESSION, G1)] and first != [f"{SESSION}.g{G1}"]
    ws.owner_died(f"runtime@{G1}")  # the workspace restarted: the lost grant is now a reservation
    assert get_lease(store, SESSION) is None  # nothing of it kept beside the record
    second = drive(Starting(tmp_path, store)._start_once({"workspace": root}, 0, None, (), (0, 0)), ws, G2)
    assert second == [acquire_request_id(secret, SESSION, G2), acquire_request_id(secret, SESSION, G1)]
    [lease] = ws.live()
    assert lease.status == "active" and lease.owner == f"runtime@{G2}"
    kept = get_lease(store, SESSION)
    assert kept is not None and kept["lease_id"] == lease.lease_id and kept["capability"]


def test_an_untrusted_key_refuses_the_start_before_any_runtime_is_started(tmp_path, store):
    load_or_create_key(tmp_path)
    os.chmod(tmp_path / KEY_FILE, 0o640)
    job = Starting(tmp_path, store)._start_once({"workspace": str(tmp_path)}, 0, None, (), (0, 0))
    with pytest.raises(CoordinatorError, match="acquire key"):
        next(job)  # not even the execution supervisor was asked


# -- the secret file: 0600, created once, refused unless ours alone ---------------------------------------------------

def test_the_secret_is_created_0600_with_32_random_bytes_and_no_temporary_file_left(tmp_path):
    where = data_dir(tmp_path / "data")
    secret = load_or_create_key(where)
    info = os.lstat(where / KEY_FILE)
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.geteuid()
    assert len(secret) == 32 and bytes.fromhex((where / KEY_FILE).read_text()) == secret
    assert sorted(p.name for p in where.iterdir()) == [KEY_FILE]
    assert not (where / _secret.SECRET_NAME).exists()  # the system's secret is left alone


def test_a_key_another_coordinator_created_first_is_kept_never_replaced(tmp_path, monkeypatch):
    where = data_dir(tmp_path / "data")
    theirs = load_or_create_key(where)
    monkeypatch.setattr(request_keys.os.path, "lexists", lambda path: False)  # it appeared after our look
    assert load_or_create_key(where) == theirs
    assert sorted(p.name for p in where.iterdir()) == [KEY_FILE]


def _load(where: str) -> bytes:
    return load_or_create_key(where)


def test_coordinators_creating_the_key_at_once_all_get_the_same_one(tmp_path):
    where = data_dir(tmp_path / "data")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        keys = pool.map(_load, [str(where)] * 6, chunksize=1)
    assert len(set(keys)) == 1 and keys[0] == load_or_create_key(where)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o606])
def test_a_secret_others_may_read_or_write_is_refused(tmp_path, mode):
    where = data_dir(tmp_path / "data")
    load_or_create_key(where)
    os.chmod(where / KEY_FILE, mode)
    with pytest.raises(ActorSystemError, match="chmod 600"):
        load_or_create_key(where)
    assert stat.S_IMODE(os.lstat(where / KEY_FILE).st_mode) == mode  # nothing changed


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_secret_owned_by_another_user_is_refused(tmp_path):
    where = data_dir(tmp_path / "data")
    load_or_create_key(where)
    os.chown(where / KEY_FILE, 4242, -1)
    with pytest.raises(ActorSystemError, match="owned by uid 4242"):
        load_or_create_key(where)


def test_a_secret_that_is_a_symlink_is_refused(tmp_path):
    linked = data_dir(tmp_path / "linked")
    planted = tmp_path / "planted"
    planted.write_text(os.urandom(32).hex())
    planted.chmod(0o600)
    (linked / KEY_FILE).symlink_to(planted)
    with pytest.raises(ActorSystemError, match="symlink"):
        load_or_create_key(linked)
    assert (linked / KEY_FILE).is_symlink()  # not replaced


def test_a_data_dir_others_may_write_is_refused(tmp_path):
    where = data_dir(tmp_path / "data")
    where.chmod(0o777)
    with pytest.raises(UntrustedFile, match="writable by group or others"):
        load_or_create_key(where)
    assert not (where / KEY_FILE).exists()


def test_the_coordinator_fails_closed_on_an_untrusted_key(tmp_path):
    where = data_dir(tmp_path / "data")
    load_or_create_key(where)
    os.chmod(where / KEY_FILE, 0o644)
    with pytest.raises(CoordinatorError, match="acquire key"):
        Incarnation(where)._acquire_request_id(G1)


def test_a_short_or_malformed_secret_is_refused(tmp_path):
    where = data_dir(tmp_path / "data")
    path = where / KEY_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"abcd\n")
    os.close(fd)
    with pytest.raises(ActorSystemError, match="too short"):
        load_or_create_key(where)
    path.write_text("not hex at all, not hex at all!\n")
    with pytest.raises(ActorSystemError, match="hex"):
        load_or_create_key(where)
