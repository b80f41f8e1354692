"""What the crash-enumeration and chaos commands check before (and right after) a run: a fresh ``--data-dir``, and
that a run crashed somewhere.

**A fresh data dir.** Every run of ``faults enumerate``, ``enumerate-scenario``, ``enumerate-sessions`` and ``chaos``
starts its systems on data dirs of their own below ``--data-dir`` (``record``, ``site1``, ``seed-3``, …): a directory
that already holds anything — an earlier run's LMDB and ``events.jsonl``, which the next run would read as its own —
or that is (or lies inside) the data dir of a live system, which the runs would write into, is refused before
anything starts (:func:`data_dir_problem`).

**No crash site selected.** A run whose ``--points`` (``--only``) match none of the sites the recording reached
crashed nowhere: it is bad input, never a pass (:func:`no_site_selected`), as the pytest marker says too.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def data_dir_problem(data_dir: str | os.PathLike[str], option: str = "--data-dir") -> str | None:
    """Why ``data_dir`` cannot hold a run's data dirs (None: it can — new, or an empty directory of no live system)."""
    from ..system.marker import MARKER, is_live, read_marker_quietly

    path = Path(data_dir)
    here = f"{option} {shlex.quote(str(data_dir))}"
    for directory in (path, *path.absolute().parents):
        marker = read_marker_quietly(directory) if (directory / MARKER).is_file() else None
        if marker is not None and is_live(marker):
            where = "is" if directory == path else f"lies inside {directory}, which is"
            return (f"{here}: {where} the data dir of a live system (pid {marker.owner_pid}): a run starts "
                    "systems of its own there; name a new or empty directory elsewhere")
    try:
        entries = sorted(os.listdir(path))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return f"{here}: not a directory"
    except OSError as exc:
        return f"{here}: cannot be read: {exc.strerror or exc}"
    if entries:
        shown = ", ".join(entries[:5]) + (", …" if len(entries) > 5 else "")
        return (f"{here}: not empty (it holds {shown}): every run gets a fresh data dir, so that no run reads "
                "another's data; name a new or empty directory")
    return None


def no_site_selected(option: str, patterns: Sequence[str], recorded: Sequence[Any]) -> str:
    """The error of a run that crashed nowhere: ``patterns`` (``option``'s) match none of the ``recorded`` sites."""
    points = sorted({site.point for site in recorded})
    if not patterns:
        return "no crash site selected: the scenario reached no fault point"
    given = " ".join(f"{option} {shlex.quote(p)}" for p in patterns)
    reached = ", ".join(points) if points else "(none)"
    return (f"no crash site selected: {given} matches none of the {len(recorded)} site(s) the recording reached "
            f"(their points: {reached})")


__all__ = ["data_dir_problem", "no_site_selected"]
