"""The trees that ship with ouroactors, as package data: ``agent`` (the agent runtime's authorities, which
``ouroactors demo`` runs) and ``example`` (one tree that shows every strategy).

They are installed with the package, so ``ouroactors run example`` or ``ouroactors check agent`` works from a
wheel as well as from a source checkout (where ``supervision_trees/*.toml`` link here). A name is looked up
here only when no file of that name exists: a user's own ``./agent`` always wins (see
:func:`ouroactors.system.config.load_tree`).
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
NAMES = ("agent", "example")


def bundled(name: str) -> Path | None:
    """The shipped tree file called ``name`` (``"agent"``, ``"example"``), or None when no tree has that name."""
    return HERE / f"{name}.toml" if name in NAMES else None


__all__ = ["HERE", "NAMES", "bundled"]
