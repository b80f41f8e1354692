"""A planted *restart* bug — a test-only ledger that presumes unsettled entries failed after its
recovery — is caught by simulated kills in at least a quarter of the seeds (9 of the first 24),
each caught seed replays the same finding, the real ledger passes those seeds, and without kills
nothing catches it.

Before simulated deaths the simple base drew no kills: this ledger passed every simulated seed (the
last test shows it), and multiproc caught it in about 2 seeds of 40.
"""

from __future__ import annotations

import time

import pytest

from ouroactors.faults.chaos import Campaign, SeedResult
from ouroactors.faults.runner import workload_tree
from ouroactors.faults.workload import WorkloadConfig

from .planted_restart import PRESUMED, PRESUMES_FAILED_LEDGER

SEEDS = range(24)
# Four sessions keep several effects between their start and their settlement at any moment
# (about half of 200 seeds catch the bug so; two sessions: about 30 %).
CONFIG = WorkloadConfig(sessions=4, effects=2, ask_timeout=0.4, lease_wait=3.0, op_deadline=10.0)


def caught(result: SeedResult) -> bool:
    """The bug's faces: an entry called failed although the world saw it (invariant 2), or a failed
    where the crash-free run ends ok and the truth was unknown (invariant 7)."""
    return any(v.invariant in ("ambiguous-not-failed", "outcome-diverged") for v in result.violations)


@pytest.mark.slow
def test_simulated_kills_catch_the_planted_restart_bug_in_a_quarter_of_the_seeds(tmp_path, record_property):
    tree = workload_tree(ledger=PRESUMES_FAILED_LEDGER)
    began = time.monotonic()
    with Campaign(tree, CONFIG, base="simple", data_dir=tmp_path / "campaign") as campaign:
        results = list(campaign.run(SEEDS))
    elapsed = time.monotonic() - began
    assert [r.error for r in results if r.error] == []
    catching = [r for r in results if caught(r)]
    rate = len(catching) / len(results)
    print(f"\nplanted restart bug caught by {len(catching)}/{len(results)} simulated seeds ({rate:.0%}), "
          f"{60 * len(results) / elapsed:.0f} seeds/min; seeds {[r.seed for r in catching]}")
    record_property("catch_rate", round(rate, 3))
    assert rate >= 0.25
    assert all(set(r.run.killed) & {"agent/ledger", "agent/storage"} for r in catching if r.run)  # a restart did it
    first = catching[0]
    assert f"[{first.violations[0].invariant}]" in str(first.violations[0])

    with Campaign(tree, CONFIG, base="simple", data_dir=tmp_path / "replay") as replay:  # a fresh system
        again = replay.run_seed(first.seed)
    assert again.plan == first.plan
    assert [str(v).replace(f"seed{first.seed}", "") for v in again.violations] == \
        [str(v).replace(f"seed{first.seed}", "") for v in first.violations]

    with Campaign(workload_tree(), CONFIG, base="simple", data_dir=tmp_path / "real") as real:
        honest = [real.run_seed(r.seed) for r in catching]
    assert [(r.seed, str(v)) for r in honest for v in r.violations] == []
    assert all(r.error is None for r in honest)


def test_without_kills_the_planted_restart_bug_passes_every_simulated_seed(tmp_path):
    """What the simple base did before: storage faults and delays only, so no ledger restarts mid-effect."""
    with Campaign(workload_tree(ledger=PRESUMES_FAILED_LEDGER), CONFIG, base="simple", data_dir=tmp_path) as campaign:
        campaign.kills = False
        results = list(campaign.run(range(10)))
    assert all(rule.action.value != "kill" for r in results for rule in r.plan.rules)
    assert [(r.seed, str(v)) for r in results for v in r.violations] == []
    assert not any(e.reason == PRESUMED for r in results if r.run for e in r.run.observation.run_entries())
