"""A real child with ``shutdown = 0``: asked to stop, killed at once as a timeout (OTP), not brutal_kill."""

from __future__ import annotations

import pytest

from ouroactors import supervisor, worker

from .helpers import SLOW_STOP, pid_alive

pytestmark = pytest.mark.multiproc


def test_zero_is_a_timed_shutdown_reported_as_a_timeout(actor_system):
    actor_system.start_tree(supervisor("root", [worker("slow", SLOW_STOP, kwargs={"seconds": 60}, shutdown=0)]))
    assert actor_system.get_childspec("root", "slow").shutdown == 0
    pid = actor_system.child_info("root/slow").pid
    actor_system.terminate_child("root", "slow")
    assert not pid_alive(pid)
    mine = [e for e in actor_system.events.all() if e.path == "root/slow"]
    assert "shutdown_timeout" in [e.kind for e in mine]  # brutal_kill never reports a timeout
    terminated = [e for e in mine if e.kind == "terminated"][-1]
    assert terminated.reason["kind"] == "killed"
    assert terminated.fields["shutdown_error"] is True
