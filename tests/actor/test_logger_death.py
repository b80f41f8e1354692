"""The death of the system's logger process (thespian's, a child of the admin) is not the system's death.

Thespian restarts a dead logger from its admin, with the ``logDefs`` it never kept on the admin: the
``AttributeError`` ended the admin's loop, and the whole system died with it, silently (one line in thespian's own
log) — after a SIGKILL from the OOM killer, or from anybody, of a process nobody thinks of as an actor."""

from __future__ import annotations

import os
import signal

import pytest

from ouroactors import supervisor, worker
from ouroactors.core.procs import _stat, children, pid_alive

from .helpers import wait_until

pytestmark = pytest.mark.multiproc


def test_a_killed_logger_is_replaced_and_the_system_goes_on(actor_system):
    actor_system.start_tree(supervisor("r", [worker("c", "ouroactors.examples.workers:Counter")]))
    [tree] = actor_system.trees()
    root = _stat(tree.pid)
    assert root is not None
    host = int(root[1])  # the tree host, the admin's child that leads the tree
    [logger] = [pid for pid in children(actor_system.admin_pid) if pid != host]
    os.kill(logger, signal.SIGKILL)
    wait_until(lambda: [pid for pid in children(actor_system.admin_pid) if pid not in (host, logger)],
               what="a new logger started by the admin")
    assert pid_alive(actor_system.admin_pid)
    assert actor_system.ask("r/c", "incr") == 1  # the system goes on answering
    mark = actor_system.mark()
    actor_system.kill("r/c")
    actor_system.wait_for("started", "r/c", after=mark)  # and supervising


def test_a_killed_tree_host_ends_the_system_saying_why(actor_system):
    """The tree host runs every tree; SIGKILLed, its trees die with it and the admin lived on headless: every ask
    timed out after 10 s, "no answer from host". As an OTP node ends when its application controller dies, the
    system ends, and its log says why."""
    actor_system.start_tree(supervisor("r", [worker("c", "ouroactors.examples.workers:Counter")]))
    [tree] = actor_system.trees()
    root = _stat(tree.pid)
    assert root is not None
    os.kill(int(root[1]), signal.SIGKILL)
    wait_until(lambda: not pid_alive(actor_system.admin_pid), what="the headless system ended")
    log = (actor_system.data_dir / "admin.out").read_text()
    assert "the tree host" in log and "died outside a shutdown" in log, log[-2000:]
