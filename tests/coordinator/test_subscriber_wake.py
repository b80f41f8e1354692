"""Wake-ups for subscribers that read the log themselves (coordinator.wake: SubscriberWake, wake_subscribers)."""

from __future__ import annotations

import os
import stat

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
