"""The data-directory marker: which live system serves a data directory, and how to reach it.

``<data_dir>/system.json`` is written when a system starts and removed when it shuts down. A
second terminal finds the system through it (``ouroactors status --data-dir D``), and a second
start on the same directory is refused while the marker names a live system. A marker whose
processes are gone (the system was killed) is *stale*: it is detected, reported and removed.

Liveness is checked on the processes, never assumed from the file: the admin's process group must
have a live member and the start time of its leader must match the one recorded, so a recycled
pid is not mistaken for the system.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.errors import ActorSystemError
from ..core.procs import process_start_ticks as process_start_ticks

MARKER = "system.json"


@dataclass(frozen=True)
class Marker:
    base: str
    admin_port: int | None
    admin_pid: int | None
    admin_pgid: int | None
    admin_start_ticks: int | None
    owner_pid: int  # the process that started the system (it may have exited if detached)
    detached: bool
    bind_host: str
    node_epoch: int
    started_ns: int
    origin_ns: int
    name: str = "ouroactors"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


class DataDirInUse(ActorSystemError):
    def __init__(self, data_dir: Path, marker: Marker) -> None:
        self.marker = marker
        who = marker.owner_pid if marker.base == "simple" else marker.admin_pid
        super().__init__(
            f"data dir {data_dir} is already served by a live system (pid {who}, started by pid "
            f"{marker.owner_pid}); stop it first with `ouroactors stop --data-dir {data_dir}`"
        )


def read_marker(data_dir: Path) -> Marker | None:
    path = Path(data_dir) / MARKER
    try:
        data = json.loads(path.read_text())
        return Marker(**data)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise ActorSystemError(f"{path}: unreadable system marker ({exc}); remove it if no system runs") from None


def is_live(marker: Marker) -> bool:
    if marker.base == "simple":
        return process_start_ticks(marker.owner_pid) is not None
    if marker.admin_pid is None:
        return False
    ticks = process_start_ticks(marker.admin_pid)
    return ticks is not None and (marker.admin_start_ticks is None or ticks == marker.admin_start_ticks)


def claim(data_dir: Path) -> Marker | None:
    """Before a start: refuse if a live system serves ``data_dir``; remove a stale marker.

    Returns the stale marker that was removed (for the caller to report), or None.
    """
    marker = read_marker(data_dir)
    if marker is None:
        return None
    if is_live(marker):
        raise DataDirInUse(data_dir, marker)
    (Path(data_dir) / MARKER).unlink(missing_ok=True)
    return marker


def write_marker(data_dir: Path, marker: Marker) -> None:
    path = Path(data_dir) / MARKER
    tmp = path.with_name(f".{MARKER}.tmp-{os.getpid()}")
    tmp.write_text(marker.to_json())
    os.replace(tmp, path)


def remove_marker(data_dir: Path, expected: Marker | None = None) -> None:
    current = read_marker_quietly(data_dir)
    if current is not None and (expected is None or current == expected):
        (Path(data_dir) / MARKER).unlink(missing_ok=True)


def read_marker_quietly(data_dir: Path) -> Marker | None:
    try:
        return read_marker(data_dir)
    except ActorSystemError:
        return None
