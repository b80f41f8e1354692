"""How a generation is written for people: ``epoch.micros``, zero-padded so order is visible.

A generation is ``node_epoch << 48 | micros`` (see :mod:`ouroactors.supervision.generations`). Printed as
``1.55629`` and ``1.103446`` a later generation looked smaller; with the micros padded to the 15 digits that 48
bits can need, the text compares the same way as the number — as a decimal and as a string within an epoch —
and every place that shows a generation (tables, events, errors) uses this one form.
"""

from __future__ import annotations

MICROS_BITS = 48
_MICROS_DIGITS = len(str((1 << MICROS_BITS) - 1))  # 15


def format_generation(generation: int | None) -> str:
    """``epoch.micros`` with the micros zero-padded; ``-`` for no generation."""
    if generation is None:
        return "-"
    if generation < 0:
        return str(generation)  # not one of ours: show it as it is rather than guess
    return f"{generation >> MICROS_BITS}.{generation & ((1 << MICROS_BITS) - 1):0{_MICROS_DIGITS}d}"


__all__ = ["MICROS_BITS", "format_generation"]
