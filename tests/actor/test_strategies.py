"""Strategies, escalation and failed restarts on real processes."""

from __future__ import annotations

import pytest

from ouroactors import ActorCrashed, supervisor, worker

from .helpers import ECHO, FLAGGED, RECORDER, read_lines

pytestmark = pytest.mark.multiproc


def recorders(log, names, **fields):
    return [worker(n, RECORDER, kwargs={"log_path": str(log), "name": n}, **fields) for n in names]


def crash(system, path):
    with pytest.raises(ActorCrashed):
        system.ask(path, "crash")


def test_rest_for_one_terminates_newest_first_and_restarts_in_order(actor_system, tmp_path):
    log = tmp_path / "log"
    actor_system.start_tree(supervisor("root", recorders(log, "abcd"), strategy="rest_for_one", intensity=3))
    mark = actor_system.mark()
    crash(actor_system, "root/b")
    actor_system.wait_for("started", "root/d", after=mark)
    assert read_lines(log)[4:] == ["b stop:crash", "d stop:shutdown", "c stop:shutdown",
                                   "b start", "c start", "d start"]  # a untouched


def test_one_for_all_restarts_everyone(actor_system, tmp_path):
    log = tmp_path / "log"
    actor_system.start_tree(supervisor("root", recorders(log, "abc"), strategy="one_for_all", intensity=3))
    mark = actor_system.mark()
    crash(actor_system, "root/b")
    actor_system.wait_for("started", "root/c", after=mark)
    assert read_lines(log)[3:] == ["b stop:crash", "c stop:shutdown", "a stop:shutdown",
                                   "a start", "b start", "c start"]


def test_nested_supervisor_exceeding_intensity_escalates(actor_system):
    inner = supervisor("inner", [worker("w", ECHO)], intensity=1, period=30)
    actor_system.start_tree(supervisor("root", [inner, worker("peer", ECHO)], intensity=5))
    mark = actor_system.mark()
    crash(actor_system, "root/inner/w")
    actor_system.wait_for("started", "root/inner/w", after=mark)
    crash(actor_system, "root/inner/w")  # the second restart within the period is one too many
    escalated = actor_system.wait_for("escalated", "root/inner/w", after=mark)
    assert escalated.fields["reason"] == "reached_max_restart_intensity"
    exited = actor_system.wait_for("exited", "root/inner", after=mark)
    assert exited.reason == {"kind": "shutdown", "info": "reached_max_restart_intensity"}
    actor_system.wait_for("started", "root/inner", after=mark)  # permanent: the parent restarts it
    assert actor_system.ask("root/inner/w", "again") == "again"


def test_transient_parent_entry_does_not_restart_an_escalated_supervisor(actor_system):
    inner = supervisor("inner", [worker("w", ECHO)], intensity=0, restart="transient")
    actor_system.start_tree(supervisor("root", [inner, worker("peer", ECHO)], intensity=5))
    mark = actor_system.mark()
    crash(actor_system, "root/inner/w")
    actor_system.wait_for("exited", "root/inner", after=mark)
    info = actor_system.child_info("root/inner")
    assert info.status == "undefined"  # OTP: shutdown counts as a normal exit for transient
    assert actor_system.ask("root/peer", "still") == "still"


def test_failed_restart_is_retried_and_each_try_counts(actor_system, tmp_path):
    flag = tmp_path / "broken"
    actor_system.start_tree(supervisor("root", [worker("f", FLAGGED, kwargs={"flag": str(flag)})],
                                       intensity=3, period=30))
    flag.write_text("x")  # from now on every start fails
    mark = actor_system.mark()
    crash(actor_system, "root/f")
    actor_system.wait_for("supervisor_exit", "root", after=mark, timeout=20)
    kinds = [e.kind for e in actor_system.events.all()[mark:] if e.path == "root/f"]
    assert kinds.count("start_failed") == 3  # 1 restart + 2 retries, then the 4th attempt escalates
    assert kinds.count("restart_failed") == 3
    assert "escalated" in kinds


def test_failed_restart_recovers_when_the_cause_goes_away(actor_system, tmp_path):
    flag = tmp_path / "broken"
    actor_system.start_tree(supervisor("root", [worker("f", FLAGGED, kwargs={"flag": str(flag)})],
                                       intensity=1000, period=30))
    flag.write_text("x")
    mark = actor_system.mark()
    crash(actor_system, "root/f")
    actor_system.wait_for("restart_failed", "root/f", after=mark)
    flag.unlink()
    actor_system.wait_for("started", "root/f", after=mark)
    assert actor_system.ask("root/f", "ok") == "ok"


def test_significant_child_any_shuts_supervisor_down(actor_system):
    sup = supervisor("group", [worker("lead", ECHO, restart="transient", significant=True), worker("w", ECHO)],
                     auto_shutdown="any_significant", restart="transient")
    actor_system.start_tree(supervisor("root", [sup, worker("peer", ECHO)]))
    mark = actor_system.mark()
    assert actor_system.ask("root/group/lead", ("exit", None)) == "stopping"
    actor_system.wait_for("auto_shutdown", "root/group/lead", after=mark)
    exited = actor_system.wait_for("exited", "root/group", after=mark)
    assert exited.reason == {"kind": "shutdown", "info": "auto_shutdown"}
    assert actor_system.child_info("root/group").status == "undefined"  # transient, normal-ish exit


def test_backoff_delays_the_restart_and_asks_meanwhile_get_restarting(actor_system):
    from ouroactors import ChildRestarting

    slow = worker("w", ECHO, backoff={"min_s": 0.4, "max_s": 2.0, "jitter": 0.0})
    actor_system.start_tree(supervisor("root", [slow]))
    mark = actor_system.mark()
    crash(actor_system, "root/w")
    scheduled = actor_system.wait_for("restart_scheduled", "root/w", after=mark)
    assert scheduled.fields["due_in"] == 0.4
    with pytest.raises(ChildRestarting) as caught:
        actor_system.ask("root/w", "hello")
    assert "next attempt in" in str(caught.value)
    started = actor_system.wait_for("started", "root/w", after=mark)
    assert (started.time_ns - scheduled.time_ns) / 1e9 >= 0.4  # it really waited (a bound, not a goal)
    assert actor_system.ask("root/w", "hello") == "hello"


def test_a_consumer_held_down_by_a_backed_off_restart_is_answered_restarting_too(actor_system):
    """rest_for_one keeps the consumers after a backing-off child down until it is back: an ask of one was answered
    "not running (undefined)" — as if it had ended for good — though README promises ``ChildRestarting``."""
    from ouroactors import ChildRestarting

    slow = worker("w", ECHO, backoff={"min_s": 2.0, "max_s": 4.0, "jitter": 0.0})
    actor_system.start_tree(supervisor("root", [slow, worker("after", ECHO)], strategy="rest_for_one"))
    mark = actor_system.mark()
    crash(actor_system, "root/w")
    actor_system.wait_for("restart_scheduled", "root/w", after=mark)
    with pytest.raises(ChildRestarting, match=r"root/after .*down until root/w's restart starts it again"):
        actor_system.ask("root/after", "hello")
    actor_system.wait_for("started", "root/after", after=mark)
    assert actor_system.ask("root/after", "hello") == "hello"
