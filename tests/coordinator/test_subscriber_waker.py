"""A committer's kept wake line to a session's subscribers (coordinator.wake.SubscriberWaker).

The waker keeps each subscriber's FIFO open between wake-ups (opening and closing a FIFO each wake its reader) and
lists the directory again only when it changed. These tests hold it to what the one-off wake did: every live
subscriber woken, a dead one removed, nothing else ever written — and to what keeping descriptors adds: a
subscriber that joins in the same clock tick as a listing is not missed, and a descriptor number that no longer
names the FIFO is never written to nor closed.
"""

from __future__ import annotations

import os

import pytest

from ouroactors.runtime.coordinator import wake
from ouroactors.runtime.coordinator.wake import SubscriberWake, SubscriberWaker, subscribers_dir


@pytest.fixture
def opens(monkeypatch) -> list[str]:
    """Every FIFO the waker opened (path)."""
    seen: list[str] = []
    real = wake._open_writer

    def counting(path):
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(wake, "_open_writer", counting)
    return seen


def test_repeated_wake_ups_open_each_fifo_once(tmp_path, opens) -> None:
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    waker = SubscriberWaker(tmp_path, "s1")
    try:
        for cursor in range(1, 11):
            assert waker.wake(cursor) == 1
            assert sub.wait(0) and sub.vouched == cursor
        assert opens == [str(sub.path)]
    finally:
        waker.close()
        sub.close()


def test_a_subscriber_that_joins_later_is_woken(tmp_path) -> None:
    first = SubscriberWake.open(tmp_path, "s1")
    assert first is not None
    waker = SubscriberWaker(tmp_path, "s1")
    second = None
    try:
        assert waker.wake(1) == 1
        second = SubscriberWake.open(tmp_path, "s1")
        assert second is not None
        assert waker.wake(2) == 2 and first.wait(0) and second.wait(0) and second.vouched == 2
    finally:
        waker.close()
        for sub in (first, second):
            if sub is not None:
                sub.close()


def test_a_change_in_the_same_clock_tick_as_the_listing_is_not_missed(tmp_path) -> None:
    """The directory's mtime comes from a coarse clock: a subscriber renamed into place in the tick of the last
    listing can leave it unchanged. The waker lists again while its listing is that recent."""
    first = SubscriberWake.open(tmp_path, "s1")
    assert first is not None
    where = subscribers_dir(tmp_path, "s1")
    waker = SubscriberWaker(tmp_path, "s1")
    second = None
    try:
        assert waker.wake(1) == 1
        before = os.stat(where).st_mtime_ns
        second = SubscriberWake.open(tmp_path, "s1")
        assert second is not None
        os.utime(where, ns=(before, before))  # as if the rename fell in the same tick
        assert waker.wake(2) == 2 and second.wait(0)
    finally:
        waker.close()
        for sub in (first, second):
            if sub is not None:
                sub.close()


def test_an_unchanged_directory_is_not_listed_again(tmp_path, opens, monkeypatch) -> None:
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    where = subscribers_dir(tmp_path, "s1")
    old = os.stat(where).st_mtime_ns - 10 * SubscriberWaker.RACY_NS
    os.utime(where, ns=(old, old))  # changed long before the listing
    listed: list[str] = []
    real = os.listdir
    monkeypatch.setattr(wake.os, "listdir", lambda path: listed.append(str(path)) or real(path))
    waker = SubscriberWaker(tmp_path, "s1")
    try:
        for cursor in range(5):
            assert waker.wake(cursor) == 1
        assert listed == [str(where)]
    finally:
        waker.close()
        sub.close()


def test_a_subscriber_that_died_holding_its_fifo_is_removed(tmp_path) -> None:
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    waker = SubscriberWaker(tmp_path, "s1")
    try:
        assert waker.wake(1) == 1
        sub._close_ends()  # the process died: its ends closed, its FIFO left in place
        assert sub.path.exists()
        assert waker.wake(2) == 0
        assert not sub.path.exists()
    finally:
        waker.close()
        sub.close()


def test_a_subscriber_that_left_closes_the_kept_descriptor(tmp_path) -> None:
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    waker = SubscriberWaker(tmp_path, "s1")
    try:
        assert waker.wake(1) == 1
        (fd, _), = waker._lines.values()
        sub.close()  # removes its FIFO and, the last one, the directory
        assert waker.wake(2) == 0
        assert not waker._lines
        with pytest.raises(OSError):
            os.fstat(fd)  # closed, not leaked
    finally:
        waker.close()


def test_a_reused_descriptor_number_is_never_written_nor_closed(tmp_path) -> None:
    """Should the kept descriptor be closed behind the waker's back and its number reused (say by an LMDB file),
    a wake-up must not write 8 bytes into that file, nor close it."""
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    waker = SubscriberWaker(tmp_path, "s1")
    precious = tmp_path / "data.mdb"
    precious.write_bytes(b"")
    reused = -1
    try:
        assert waker.wake(1) == 1 and sub.wait(0)
        (fd, _), = waker._lines.values()
        os.close(fd)
        reused = os.open(precious, os.O_RDWR)
        assert reused == fd  # the lowest free number: the same one
        assert waker.wake(2) == 1  # the FIFO opened afresh (the directory listed again), not the file
        assert precious.read_bytes() == b""
        os.fstat(reused)  # still open: the waker did not close what is not its own
        assert sub.wait(0) and sub.vouched == 2
    finally:
        waker.close()
        sub.close()
        if reused >= 0:
            os.close(reused)


def test_a_forked_child_uses_descriptors_of_its_own(tmp_path) -> None:
    sub = SubscriberWake.open(tmp_path, "s1")
    assert sub is not None
    waker = SubscriberWaker(tmp_path, "s1")
    try:
        assert waker.wake(1) == 1 and sub.wait(0)
        pid = os.fork()
        if pid == 0:  # the child: the parent's kept descriptors are forgotten, the FIFO opened again
            try:
                os._exit(0 if waker.wake(5) == 1 and len(waker._lines) == 1 else 3)
            except BaseException:
                os._exit(4)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert sub.wait(0) and sub.vouched == 5
        assert waker.wake(6) == 1  # the parent's line still works
    finally:
        waker.close()
        sub.close()
