"""The runtime → coordinator wake-up line (coordinator.wake) on real FIFOs in a data dir."""

from __future__ import annotations

import os
import stat

from ouroactors.runtime.coordinator.wake import WakeReader, WakeWriter, wake_path


def test_a_wake_reaches_the_reader_once(tmp_path) -> None:
    reader = WakeReader.open(tmp_path, "s1")
    assert reader is not None
    info = os.stat(reader.path)
    assert stat.S_ISFIFO(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(reader.path.parent).st_mode) == 0o700
    writer = WakeWriter(tmp_path, "s1")
    assert not reader.drain()  # nothing written yet
    assert writer.wake() and writer.wake()
    assert reader.drain() and not reader.drain()  # both bytes read at once
    writer.close()
    reader.close()
    assert not reader.path.exists()


def test_without_a_reader_the_writer_says_so_and_the_runtime_pushes_instead(tmp_path) -> None:
    assert not WakeWriter(tmp_path, "s1").wake()  # no FIFO at all
    os.makedirs(wake_path(tmp_path, "s1").parent, mode=0o700)
    os.mkfifo(wake_path(tmp_path, "s1"), 0o600)
    assert not WakeWriter(tmp_path, "s1").wake()  # a FIFO nobody reads (ENXIO), not a hang


def test_a_new_incarnation_s_fifo_is_found_after_the_old_reader_went_away(tmp_path) -> None:
    first = WakeReader.open(tmp_path, "s1")
    writer = WakeWriter(tmp_path, "s1")
    assert first is not None and writer.wake() and first.drain()
    second = WakeReader.open(tmp_path, "s1")  # a new coordinator of the session: a fresh FIFO at the path
    assert second is not None
    first.close()  # the old one ends: it must not remove the new one's FIFO
    assert second.path.exists()
    assert writer.wake()  # EPIPE on the old FIFO, then the path is opened again
    assert second.drain()
    writer.close()
    second.close()


def test_a_link_or_a_plain_file_at_the_path_is_never_written(tmp_path) -> None:
    path = wake_path(tmp_path, "s1")
    os.makedirs(path.parent, mode=0o700)
    target = tmp_path / "precious"
    target.write_text("keep")
    path.symlink_to(target)
    assert not WakeWriter(tmp_path, "s1").wake()  # O_NOFOLLOW: a link is not followed
    path.unlink()
    path.write_text("")
    assert not WakeWriter(tmp_path, "s1").wake()  # not a FIFO: closed untouched
    assert target.read_text() == "keep" and path.read_text() == ""


def test_a_full_fifo_is_still_a_wake(tmp_path) -> None:
    reader = WakeReader.open(tmp_path, "s1")
    writer = WakeWriter(tmp_path, "s1")
    assert reader is not None
    assert all(writer.wake() for _ in range(70_000))  # beyond the pipe's 64 KiB: EAGAIN is a wake all the same
    assert reader.drain()
    writer.close()
    reader.close()


def test_the_coordinator_hears_the_cursor_the_runtime_s_commit_made_durable(tmp_path) -> None:
    reader = WakeReader.open(tmp_path, "s1")
    writer = WakeWriter(tmp_path, "s1")
    assert reader is not None
    try:
        assert writer.wake(12) and writer.wake(5)
        assert reader.drain() and reader.vouched == 12  # the highest; an older wake-up never lowers it
    finally:
        writer.close()
        reader.close()
