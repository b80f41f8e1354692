"""An ask whose worker stops before answering ends at once with ``ActorStopped``, not after its whole timeout.

Found by a test of the coordinator (``test_actor_refused_commits``): ``Sessions.show`` asked while the workspace's
crash restarted the session directory (rest_for_one) waited its 60 s timeout in 3 of ~25 runs — the dying directory's
process had taken the ask and never answered. Here a worker is SIGKILLed, and another terminated by its supervisor,
while they hold an ask; the handle reads the supervisor's ``exited``/``terminated`` event for the generation it
asked (:mod:`ouroactors.system._stopped`).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ouroactors import ActorCrashed, ActorStopped, NoSuchActor, supervisor, worker
from ouroactors.core.procs import boot_id
from ouroactors.system import _stopped

from .helpers import ECHO, wait_until
from .holding import HOLDS

pytestmark = pytest.mark.multiproc


def _while_held(marker: Path, act: Any) -> threading.Thread:
    """Run ``act(pid)`` in a thread once the worker holds the ask (its marker names its pid)."""
    def run() -> None:
        wait_until(lambda: marker.exists() and marker.read_text(), timeout=30, what="the worker holds the ask")
        act(int(marker.read_text()))
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_an_ask_whose_worker_is_killed_while_handling_it_ends_at_once(actor_system: Any, tmp_path: Path) -> None:
    marker = tmp_path / "holding"
    actor_system.start_tree(supervisor("app", [worker("w", HOLDS, kwargs={"marker": str(marker)})]))
    assert actor_system.ask("app/w", "ping", timeout=10) == ("echo", "ping")  # resolved: its generation known
    killer = _while_held(marker, lambda pid: os.kill(pid, signal.SIGKILL))
    began = time.monotonic()
    with pytest.raises(ActorStopped, match=r"app/w .*stopped before it answered") as stopped:
        actor_system.ask("app/w", "hold", timeout=30)
    took = time.monotonic() - began
    killer.join(30)
    assert isinstance(stopped.value, NoSuchActor)  # a caller that retries on NoSuchActor retries this too
    assert took < 15, f"the ask waited {took:.1f} s: its worker's death was not noticed"  # was: AskTimeout at 30 s
    # the supervisor restarted it; the next ask resolves the path again and is answered
    wait_until(lambda: [c for c in actor_system.which_children("app") if c.status == "running"], timeout=30)
    assert actor_system.ask("app/w", "again", timeout=10) == ("echo", "again")


def test_an_ask_whose_worker_its_supervisor_terminates_ends_at_once(actor_system: Any, tmp_path: Path) -> None:
    marker = tmp_path / "holding"
    actor_system.start_tree(supervisor("app", [worker("w", HOLDS, kwargs={"marker": str(marker)}, shutdown=200)]))
    assert actor_system.ask("app/w", "ping", timeout=10) == ("echo", "ping")
    other = type(actor_system).connect(actor_system.data_dir)  # a second handle: one endpoint serves one thread
    try:
        stopper = _while_held(marker, lambda pid: other.terminate_child("app", "w"))
        began = time.monotonic()
        with pytest.raises(ActorStopped):
            actor_system.ask("app/w", "hold", timeout=30)
        took = time.monotonic() - began
        stopper.join(30)
    finally:
        other._close_endpoints()
    assert took < 15, f"the ask waited {took:.1f} s"


def test_the_log_says_which_generation_stopped(tmp_path: Path) -> None:
    """:func:`_stopped.stopped_since` takes only an end of *that* path and generation, after the offset."""
    log = tmp_path / "events.jsonl"
    log.write_text('{"kind": "exited", "path": "app/w", "generation": 7, "supervisor": "app"}\n')
    offset = log.stat().st_size
    with log.open("a") as out:
        out.write('{"kind": "started", "path": "app/w", "generation": 8}\n')
        out.write('{"kind": "terminated", "path": "app/wx", "generation": 8}\n')
        out.write('{"kind": "exited", "path": "app/w", "generation": 9}\n')
        out.write('{"kind": "terminated", "path": "app/w", "gener')  # a line being written
    assert not _stopped.stopped_since(log, 0, "app/w", 8)
    assert _stopped.stopped_since(log, 0, "app/w", 7)  # before the offset: not seen from there
    assert not _stopped.stopped_since(log, offset, "app/w", 7)
    assert _stopped.stopped_since(log, offset, "app/w", 9)
    with log.open("a") as out:
        out.write('ation": 8}\n')
    assert _stopped.stopped_since(log, offset, "app/w", 8)
    assert not _stopped.stopped_since(tmp_path / "none.jsonl", 0, "app/w", 8)


def test_an_ask_through_a_ref_whose_worker_is_killed_ends_at_once(actor_system: Any, tmp_path: Path) -> None:
    marker = tmp_path / "holding"
    actor_system.start_tree(supervisor("app", [worker("w", HOLDS, kwargs={"marker": str(marker)})]))
    ref = actor_system.ref("app/w")
    killer = _while_held(marker, lambda pid: os.kill(pid, signal.SIGKILL))
    began = time.monotonic()
    with pytest.raises(ActorStopped, match="app/w"):
        ref.ask("hold", timeout=30)
    took = time.monotonic() - began
    killer.join(30)
    assert took < 15, f"the ask waited {took:.1f} s"


def test_a_watch_reads_on_from_where_it_stopped_and_keeps_what_it_saw(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text('{"kind": "started", "path": "app/w", "generation": 8}\n{"kind": "exit')
    watch = _stopped.Watch(log, 0, "app/w", 8)
    assert not watch() and watch.offset == len('{"kind": "started", "path": "app/w", "generation": 8}\n')
    with log.open("a") as out:  # the line being written is read whole the next time
        out.write('ed", "path": "app/w", "generation": 8}\n')
    assert watch()
    log.write_text("")  # (the log as it is no longer matters: it has seen the end)
    assert watch()


def test_lines_that_only_look_like_an_end_are_not_taken_for_one(tmp_path: Path) -> None:
    """Attacks on the reader: the generation as a string or a float, the path under another key or in a list, a
    kind that is no end, a huge line, binary junk — none of them ends an ask; the real line after them does."""
    log = tmp_path / "events.jsonl"
    junk = [
        '{"kind": "exited", "path": "app/w", "generation": "9"}',
        '{"kind": "exited", "path": "app/w", "generation": 9.5}',
        '{"kind": "exited", "child": "app/w", "generation": 9}',
        '["exited", "app/w", 9]',
        '{"kind": "started", "path": "app/w", "generation": 9}',
        '{"kind": "exited", "path": "app/w", "generation": 9, "x": "' + "a" * 1_000_000 + '"',  # unterminated
        '\x00\xff app/w \x00',
        '{"kind": "exited", "path": "APP/W", "generation": 9}',
    ]
    log.write_bytes("\n".join(junk).encode("utf-8", "surrogateescape") + b"\n")
    assert not _stopped.stopped_since(log, 0, "app/w", 9)
    with log.open("a") as out:
        out.write('{"kind": "terminated", "path": "app/w", "generation": 9}\n')
    assert _stopped.stopped_since(log, 0, "app/w", 9)
    assert _stopped.log_end(tmp_path) == log.stat().st_size and _stopped.log_end(tmp_path / "none") == 0


def test_a_watch_knows_where_the_end_was_logged(tmp_path: Path) -> None:
    """``ended_before``: the end's line began before a log end taken just before an ask was sent (never handled),
    or not (it may have been); read across two reads, the offset is the line's place in the whole log."""
    log = tmp_path / "events.jsonl"
    first = '{"kind": "started", "path": "app/w", "generation": 8}\n'
    log.write_text(first)
    watch = _stopped.Watch(log, 0, "app/w", 8)
    assert not watch() and watch.ended_at is None and not watch.ended_before(10_000)
    other = '{"kind": "exited", "path": "app/v", "generation": 8}\n'
    with log.open("a") as out:
        out.write(other + '{"kind": "exited", "path": "app/w", "generation": 8}\n')
    assert watch()
    assert watch.ended_at == len(first) + len(other)
    assert watch.ended_before(len(first) + len(other) + 1)  # the ask left after the line began
    assert not watch.ended_before(len(first) + len(other))  # it left before the line began
    assert not watch.ended_before(None)


def test_a_watch_knows_when_the_worker_stopped_handling_messages(tmp_path: Path) -> None:
    """``ended_before(offset, sent_ns)``: an end logged after the ask left still proves the ask unhandled when its
    line says the worker had stopped handling messages (``stopped_ns``) before the ask was sent; a stamp that is not
    a positive integer proves nothing (a forged or damaged line ends an ask no earlier than its place in the log)."""
    log = tmp_path / "events.jsonl"
    here = json.dumps(boot_id())
    for stamp, boot in [('"1000"', here), ("1000.0", here), ("true", here), ("-5", here), ("0", here),
                        ("null", here), ('{"ns": 1000}', here),
                        ("1000", '"another-host-or-boot"'), ("1000", "null"), ("1000", "7")]:
        # (a stamp of another kernel's monotonic clock, or of none named, compares with nothing here)
        log.write_text(f'{{"kind": "exited", "path": "app/w", "generation": 8, "stopped_ns": {stamp}, '
                       f'"boot": {boot}}}\n')
        watch = _stopped.Watch(log, 0, "app/w", 8)
        assert watch() and watch.stopped_ns is None, (stamp, boot)
        assert not watch.ended_before(0, 10**18), stamp  # the line began after the send: only a stamp could tell
    log.write_text(f'{{"kind": "terminated", "path": "app/w", "generation": 8, "stopped_ns": 1000, "boot": {here}}}\n')
    watch = _stopped.Watch(log, 0, "app/w", 8)
    assert watch() and watch.stopped_ns == 1000
    assert watch.ended_before(0, 1001)  # sent after it stopped handling messages
    assert not watch.ended_before(0, 1000) and not watch.ended_before(0, 999)  # sent before (or as) it stopped
    assert not watch.ended_before(0) and not watch.ended_before(None, None)  # nothing to compare with


def test_the_stamp_a_supervisor_keeps_is_its_own_hosts_clock() -> None:
    from ouroactors.supervision.processes import stopped_serving

    assert stopped_serving(900, "local", "local", 1000) == 900  # the child's instant
    assert stopped_serving(1200, "local", "local", 1000) == 1000  # never later than the report's arrival
    assert stopped_serving(-5, "local", "local", 1000) == 0  # (0: proves nothing to a handle)
    assert stopped_serving(None, "local", "local", 1000) == 1000  # a child that stamps nothing: its arrival
    # a child on another node stamped its own host's clock, which could be far behind this one's: an ask sent here
    # after that number proves nothing, so only the arrival counts
    assert stopped_serving(5, "gpu-node", "local", 1000) == 1000


def test_a_workers_end_says_when_it_stopped_handling_messages(actor_system: Any) -> None:
    # the worker stamps the instant it stops serving (a crash, a stop) in its exit report; its supervisor puts it on
    # the end's line, never later than the report's arrival — and after the crash's answer was sent
    actor_system.start_tree(supervisor("app", intensity=10, children=[worker("w", ECHO)]))
    mark = actor_system.mark()
    with pytest.raises(ActorCrashed):
        actor_system.ask("app/w", "crash", timeout=10)
    answered = time.monotonic_ns()
    exited = actor_system.wait_for("exited", "app/w", after=mark)
    assert type(exited.fields.get("stopped_ns")) is int and 0 < exited.fields["stopped_ns"] < answered
    assert exited.fields["boot"] == boot_id()  # the clock it is on
    actor_system.wait_for("started", "app/w", after=mark)
    mark = actor_system.mark()
    before = time.monotonic_ns()
    actor_system.terminate_child("app", "w")
    terminated = actor_system.wait_for("terminated", "app/w", after=mark)
    assert before < terminated.fields["stopped_ns"] < time.monotonic_ns()


def test_a_ref_to_an_incarnation_that_is_gone_says_nothing_was_asked(actor_system: Any) -> None:
    # a killed worker's port is closed: the ask comes back undelivered at once, which was read as AskTimeout ("no
    # answer within 5s", after 0.04 s)
    actor_system.start_tree(supervisor("app", intensity=10, children=[worker("w", ECHO)]))
    ref = actor_system.ref("app/w")
    assert ref.ask("ping", timeout=10) == "ping"
    actor_system.kill("app/w")
    actor_system.wait_for("exited", "app/w")
    for _ in range(2):  # before and after the restart
        with pytest.raises(NoSuchActor, match=r"app/w \(generation \d+\.\d{15}\) .*nothing was asked") as gone:
            ref.ask("ping", timeout=10)
        assert not isinstance(gone.value, ActorStopped)
        actor_system.wait_for("started", "app/w")
    assert actor_system.ref("app/w").ask("ping", timeout=10) == "ping"  # a new ref names the new incarnation
