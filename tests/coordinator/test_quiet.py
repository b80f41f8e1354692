"""A coordinator with no follower to serve is not woken at every commit (coordinator.quiet, WakeWriter).

Unit tests of the marker and of the runtime's rule, then real processes: a tool turn with nobody following wakes
its coordinator only when acks are due, and a follower lent to the coordinator mid-session still gets every event
at each commit (the directory's tick and the coordinator's poll an hour away, so only wake-ups can serve it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ouroactors.runtime.coordinator import actor, directory, trace
from ouroactors.runtime.coordinator.messages import EventsRead
from ouroactors.runtime.coordinator.quiet import QuietMarker, is_quiet, quiet_path
from ouroactors.runtime.coordinator.wake import WakeReader, WakeWriter
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, session_config, stream, wait_for

HOUR = 3600.0


def test_the_marker_is_a_private_file_made_and_removed_on_request(tmp_path: Path) -> None:
    marker = QuietMarker.fresh(tmp_path, "s1")
    assert marker.want(True) and not marker.quiet and not is_quiet(marker.path)  # wanted already: nothing made
    assert marker.want(False) and marker.quiet and is_quiet(marker.path)
    info = os.lstat(marker.path)
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(marker.path.parent).st_mode) == 0o700
    assert marker.want(False)  # idempotent
    assert marker.want(True) and not marker.path.exists()
    marker.want(False)
    marker.close()
    assert not marker.path.exists()


def test_a_session_id_with_dots_never_names_another_session_s_fifo(tmp_path: Path) -> None:
    reader = WakeReader.open(tmp_path, "s1.quiet")  # a session whose id ends the way a marker name might
    assert reader is not None
    marker = QuietMarker.fresh(tmp_path, "s1")
    try:
        assert marker.want(False)
        assert stat.S_ISFIFO(os.lstat(reader.path).st_mode)  # its FIFO untouched
        assert marker.path.parent != reader.path.parent
    finally:
        marker.close()
        reader.close()


def test_a_new_incarnation_removes_what_a_dead_one_left(tmp_path: Path) -> None:
    dead = QuietMarker.fresh(tmp_path, "s1")
    assert dead.want(False)  # and then its process was killed: no close
    assert is_quiet(quiet_path(tmp_path, "s1"))
    QuietMarker.fresh(tmp_path, "s1")
    assert not is_quiet(quiet_path(tmp_path, "s1"))


def test_another_incarnation_s_marker_is_neither_removed_nor_overruled(tmp_path: Path) -> None:
    old = QuietMarker.fresh(tmp_path, "s1")
    assert old.want(False)
    new = QuietMarker.fresh(tmp_path, "s1")
    assert new.want(False)
    assert not old.want(True)  # not its marker: it cannot promise wake-ups (its follower goes to the directory)
    old.close()
    assert is_quiet(new.path)  # the later incarnation's marker stays
    new.close()
    assert not new.path.exists()


def test_wake_ups_are_not_promised_while_another_incarnation_s_marker_is_there(tmp_path: Path) -> None:
    ours = QuietMarker.fresh(tmp_path, "s1")
    other = QuietMarker(quiet_path(tmp_path, "s1"))  # one that made its marker after ours started
    assert other.want(False)
    assert not ours.want(True)  # a follower would not be woken for: the loan is declined (the directory answers)
    other.close()
    assert ours.want(True)


def test_anything_but_a_regular_file_of_ours_is_no_marker(tmp_path: Path) -> None:
    path = quiet_path(tmp_path, "s1")
    path.parent.mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    target.write_text("")
    path.symlink_to(target)
    assert not is_quiet(path)
    path.unlink()
    os.mkfifo(path, 0o600)
    assert not is_quiet(path)
    path.unlink()
    path.mkdir()
    assert not is_quiet(path)


def test_a_marker_that_cannot_be_made_leaves_wake_ups_on(tmp_path: Path) -> None:
    (tmp_path / "wake.quiet").write_text("not a directory")
    marker = QuietMarker.fresh(tmp_path, "s1")
    assert not marker.want(False) and not marker.quiet
    assert marker.want(True)


@pytest.mark.parametrize(("marked", "unacked", "woken"), [
    (False, 0, True),  # no marker: every commit wakes the coordinator
    (True, 0, False),  # quiet and nothing to ack
    (True, 127, False),
    (True, 128, True),  # acks due: woken even though quiet (the runtime's buffer must not fill)
])
def test_the_runtime_wakes_a_quiet_coordinator_only_when_acks_are_due(tmp_path: Path, marked: bool, unacked: int,
                                                                     woken: bool) -> None:
    reader = WakeReader.open(tmp_path, "s1")
    assert reader is not None
    marker = QuietMarker.fresh(tmp_path, "s1")
    writer = WakeWriter(tmp_path, "s1", unacked=lambda cursor: unacked, ack_every=128)
    try:
        if marked:
            assert marker.want(False)
        assert writer.wake(5)  # told, either way: the runtime pushes nothing
        assert reader.drain() is woken
        assert writer.skipped == (0 if woken else 1)
    finally:
        writer.close()
        marker.close()
        reader.close()


def test_a_marker_with_no_coordinator_reading_its_fifo_is_ignored(tmp_path: Path) -> None:
    """A killed coordinator's marker, or a data dir reopened on the in-process base (no FIFO): the runtime must
    push its events, not take the marker for a coordinator that needs nothing."""
    marker = QuietMarker.fresh(tmp_path, "s1")
    assert marker.want(False)  # and no WakeReader: nobody reads the session's FIFO
    writer = WakeWriter(tmp_path, "s1", unacked=lambda cursor: 0, ack_every=128)
    try:
        assert not writer.wake(5)  # no reader to wake: the runtime pushes instead
        assert writer.skipped == 0
        reader = WakeReader.open(tmp_path, "s1")  # a coordinator comes: now the marker is its word
        assert reader is not None
        try:
            assert writer.wake(6) and writer.skipped == 1 and not reader.drain()
        finally:
            reader.close()
    finally:
        writer.close()
        marker.close()


def test_a_runtime_that_does_not_count_acks_always_wakes(tmp_path: Path) -> None:
    reader = WakeReader.open(tmp_path, "s1")
    assert reader is not None
    marker = QuietMarker.fresh(tmp_path, "s1")
    writer = WakeWriter(tmp_path, "s1")
    try:
        assert marker.want(False)
        assert writer.wake(5) and reader.drain() and reader.vouched == 5
    finally:
        writer.close()
        marker.close()
        reader.close()


# -- real processes ------------------------------------------------------------------------------------------


def _tool_script(path: Path, calls: int) -> Path:
    turns = "".join(f'[[turns]]\nevents = [{{ kind = "tool_call", id = "c{i}", name = "shell", '
                    f'arguments = {{ command = "grep -c x /dev/null" }} }}]\n\n' for i in range(calls))
    path.write_text(turns + '[[turns]]\nevents = [{ kind = "text", text = "done" }]\n')
    return path


def _marks(path: Path, name: str) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.split()[2] == name) if path.exists() else 0


@pytest.mark.multiproc
def test_nobody_following_a_tool_turn_leaves_its_coordinator_asleep(actor_system_factory, monkeypatch,
                                                                    tmp_path: Path) -> None:
    marks = tmp_path / "trace.txt"
    monkeypatch.setattr(trace, "_PATH", str(marks))  # before the system forks: every process inherits it
    system = actor_system_factory("multiproc")
    system.start_tree(agent_tree(str(tmp_path)))
    ws = tmp_path / "ws"
    ws.mkdir()
    sessions = Sessions(system, follow_direct=False)
    script = _tool_script(tmp_path / "s.toml", calls=6)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "go", last=True)
    wait_for("the session completed", lambda: sessions.show("s1").state == "completed")
    assert _marks(marks, "carried_commit") >= 12  # the runtime carried its events in its own commits ...
    assert _marks(marks, "wake_rx") == 0  # ... and woke nobody for them
    events = list(sessions.events("s1"))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))
    assert [e.kind for e in events].count("tool_result") == 6 and events[-1].kind == "turn_settled"


@pytest.mark.multiproc
def test_a_follower_lent_mid_session_is_served_at_each_carried_commit(actor_system_factory, monkeypatch,
                                                                      tmp_path: Path) -> None:
    # only the coordinator's wake-ups can serve the stream: the directory's tick and the coordinator's poll are
    # an hour away, so a skipped wake-up would leave the reader waiting for its deadline
    monkeypatch.setattr(directory, "FOLLOW_TICK_S", HOUR)
    monkeypatch.setattr(actor, "POLL_S", HOUR)
    marks = tmp_path / "trace.txt"
    monkeypatch.setattr(trace, "_PATH", str(marks))
    system = actor_system_factory("multiproc")
    system.start_tree(agent_tree(str(tmp_path)))
    ws = tmp_path / "ws"
    ws.mkdir()
    sessions = Sessions(system, follow_direct=False)
    paced = "".join(f'[[turns]]\npace_ms = 150\nevents = [{{ kind = "tool_call", id = "d{i}", name = "shell", '
                    f'arguments = {{ command = "grep -c x /dev/null" }} }}]\n\n' for i in range(4))
    script = _tool_script(tmp_path / "s.toml", calls=1)  # the first turn; the second's model turns follow it
    script.write_text(script.read_text() + "\n" + paced + '[[turns]]\nevents = [{ kind = "text", text = "end" }]\n')
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "go")  # one turn with nobody following: the coordinator is quiet through it
    wait_for("the first turn settled", lambda: [e.kind for e in sessions.events("s1")].count("turn_settled") == 1)
    assert is_quiet(quiet_path(system.data_dir, "s1"))
    assert _marks(marks, "wake_rx") == 0
    cursor = list(sessions.events("s1"))[-1].cursor
    sessions.send("s1", "again", last=True)
    streams: list[list[EventsRead]] = []
    while not streams or not any(e.kind == "turn_settled" for a in streams[-1] for e in a.events):
        streams.append(stream(system, cursor))
        cursor = max([cursor, *(e.cursor for a in streams[-1] for e in a.events)])
        assert len(streams) < 30, streams
    events = [e for s_ in streams for a in s_ for e in a.events]
    assert [e.kind for e in events].count("tool_result") == 4
    assert len(max(streams, key=len)) >= 3, streams  # one stream was served commit after commit
    assert _marks(marks, "wake_rx") >= 4  # woken by the runtime's commits while it held the follower
