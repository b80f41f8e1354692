"""The ``file_write`` reconciler settles a lost write by looking at the file the start said it would write."""

from __future__ import annotations

import hashlib
import os

import pytest

from ouroactors.authorities.ledger.domain import StartRequest, decide_ambiguous, decide_start, fingerprint
from ouroactors.authorities.ledger.reconcilers import DEFAULT_RECONCILERS, file_written


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def lost(intent: dict | None):
    """A ``file_write`` entry whose runtime died before settling it (ambiguous, as recovery leaves it)."""
    request = StartRequest(effect_id="s1/t1/c1", kind="file_write", idempotency_key="s1/t1/c1",
                           fingerprint=fingerprint("file_write", {"path": "out.txt"}), principal="s1",
                           session_id="s1", intent=intent)
    started = decide_start(None, request, seq=1, now_ns=1, node="n", kinds=frozenset({"file_write"})).entry
    entry = decide_ambiguous(started, now_ns=2)
    assert entry is not None
    return entry


def test_the_file_holding_the_intended_content_settles_ok(tmp_path):
    path = tmp_path / "out.txt"
    path.write_bytes(b"new")
    verdict = file_written(lost({"path": str(path), "before": sha(b"old"), "after": sha(b"new")}))
    assert verdict is not None and verdict.status == "ok"
    assert verdict.evidence["sha256_now"] == sha(b"new") and "meant to leave" in verdict.evidence["finding"]


@pytest.mark.parametrize("before", [b"old", None])
def test_the_file_as_it_was_before_settles_failed_writing_again_is_safe(tmp_path, before):
    path = tmp_path / "out.txt"
    if before is not None:
        path.write_bytes(before)
    verdict = file_written(lost({"path": str(path), "before": None if before is None else sha(before),
                                 "after": sha(b"new")}))
    assert verdict is not None and verdict.status == "failed"
    assert "writing again is safe" in verdict.evidence["finding"]


def test_anything_else_stays_ambiguous_for_an_operator(tmp_path):
    path = tmp_path / "out.txt"
    path.write_bytes(b"someone else's")
    assert file_written(lost({"path": str(path), "before": sha(b"old"), "after": sha(b"new")})) is None
    path.unlink()  # the file was there before the write and is gone now: neither state
    assert file_written(lost({"path": str(path), "before": sha(b"old"), "after": sha(b"new")})) is None


def test_a_link_a_directory_a_relative_path_or_no_intent_is_never_taken_for_a_finding(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_bytes(b"new")
    link = tmp_path / "out.txt"
    os.symlink(target, link)  # the write never goes through a link: neither does the check
    new = sha(b"new")
    assert file_written(lost({"path": str(link), "before": None, "after": new})) is None
    assert file_written(lost({"path": str(tmp_path), "before": None, "after": new})) is None
    assert file_written(lost({"path": "out.txt", "before": None, "after": new})) is None
    assert file_written(lost({"path": str(target), "before": None})) is None  # nothing to tell apart
    assert file_written(lost({"path": str(target), "before": None, "after": 7})) is None
    assert file_written(lost(None)) is None


def test_every_ledger_has_it_for_file_writes():
    assert DEFAULT_RECONCILERS["file_write"] == "ouroactors.authorities.ledger.reconcilers:file_written"


def test_a_compensation_that_removes_a_created_file_is_settled_by_the_same_check(tmp_path):
    path = tmp_path / "made.txt"
    removal = {"path": str(path), "before": sha(b"x"), "after": None}
    verdict = file_written(lost(removal))
    assert verdict is not None and verdict.status == "ok" and "gone" in verdict.evidence["finding"]
    path.write_bytes(b"x")
    verdict = file_written(lost(removal))
    assert verdict is not None and verdict.status == "failed"
    assert DEFAULT_RECONCILERS["compensation"] == DEFAULT_RECONCILERS["file_write"]
