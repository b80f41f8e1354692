"""bench_peers skips a peer that is not installed, with the reason, instead of failing (no bench extra needed)."""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks import bench_peers


def test_a_peer_whose_module_is_missing_is_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name.startswith("langgraph") else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    why = bench_peers.missing("langgraph")
    assert why is not None
    assert "langgraph is not installed" in why and "[bench]" in why


def test_a_peer_whose_modules_are_all_found_is_not_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: object())
    assert bench_peers.missing("dbos") is None


def test_a_parent_package_that_is_missing_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    def find_spec(name: str, *args: object) -> object:
        raise ModuleNotFoundError(name)  # what find_spec("a.b") raises when "a" is not installed

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert bench_peers.missing("langgraph") == "langgraph is not installed (pip install -e '.[bench]')"
