"""A planted bug — a test-only ledger that answers 'created' before it commits — is caught by the
checkers, with the seed that shows it, and that seed replays the same plan and the same finding."""

from __future__ import annotations

import pytest

from ouroactors.faults.chaos import Campaign
from ouroactors.faults.checks import Violation
from ouroactors.faults.runner import workload_tree
from ouroactors.faults.workload import WorkloadConfig

from .planted import ANSWERED, PLANTED_LEDGER

pytestmark = pytest.mark.multiproc

def lost_start(violation: Violation) -> bool:
    """The deterministic face of the bug: the world saw an effect whose start never became durable.

    (Its other face — the start recorded a fraction of a millisecond after the effect — depends on
    which of two processes wins a race, so a replay need not show it.)
    """
    return violation.invariant == "effect-without-start" and "no committed start" in violation.message


CONFIG = WorkloadConfig(sessions=2, effects=2, ask_timeout=0.4, lease_wait=3.0, op_deadline=10.0)


@pytest.mark.slow
def test_the_planted_bug_is_caught_with_its_seed(tmp_path):
    tree = workload_tree(ledger=PLANTED_LEDGER)
    with Campaign(tree, CONFIG, data_dir=tmp_path / "campaign") as campaign:
        assert ANSWERED in campaign.points()
        caught = None
        for result in campaign.run(range(40)):
            if any(lost_start(v) for v in result.violations):
                caught = result
                break
    assert caught is not None, "the planted bug went unnoticed for 40 seeds"
    message = "\n".join(f"seed {caught.seed}: {v}" for v in caught.violations)
    print(f"\ncaught at seed {caught.seed}:\n{message}\n{caught.plan_toml()}")
    assert f"seed {caught.seed}: [effect-without-start]" in message
    assert caught.plan_toml().startswith(f"# chaos seed {caught.seed}\n[[rules]]")

    with Campaign(tree, CONFIG, data_dir=tmp_path / "replay") as replay:  # a fresh system, the same seed
        again = replay.run_seed(caught.seed)
    assert again.plan == caught.plan
    assert any(lost_start(v) for v in again.violations), again.violations


@pytest.mark.slow
def test_the_real_ledger_passes_the_seeds_that_catch_the_planted_one(tmp_path):
    with Campaign(workload_tree(), CONFIG, data_dir=tmp_path) as campaign:
        results = list(campaign.run(range(12)))
    assert [(r.seed, str(v)) for r in results for v in r.violations] == []
