"""Black-box tests of ouroactors.supervision.generations on a real temporary directory."""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.core import clock
from ouroactors.core.clock import VirtualClock
from ouroactors.core.errors import StaleGeneration
from ouroactors.supervision.generations import (
    EPOCH_FILE,
    bump_node_epoch,
    check_stamp,
    epoch_of,
    generation_source,
)

# -- node epoch -------------------------------------------------------------------------------------


def test_bump_node_epoch_counts_from_one_and_persists(tmp_path: Path) -> None:
    assert [bump_node_epoch(tmp_path) for _ in range(3)] == [1, 2, 3]
    assert (tmp_path / EPOCH_FILE).read_text() == "3\n"
    assert bump_node_epoch(str(tmp_path)) == 4  # str paths work too


def test_bump_node_epoch_creates_the_directory(tmp_path: Path) -> None:
    data = tmp_path / "a" / "b"
    assert bump_node_epoch(data) == 1
    assert (data / EPOCH_FILE).is_file()


def test_bump_node_epoch_continues_from_the_stored_value(tmp_path: Path) -> None:
    (tmp_path / EPOCH_FILE).write_text("41\n")
    assert bump_node_epoch(tmp_path) == 42


def test_bump_node_epoch_leaves_no_temporary_file(tmp_path: Path) -> None:
    bump_node_epoch(tmp_path)
    bump_node_epoch(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [EPOCH_FILE]


@pytest.mark.parametrize("content", ["", "\n", "abc", "-1", "1.5", "0x10", "7 8", "²", "١٢"])
def test_bump_node_epoch_refuses_a_corrupt_file_and_leaves_it_alone(tmp_path: Path, content: str) -> None:
    path = tmp_path / EPOCH_FILE
    path.write_text(content)
    with pytest.raises(ValueError, match="corrupt node epoch") as info:
        bump_node_epoch(tmp_path)
    assert str(path) in str(info.value)
    assert path.read_text() == content  # fail closed: never silently reset to 0


def test_bump_node_epoch_refuses_undecodable_bytes_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / EPOCH_FILE
    path.write_bytes(b"\xff\xfe1\n")
    with pytest.raises(ValueError, match="corrupt node epoch") as info:
        bump_node_epoch(tmp_path)
    assert str(path) in str(info.value)
    assert path.read_bytes() == b"\xff\xfe1\n"


# -- generation source -------------------------------------------------------------------------------


def test_generation_source_is_strictly_increasing_per_child() -> None:
    source = generation_source(1, time.monotonic_ns())
    previous = None
    for _ in range(2000):  # many starts fall into the same microsecond
        generation = source(previous)
        assert previous is None or generation > previous
        previous = generation


def test_generation_source_with_a_frozen_clock_still_increases(monkeypatch: pytest.MonkeyPatch) -> None:
    frozen = VirtualClock()
    frozen.advance(5_000_000)
    monkeypatch.setattr(clock, "_current", frozen)
    source = generation_source(3, 0)
    first = source(None)
    assert first == (3 << 48) | 5000
    assert source(first) == first + 1
    assert source(first + 1) == first + 2
    assert source(None) == first  # another child in the same microsecond may share a number


def test_generation_source_epoch_is_in_the_high_bits() -> None:
    for epoch in (1, 2, 7, 1000):
        assert epoch_of(generation_source(epoch, time.monotonic_ns())(None)) == epoch


def test_a_later_epochs_generations_are_larger_than_an_earlier_epochs() -> None:
    # The earlier run has been up a long time (its clock origin is far in the past); the later run
    # has just started. Every generation of the later run is still larger.
    earlier = generation_source(1, time.monotonic_ns() - 3600 * 10**9 * 24 * 365)
    later = generation_source(2, time.monotonic_ns())
    old = earlier(None)
    new = later(None)
    assert new > old
    assert later(old) > old


@given(st.integers(min_value=1, max_value=2**15), st.integers(min_value=0, max_value=2**48 - 1))
def test_epoch_of_inverts_the_layout(epoch: int, micros: int) -> None:
    assert epoch_of((epoch << 48) | micros) == epoch


def test_generation_source_clamps_before_the_origin(monkeypatch: pytest.MonkeyPatch) -> None:
    early = VirtualClock()
    early.advance(1000)
    monkeypatch.setattr(clock, "_current", early)
    assert generation_source(1, 10**12)(None) == 1 << 48


# -- stamps -----------------------------------------------------------------------------------------


def test_check_stamp_accepts_the_current_generation() -> None:
    check_stamp("storage", 17, 17)


@pytest.mark.parametrize(("current", "stamp"), [(17, 16), (17, 18), (17, None), (None, 17), (None, None)])
def test_check_stamp_refuses_any_other_stamp(current: int | None, stamp: int | None) -> None:
    with pytest.raises(StaleGeneration) as info:
        check_stamp("storage", current, stamp)
    error = info.value
    assert (error.authority, error.expected, error.got) == ("storage", current, stamp)
    assert "storage" in str(error)


def test_stale_generation_pickles_with_its_fields() -> None:
    error = pickle.loads(pickle.dumps(StaleGeneration("grants", 3, 2)))
    assert (error.authority, error.expected, error.got) == ("grants", 3, 2)


def test_epoch_file_name_is_stable() -> None:
    # The file lives in user data directories: renaming it would silently restart epochs at 1.
    assert EPOCH_FILE == "node.epoch"
    assert os.sep not in EPOCH_FILE
