"""Authority generations: numbers that only grow, across restarts of the whole system.

A generation is ``(node_epoch << 48) | microseconds since the system started``. The node epoch
is a counter in the data directory, incremented (and fsynced) once per system start, so every
generation of a later run is larger than any of an earlier one. The epoch file, and the data
directory holding it, must be the user's own and writable by nobody else (another local user who
could rewrite it could replay old generations); otherwise the start is refused
(:class:`~ouroactors.core.trusted_files.UntrustedFile`). Within a run the monotonic clock
(system-wide on Linux, so every actor process reads the same one) orders incarnations, and
:func:`generation_source` makes each child's next generation strictly larger than its last even
if two starts fall in the same microsecond. 48 bits of microseconds last 8.9 years of uptime.

:func:`check_stamp` is the helper an authority uses to refuse a request stamped with a gone
generation.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..core import clock
from ..core.errors import StaleGeneration
from ..core.trusted_files import check_trusted

EPOCH_FILE = "node.epoch"
_MICROS_BITS = 48
_MICROS_MASK = (1 << _MICROS_BITS) - 1


def bump_node_epoch(data_dir: str | os.PathLike[str]) -> int:
    """Increment the durable node epoch in ``data_dir`` and return the new value."""
    directory = Path(data_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_trusted(directory)
    path = directory / EPOCH_FILE
    current = 0
    if check_trusted(path):
        text = path.read_text(errors="replace").strip()  # undecodable bytes are corrupt too
        if not (text.isascii() and text.isdigit()):  # str.isdigit alone accepts '²' and '١٢'
            raise ValueError(f"{path}: corrupt node epoch {text!r} (expected a non-negative integer)")
        current = int(text)
    new = current + 1
    tmp = directory / f".{EPOCH_FILE}.tmp-{os.getpid()}"
    tmp.unlink(missing_ok=True)  # a leftover of a crashed start by this pid; never written through
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with open(fd, "w") as handle:
        handle.write(f"{new}\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return new


def generation_source(node_epoch: int, origin_ns: int) -> Callable[[int | None], int]:
    """The generation allocator a supervisor uses for its children."""
    high = node_epoch << _MICROS_BITS

    def next_generation(previous: int | None) -> int:
        micros = min((clock.monotonic_ns() - origin_ns) // 1000, _MICROS_MASK)
        candidate = high | max(micros, 0)
        if previous is not None and candidate <= previous:
            candidate = previous + 1
        return candidate

    return next_generation


def epoch_of(generation: int) -> int:
    return generation >> _MICROS_BITS


def check_stamp(authority: str, current: int | None, stamp: int | None) -> None:
    """Raise :class:`StaleGeneration` unless ``stamp`` is the authority's current generation."""
    if current is None or stamp != current:
        raise StaleGeneration(authority, current, stamp)
