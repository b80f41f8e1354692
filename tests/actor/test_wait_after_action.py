"""``wait_for`` after an action waits for what the action causes, as the README's example promises."""

from __future__ import annotations

import os

import pytest

from ouroactors import supervisor, worker
from ouroactors.system import handle

from .helpers import ECHO

pytestmark = pytest.mark.multiproc


def test_kill_then_wait_for_started_waits_for_the_restart(actor_system):
    actor_system.start_tree(supervisor("app", [worker("store", ECHO)], intensity=5))
    first = actor_system.wait_for("started", "app/store")  # the start_tree call was the last action
    actor_system.kill("app/store")
    again = actor_system.wait_for("started", "app/store")  # the README's example
    assert again.generation != first.generation and again.time_ns > first.time_ns
    assert actor_system.wait_for("started", "app/store", after=0).generation == first.generation


def test_each_system_logs_thespian_into_its_own_data_dir(actor_system_factory, monkeypatch):
    monkeypatch.setattr(handle, "_USER_THESPLOG", None)
    first = actor_system_factory("multiproc")
    assert os.environ["THESPLOG_FILE"] == str(first.data_dir / "thespian.log")
    second = actor_system_factory("multiproc")
    assert os.environ["THESPLOG_FILE"] == str(second.data_dir / "thespian.log")
