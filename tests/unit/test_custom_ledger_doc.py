"""The README's custom ledger for ``workload_tree(ledger=…)`` is accepted by the crash_enumeration marker.

The example is taken from the README itself (the block that defines ``MyLedger``), written into a module
and imported, so the documented class and the documented rule (a ``Ledger`` subclass) cannot drift apart.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ouroactors import supervisor, worker
from ouroactors.faults.runner import STORAGE_ACTOR, tree_targets, workload_tree
from ouroactors.testing.marker import BadArgument, parse_marker

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_ledger_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    found = [b for b in blocks if "class MyLedger(Ledger)" in b]
    assert len(found) == 1, "the README shows one MyLedger example"
    return found[0]


@pytest.fixture
def myapp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    package = tmp_path / "myapp_doc_ledger"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ledger.py").write_text(_readme_ledger_example())
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "myapp_doc_ledger.ledger:MyLedger"
    for name in [n for n in sys.modules if n.startswith("myapp_doc_ledger")]:
        del sys.modules[name]


def test_the_readme_ledger_subclass_is_found_and_accepted(myapp: str, tmp_path: Path) -> None:
    tree = workload_tree(ledger=myapp, heartbeat_s=60.0, owner_lost_after_s=120.0)
    assert tree_targets(tree, 1).ledger == "agent/ledger"
    mark = pytest.mark.crash_enumeration(tree, config={"sessions": 1, "effects": 2}, points=["storage.*"]).mark
    assert parse_marker(mark, tmp_path).tree == tree


def test_an_actor_that_is_not_a_ledger_is_refused_naming_why(tmp_path: Path) -> None:
    tree = workload_tree(ledger="ouroactors.examples.workers:Echo")
    mark = pytest.mark.crash_enumeration(tree).mark
    with pytest.raises(BadArgument, match="has no ledger"):
        parse_marker(mark, tmp_path)


def test_the_readme_ledger_starts_and_answers_as_the_ledger(myapp: str, simple_system) -> None:
    simple_system.start_tree(supervisor("agent", [worker("storage", STORAGE_ACTOR), worker("ledger", myapp)],
                                        strategy="rest_for_one"))
    assert simple_system.ask("agent/ledger", "status")["recovered_ambiguous"] == 0
