"""``ouroactors chaos TREE --workload runtime`` as a user runs it: real sessions of the runtime, seeded chaos."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.test_cli_chaos import chaos

TREE = """
[system]
base = "multiproc"

[tree]
id = "agent"
strategy = "rest_for_one"
intensity = 50
period = 5

[[tree.children]]
id = "storage"
actor = "ouroactors.authorities.storage.actor:Storage"

[[tree.children]]
id = "ledger"
actor = "ouroactors.authorities.ledger.actor:Ledger"

[[tree.children]]
id = "grants"
actor = "ouroactors.authorities.grants.actor:Grants"

[[tree.children]]
id = "workspace"
actor = "ouroactors.authorities.workspace.actor:Workspace"
{execution}
"""

EXECUTION = """
[[tree.children]]
id = "execution"
type = "supervisor"
strategy = "simple_one_for_one"
intensity = 50
period = 5

[[tree.children.children]]
id = "runtime"
actor = "ouroactors.runtime.execution.runtime:Runtime"
restart = "transient"
"""


def tree_file(tmp_path: Path, execution: bool = True) -> str:
    path = tmp_path / "tree.toml"
    path.write_text(TREE.format(execution=EXECUTION if execution else ""))
    return str(path)


def test_the_simple_base_and_a_tree_without_runtimes_are_refused_before_anything_starts(tmp_path):
    out = chaos(tree_file(tmp_path), "--workload", "runtime", "--seeds", "1", "--base", "simple")
    assert out.returncode == 2, out.stderr
    assert "--workload runtime needs the multiproc base, not 'simple'" in out.stderr
    out = chaos(tree_file(tmp_path, execution=False), "--workload", "runtime", "--seeds", "1")
    assert out.returncode == 2, out.stderr
    assert "needs an execution supervisor whose child template is the session runtime" in out.stderr


@pytest.mark.slow
@pytest.mark.multiproc
def test_a_runtime_campaign_runs_real_sessions_and_finds_no_violation(tmp_path):
    out = chaos(tree_file(tmp_path), "--workload", "runtime", "--seeds", "2", "--ask-timeout", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "workload runtime" in out.stdout and "no violation in 2 schedule(s)" in out.stdout
