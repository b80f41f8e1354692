"""What a re-run turn reports for a call the ledger holds: the recorded result of the run (replayed), else the
ledger's status in words — ok stays ok, failed stays failed, an unsettled effect is unknown; never a failure that
did not happen."""

from __future__ import annotations

import pytest

from ouroactors.runtime.execution.loop_ports import ToolResult
from ouroactors.runtime.execution.recorded import report

EFFECT = "s1/t1/c1"


def test_the_recorded_result_is_replayed_as_it_was() -> None:
    ran = ToolResult("c1", "read", "ok", "# Notes\n", evidence={"effect_id": EFFECT, "bytes": 8})
    again = report("c1", "read", EFFECT, "ok", ran)
    assert (again.status, again.output, again.error) == ("ok", "# Notes\n", None)
    assert again.evidence == {"effect_id": EFFECT, "bytes": 8, "ran": False, "ledger": "ok", "replayed": True}


@pytest.mark.parametrize(("status", "reported"), [("ok", "ok"), ("failed", "failed"), ("denied", "denied"),
                                                  ("started", "unknown"), ("ambiguous", "unknown")])
def test_without_a_recorded_result_the_ledgers_status_is_reported(status: str, reported: str) -> None:
    again = report("c1", "shell", EFFECT, status, None, "operator:root", "demo.log says done")
    assert again.status == reported and again.evidence == {"ran": False, "effect_id": EFFECT, "ledger": status}
    text = again.output if reported == "ok" else again.error or ""
    assert "not run again" in text or "not asked again" in text
    if status in ("ok", "failed"):
        assert "operator:root" in text and "demo.log says done" in text  # who settled it, and why


def test_a_recorded_result_that_disagrees_with_the_ledger_is_not_replayed() -> None:
    # the runtime saw the command fail, an operator who looked at the world settled it ok: the ledger wins
    ran = ToolResult("c1", "shell", "failed", error="killed", evidence={"effect_id": EFFECT})
    again = report("c1", "shell", EFFECT, "ok", ran, "operator:root")
    assert again.status == "ok" and "replayed" not in again.evidence and "operator:root" in again.output


def test_the_journal_lookup_finds_the_last_result_of_that_effect(tmp_path) -> None:
    from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
    from ouroactors.runtime.execution.journal import Journal
    from ouroactors.runtime.execution.recorded import recorded_result

    config = StorageConfig.under(tmp_path)
    journal = Journal(open_env(config), "s1")
    try:
        journal.stage("session_opened", {"version": 1}, at=1)
        for at, (effect, output) in enumerate([("s1/t1/c1", "first"), ("s1/t1/c2", "other"),
                                               ("s1/t1/c1", "again")], start=2):
            result = ToolResult("c1", "read", "ok", output, evidence={"effect_id": effect})
            journal.stage("tool_result", result.fields(), turn=1, at=at)
        assert journal.flush().committed
        found = recorded_result(journal, "s1/t1/c1")
        assert found is not None and found.output == "again"  # the latest run of that effect
        assert recorded_result(journal, "s1/t9/c1") is None and recorded_result(None, "s1/t1/c1") is None
    finally:
        close_env(config)


def test_a_recorded_result_whose_output_the_journal_kept_as_a_blob_is_read_back_whole(tmp_path) -> None:
    """A tool output too large to keep inline (a shell command's 64 KiB) is a blob reference in its record. The
    re-run of a turn (after an approval wait, or a crash) took the reference dict for the output, and the runtime
    crashed on it at every attempt, so the session could never go on. A blob that is gone makes the output
    unavailable (no recorded result), never a reference passed off as output."""
    from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
    from ouroactors.runtime.execution import blobs
    from ouroactors.runtime.execution.journal import Journal
    from ouroactors.runtime.execution.recorded import recorded_result

    config = StorageConfig.under(tmp_path)
    env = open_env(config)
    journal = Journal(env, "s1")
    big = "y\n" * 40_000
    try:
        journal.stage("session_opened", {"version": 1}, at=1)
        result = ToolResult("c4", "shell", "ok", big, truncated=True, evidence={"effect_id": "s1/t1/c4"},
                            boundary="b" * 1500)
        journal.stage("tool_result", result.fields(), turn=1, at=2)
        long_id = "s1/t1/" + "c" * 300  # evidence too large to stay inline: a blob as well
        journal.stage("tool_result", ToolResult(long_id[6:], "shell", "ok", big, evidence={"effect_id": long_id,
                                                                                          "note": "x" * 300}).fields(),
                      turn=1, at=3)
        assert journal.flush().committed
        found = recorded_result(journal, "s1/t1/c4")
        assert found is not None and found.output == big and found.boundary == "b" * 1500 and found.truncated
        by_long_id = recorded_result(journal, long_id)
        assert by_long_id is not None and by_long_id.output == big and by_long_id.evidence["note"] == "x" * 300
        store = blobs.db(env, blobs.BLOBS_DB)
        with env.begin(write=True) as txn:  # lose the blobs
            txn.drop(store, delete=False)
        assert recorded_result(journal, "s1/t1/c4") is None
    finally:
        close_env(config)
