"""DESIGN.md, "Layers": a lower layer never imports a higher one — checked over every module's imports.

A higher layer reaches down; a lower one that needs something from above names it by dotted path (the ledger's
reconcilers, the authorities' session facts: :mod:`ouroactors.authorities.session_facts`) or is handed it by its
caller (the metrics sections the CLI composes). Imports inside functions count too: a deferred import is still a
dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ouroactors

LAYERS = ("core", "supervision", "system", "authorities", "runtime", "faults", "testing", "cli")  # lowest first
RANK = {name: rank for rank, name in enumerate(LAYERS)}
ROOT = Path(ouroactors.__file__).parent


def _imported(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every ``ouroactors`` module ``path`` imports, relative imports resolved."""
    package = ["ouroactors", *path.relative_to(ROOT).with_suffix("").parts[:-1]]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            found.append((node.lineno, ".".join([*base, *(node.module.split(".") if node.module else [])])))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, module) for line, module in found if module.split(".")[0] == "ouroactors"]


def upward_imports() -> list[str]:
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        layer = path.relative_to(ROOT).parts[0]
        if layer not in RANK:
            continue  # the package's top-level API modules (ouroactors.sessions, …) sit above every layer
        for line, module in _imported(path):
            target = module.split(".")[1] if module.count(".") else ""
            if target in RANK and RANK[target] > RANK[layer]:
                problems.append(f"{path.relative_to(ROOT.parent)}:{line} ({layer}) imports {module} ({target})")
    return problems


def test_no_layer_imports_a_higher_one():
    assert upward_imports() == []


def test_the_check_finds_an_upward_import(tmp_path, monkeypatch):
    """The checker itself: a planted upward import (a deferred one) is named with its file, line and layers."""
    fake = tmp_path / "ouroactors"
    (fake / "core").mkdir(parents=True)
    (fake / "core" / "bad.py").write_text("def f():\n    from ..runtime import sandbox\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", fake)
    assert upward_imports() == ["ouroactors/core/bad.py:2 (core) imports ouroactors.runtime (runtime)"]
