"""Issue 11 §3 (signals) and §4 (ports, inherited sockets, the data dir's mode) against real processes."""

from __future__ import annotations

import os
import re
import signal
import socket
import time

import pytest
from thespian.actors import InvalidActorAddress

from ouroactors import ActorSystem, ActorSystemError, supervisor, worker
from ouroactors.system import _patches, _startup

from ..actor.helpers import ECHO, wait_until
from .frames_support import group_pids, listeners_of, signal_mask, socket_inodes

pytestmark = pytest.mark.multiproc

FAULTS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE)


def _tree() -> object:
    return supervisor("root", [worker("a", ECHO), supervisor("sub", [worker("b", ECHO)])])


def test_fault_signals_keep_their_default_action_in_every_process(actor_system):
    system = actor_system
    system.start_tree(_tree())
    pids = group_pids(system.pgid)
    assert len(pids) >= 5  # admin, logger, tree host, root, a, sub, b
    fault_bits = sum(1 << (number - 1) for number in FAULTS)
    for pid in pids:
        assert signal_mask(pid, "SigCgt") & fault_bits == 0, f"pid {pid} catches a fault signal"
        assert signal_mask(pid, "SigIgn") & fault_bits == 0, f"pid {pid} ignores a fault signal"
    for path in ("root/a", "root/sub", "root/sub/b"):
        pid = system.child_info(path).pid
        assert pid in pids
        assert signal_mask(pid, "SigCgt") & (1 << (signal.SIGTERM - 1)), "thespian's other handlers stay"


def test_a_bus_error_kills_the_actor_and_its_supervisor_sees_it(actor_system):
    system = actor_system
    system.start_tree(_tree())
    victim = system.child_info("root/sub/b").pid
    mark = system.mark()
    os.kill(victim, signal.SIGBUS)  # what a truncated LMDB map raises; it used to repeat forever
    system.wait_for("exited", "root/sub/b", after=mark, timeout=10)
    wait_until(lambda: system.child_info("root/sub/b").pid not in (None, victim), what="a restart")
    assert system.ask("root/sub/b", "back") == "back"


def test_no_process_of_the_system_holds_a_socket_of_the_process_that_started_it(actor_system_factory):
    import socket

    # A socket of the creator's own (an application's client or listener), opened before the system starts.
    stray = socket.socket()
    stray.bind(("127.0.0.1", 0))
    stray.listen()
    try:
        system = actor_system_factory("multiproc")
        _no_inherited_sockets(system)
    finally:
        stray.close()


def _no_inherited_sockets(system):
    system.start_tree(_tree())
    mine = socket_inodes(os.getpid())
    assert mine, "the starting process has its thespian endpoint"
    for pid in group_pids(system.pgid):
        inherited = socket_inodes(pid) & mine
        assert not inherited, f"pid {pid} holds sockets of the starting process: {sorted(inherited)}"
        assert len(listeners_of(pid)) <= 1, f"pid {pid} listens on {listeners_of(pid)}"


def test_only_the_admin_listens_where_bind_asks_actors_stay_on_loopback(actor_system_factory):
    system = actor_system_factory("multiproc", bind_host="0.0.0.0")
    system.start_tree(_tree())
    assert system.ask("root/sub/b", "hi") == "hi"
    listeners = [entry for pid in group_pids(system.pgid) for entry in listeners_of(pid)]
    assert ("0.0.0.0", system.admin_port) in listeners
    others = [entry for entry in listeners if entry[1] != system.admin_port]
    assert len(others) >= 4 and all(ip == "127.0.0.1" for ip, _ in others), others
    assert listeners_of(os.getpid()) and all(ip == "127.0.0.1" for ip, _ in listeners_of(os.getpid()))


def test_the_data_dir_is_created_private_whatever_the_umask(actor_system_factory, tmp_path):
    previous = os.umask(0)
    try:
        system = actor_system_factory("multiproc", data_dir=tmp_path / "open-umask" / "data")
    finally:
        os.umask(previous)
    assert system.data_dir.stat().st_mode & 0o777 == 0o700
    assert (system.data_dir / "secret").stat().st_mode & 0o777 == 0o600


def test_a_named_admin_port_that_is_taken_is_a_clear_error_at_once(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(ActorSystemError, match=re.escape(f"cannot start the admin on 127.0.0.1:{port}")):
            ActorSystem.start("multiproc", tmp_path / "d", admin_port=port)
        assert time.monotonic() - started < 3


def test_a_chosen_port_taken_before_the_admin_binds_it_is_replaced(actor_system_factory, monkeypatch):
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real = _startup.free_port
    offered = iter([taken])
    monkeypatch.setattr(_startup, "free_port", lambda host="127.0.0.1": next(offered, None) or real(host))
    try:
        system = actor_system_factory("multiproc")
        assert system.admin_port != taken
        system.start_tree(_tree())
        assert system.ask("root/a", "ok") == "ok"
    finally:
        squatter.close()


def test_thespian_refusing_the_admin_becomes_an_actor_system_error():
    attempts = []

    def refuse(port: int) -> None:
        attempts.append(port)
        raise InvalidActorAddress(("127.0.0.1", port), "not a valid ActorSystem admin")

    with pytest.raises(ActorSystemError, match=r"did not start on 127\.0\.0\.1"):
        _startup.start_admin("127.0.0.1", None, refuse)
    assert len(attempts) == 1  # no second admin elsewhere: a slow first one could still come up
    assert _patches.reserved_sockets == []  # the reservation released
    attempts.clear()
    with pytest.raises(ActorSystemError, match="is something else bound"):
        _startup.start_admin("127.0.0.1", _startup.free_port(), refuse)
    assert len(attempts) == 1
