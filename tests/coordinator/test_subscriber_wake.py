"""Wake-ups for subscribers that read the log themselves (coordinator.wake: SubscriberWake, wake_subscribers)."""

from __future__ import annotations

import os
import stat

from ouroactors.runtime.coordinator import wake
from ouroactors.runtime.coordinator.wake import SubscriberWake, WakeWriter, subscribers_dir, wake_subscribers


def test_every_subscriber_of_the_session_is_woken_and_no_other(tmp_path) -> None:
    a, b = SubscriberWake.open(tmp_path, "s1"), SubscriberWake.open(tmp_path, "s1")
    other = SubscriberWake.open(tmp_path, "s2")
    assert a is not None and b is not None and other is not None
    info = os.stat(a.path)
    assert stat.S_ISFIFO(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(a.path.parent).st_mode) == 0o700
    assert not a.wait(0)  # nothing yet
    assert wake_subscribers(tmp_path, "s1") == 2
    assert a.wait(0) and b.wait(0) and not other.wait(0)
    assert not a.wait(0)  # taken once
    for w in (a, b, other):
        w.close()
    assert not a.path.exists() and not subscribers_dir(tmp_path, "s1").exists()  # the last one removes the dir


def test_the_runtime_s_wake_line_wakes_subscribers_even_without_a_coordinator(tmp_path) -> None:
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    assert not WakeWriter(tmp_path, "s1").wake()  # no coordinator's FIFO: the runtime pushes instead ...
    assert sub.wait(0)  # ... and the subscriber heard of the commit all the same
    sub.close()


def test_a_dead_subscriber_s_fifo_is_removed_and_one_being_made_is_left_alone(tmp_path) -> None:
    where = subscribers_dir(tmp_path, "s1")
    where.mkdir(parents=True, mode=0o700)
    os.mkfifo(where / "gone", 0o600)  # its reader died: nobody has it open
    os.mkfifo(where / ".making", 0o600)  # a subscriber between mkfifo and rename
    assert wake_subscribers(tmp_path, "s1") == 0
    assert not (where / "gone").exists() and (where / ".making").exists()


def test_a_link_or_a_plain_file_among_the_fifos_is_never_written_nor_removed(tmp_path) -> None:
    where = subscribers_dir(tmp_path, "s1")
    where.mkdir(parents=True, mode=0o700)
    target = tmp_path / "precious"
    target.write_text("keep")
    (where / "link").symlink_to(target)
    (where / "plain").write_text("")
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    assert wake_subscribers(tmp_path, "s1") == 1  # only the real subscriber
    assert target.read_text() == "keep" and (where / "plain").read_text() == ""
    assert (where / "link").is_symlink() and (where / "plain").exists()
    sub.close()


def test_no_subscriber_directory_costs_nothing_and_a_bad_id_is_refused_quietly(tmp_path) -> None:
    assert wake_subscribers(tmp_path, "nobody") == 0
    assert wake_subscribers(tmp_path, "../escape") == 0  # not an id: nothing is touched
    assert not (tmp_path.parent / "escape").exists()


def test_a_session_id_with_dots_cannot_reach_another_session_s_fifos(tmp_path) -> None:
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    assert wake_subscribers(tmp_path, "s1.subs") == 0 and not sub.wait(0)
    sub.close()


def test_a_wake_up_carries_the_cursor_its_commit_made_durable(tmp_path):
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    try:
        assert wake_subscribers(tmp_path, "s1", 7) == 1 and wake_subscribers(tmp_path, "s1", 3) == 1
        assert sub.wait(0) and sub.vouched == 7  # the highest: an older wake-up never lowers it
        fd = os.open(sub.path, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"\x00\x01")  # a stray tail is no cursor
        finally:
            os.close(fd)
        assert sub.wait(0) and sub.vouched == 7
        assert wake_subscribers(tmp_path, "s1", -5) == 1 and sub.wait(0) and sub.vouched == 7  # clamped to 0
        assert wake_subscribers(tmp_path, "s1", 2**80) == 1 and sub.wait(0) and sub.vouched == 2**64 - 1  # no raise
    finally:
        sub.close()


# -- the runtime's wake line keeps its subscribers' FIFOs open (wake._Fanout) ---------------------------------------

def _age(where, seconds: float = 3600) -> None:
    """Make the directory's modification time old: a listing of it can be trusted until it changes."""
    old = os.stat(where).st_mtime_ns - int(seconds * 1e9)
    os.utime(where, ns=(old, old))


def test_the_wake_line_lists_an_unchanged_directory_once_and_still_wakes_everyone(tmp_path, monkeypatch) -> None:
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    _age(sub.path.parent)
    listed: list[str] = []
    real = os.listdir
    monkeypatch.setattr(wake.os, "listdir", lambda path: listed.append(str(path)) or real(path))
    line = WakeWriter(tmp_path, "s1")
    try:
        for cursor in (1, 2, 3):
            line.wake(cursor)
            assert sub.wait(0) and sub.vouched == cursor
        assert len(listed) == 1  # one listing, trusted: the directory has not changed since
        late = SubscriberWake.open(tmp_path, "s1")  # the directory changes: listed again, the newcomer woken
        assert late is not None
        line.wake(4)
        assert late.wait(0) and late.vouched == 4 and sub.wait(0) and len(listed) == 2
        late.close()
    finally:
        line.close()
        sub.close()


def test_a_listing_taken_in_the_directory_s_last_clock_tick_is_not_trusted(tmp_path) -> None:
    """A change in the same coarse tick leaves the modification time as it was: such a listing is taken again."""
    first = SubscriberWake.open(tmp_path, "s1")
    assert first is not None
    where = first.path.parent
    line = WakeWriter(tmp_path, "s1")
    try:
        line.wake(1)  # listed now: the directory's time is fresh
        tick = os.stat(where).st_mtime_ns
        second = SubscriberWake.open(tmp_path, "s1")
        assert second is not None
        os.utime(where, ns=(tick, tick))  # ... as if the second one had come within the same tick
        line.wake(2)
        assert second.wait(0) and second.vouched == 2
        second.close()
    finally:
        line.close()
        first.close()


def test_the_wake_line_removes_a_kept_fifo_whose_subscriber_died(tmp_path) -> None:
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    _age(sub.path.parent)
    line = WakeWriter(tmp_path, "s1")
    try:
        line.wake(1)
        path = sub.path
        sub._close_ends()  # the subscriber dies: its FIFO stays, nobody reads it
        mtime = os.stat(path.parent).st_mtime_ns
        line.wake(2)  # the kept end finds no reader (EPIPE): closed, and the FIFO removed
        assert not path.exists()
        assert os.stat(path.parent).st_mtime_ns >= mtime
    finally:
        line.close()


def test_the_wake_line_lets_go_of_a_closed_subscriber_and_of_a_removed_directory(tmp_path) -> None:
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    line = WakeWriter(tmp_path, "s1")
    try:
        line.wake(1)
        assert sub.wait(0) and len(line._subscribers._fds) == 1
        sub.close()  # the last subscriber: its FIFO and the directory go
        line.wake(2)
        assert line._subscribers._fds == {}
    finally:
        line.close()
