"""Black-box tests of ouroactors.supervision.events: the JSON-lines event log."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from ouroactors.supervision import reasons
from ouroactors.supervision.events import Event, EventReader, EventWriter


def _writer(path: Path, supervisor: str = "root", epoch: int = 3, node: str = "n1") -> EventWriter:
    return EventWriter(str(path), supervisor, epoch, node)


def test_round_trip_of_one_event(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    writer = _writer(log)
    reason = reasons.crash_of("E", "m", "d").to_json()
    writer.write("exited", "worker", {"reason": reason, "generation": 7, "incarnation": 2})
    writer.close()
    [event] = EventReader(str(log)).all()
    assert event.kind == "exited"
    assert event.child == "worker"
    assert event.path == "root/worker"
    assert event.supervisor == "root"
    assert (event.epoch, event.node) == (3, "n1")
    assert event.reason == reason
    assert event.generation == 7
    assert event.fields == {"reason": reason, "generation": 7, "incarnation": 2}
    assert isinstance(event.time_ns, int) and event.time_ns > 0


def test_an_event_about_the_supervisor_itself_has_its_path(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    writer = _writer(log, supervisor="root/sub")
    writer.write("supervisor_started", None, {})
    writer.close()
    [event] = EventReader(str(log)).all()
    assert (event.path, event.child, event.reason, event.generation) == ("root/sub", None, None, None)


def test_event_json_round_trip_and_defaults() -> None:
    event = Event("started", "r/a", "r", "a", 123, 4, "n", {"pid": 9})
    assert Event.from_json(json.loads(json.dumps(event.to_json()))) == event
    old = {"kind": "k", "path": "r", "supervisor": "r", "time_ns": 1}  # written before epoch/node existed
    parsed = Event.from_json(old)
    assert (parsed.child, parsed.epoch, parsed.node, parsed.fields) == (None, 0, "local", {})


def test_one_line_per_event_and_values_that_are_not_json_become_text(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    writer = _writer(log)
    writer.write("started", "a", {"address": object(), "note": "line\nbreak"})
    writer.write("started", "b", {})
    writer.close()
    lines = log.read_bytes().split(b"\n")
    assert len(lines) == 3 and lines[-1] == b""
    first, second = EventReader(str(log)).all()
    assert isinstance(first.fields["address"], str)
    assert first.fields["note"] == "line\nbreak"
    assert second.child == "b"


def test_writer_appends_to_an_existing_log(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    for child in ("a", "b"):
        writer = _writer(log)
        writer.write("started", child, {})
        writer.close()
    assert [e.child for e in EventReader(str(log)).all()] == ["a", "b"]


def test_close_twice_is_harmless(tmp_path: Path) -> None:
    writer = _writer(tmp_path / "events.jsonl")
    writer.close()
    writer.close()


def test_reader_of_a_missing_file_sees_nothing(tmp_path: Path) -> None:
    reader = EventReader(str(tmp_path / "nope.jsonl"))
    assert reader.poll() == []
    assert reader.all() == []


def test_poll_returns_only_new_events(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    writer = _writer(log)
    reader = EventReader(str(log))
    writer.write("started", "a", {})
    assert [e.child for e in reader.poll()] == ["a"]
    assert reader.poll() == []
    writer.write("started", "b", {})
    writer.write("started", "c", {})
    assert [e.child for e in reader.poll()] == ["b", "c"]
    assert [e.child for e in reader.all()] == ["a", "b", "c"]
    writer.close()


def test_a_partial_line_is_held_back_until_it_is_complete(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    line = json.dumps(Event("exited", "r/a", "r", "a", 5, 1, "n", {"x": 1}).to_json()).encode() + b"\n"
    reader = EventReader(str(log))
    with open(log, "ab") as handle:
        for cut in (1, len(line) // 2, len(line) - 1):
            handle.seek(0, os.SEEK_END)
            written = handle.tell()
            handle.write(line[written:cut])
            handle.flush()
            assert reader.poll() == []
        handle.write(line[len(line) - 1 :])
        handle.flush()
    [event] = reader.poll()
    assert event.child == "a" and event.fields == {"x": 1}
    assert reader.poll() == []


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"\n\n")
    writer = _writer(log)
    writer.write("started", "a", {})
    writer.close()
    assert [e.child for e in EventReader(str(log)).all()] == ["a"]


def test_wait_for_finds_an_event_and_respects_after(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    writer = _writer(log)
    writer.write("started", "a", {})
    writer.write("started", "b", {})
    reader = EventReader(str(log))
    assert reader.wait_for(lambda e: e.kind == "started", timeout=1).child == "a"
    assert reader.wait_for(lambda e: e.kind == "started", timeout=1, after=1).child == "b"
    writer.close()


def test_wait_for_sees_events_written_while_it_waits(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    writer = _writer(log)
    reader = EventReader(str(log))
    calls: list[float] = []

    def idle(delay: float) -> None:  # the "world" moves on while the reader idles
        calls.append(delay)
        if len(calls) == 3:
            writer.write("escalated", "a", {})

    event = reader.wait_for(lambda e: e.kind == "escalated", timeout=5, idle=idle)
    assert event.child == "a"
    assert len(calls) == 3
    assert calls == sorted(calls)  # the polling interval backs off
    writer.close()


def test_wait_for_times_out_naming_the_file(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    _writer(log).write("started", "a", {})
    with pytest.raises(TimeoutError, match=r"events\.jsonl"):
        EventReader(str(log)).wait_for(lambda e: e.kind == "never", timeout=0.05)


def test_follow_yields_events_until_stopped(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    writer = _writer(log)
    for child in ("a", "b", "c"):
        writer.write("started", child, {})
    seen: list[str | None] = []
    for event in EventReader(str(log)).follow(stop=lambda: len(seen) >= 3, interval=0.001):
        seen.append(event.child)
    assert seen == ["a", "b", "c"]
    writer.close()


def _write_many(path: str, name: str, count: int, pad: int) -> None:
    writer = EventWriter(path, name, 1, name)
    for seq in range(count):
        writer.write("tick", "c", {"seq": seq, "pad": "x" * pad})
    writer.close()


@pytest.mark.parametrize("pad", [10, 3000])
def test_two_writers_in_two_processes_interleave_whole_lines(tmp_path: Path, pad: int) -> None:
    log = str(tmp_path / "events.jsonl")
    context = multiprocessing.get_context("fork")
    count = 400
    procs = [context.Process(target=_write_many, args=(log, name, count, pad)) for name in ("w1", "w2")]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    raw = Path(log).read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == 2 * count
    parsed: list[dict[str, Any]] = [json.loads(line) for line in lines]  # every line is whole JSON
    events = EventReader(log).all()
    assert len(events) == 2 * count
    for name in ("w1", "w2"):
        mine = [e.fields["seq"] for e in events if e.supervisor == name]
        assert mine == list(range(count))  # each writer's lines in its own order
    assert all(len(p["pad"]) == pad for p in parsed)


@pytest.mark.parametrize("bad", [b'{"kind":"tru', b"not json", b"5", b'{"no":"kind"}', b"\xff\xfe"])
def test_a_corrupt_line_is_skipped_and_kept_without_losing_the_events_around_it(
    tmp_path: Path, bad: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "events.jsonl"
    writer = _writer(log)
    writer.write("started", "a", {})
    with open(log, "ab") as handle:
        handle.write(bad + b"\n")
    writer.write("started", "b", {})
    reader = EventReader(str(log))
    with caplog.at_level("WARNING", logger="ouroactors.events"):
        assert [e.child for e in reader.poll()] == ["a", "b"]
    assert reader.corrupt == [bad]
    assert "events.jsonl" in caplog.text
    writer.write("started", "c", {})
    writer.close()
    assert [e.child for e in reader.poll()] == ["c"]
