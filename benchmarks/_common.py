"""Shared helpers for the benchmarks: statistics, the result table, process-group cleanup."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ouroactors.system.handle import free_port as free_port  # re-exported: TCP+UDP free on loopback

# -- statistics ------------------------------------------------------------------------------------


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation between closest ranks."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class Stat:
    """Samples of one measurement, in the unit of the row (ms, msg/s, ...)."""

    samples: list[float] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def p50(self) -> float:
        return percentile(self.samples, 50)

    @property
    def p99(self) -> float:
        return percentile(self.samples, 99)


@dataclass
class Row:
    """One line of the result table.

    ``ours`` and ``base`` are :class:`Stat` (latency: p50 and p99 shown) or a single float
    (throughput or a derived value). ``ratio`` is ours/baseline of the p50 (or of the value).
    ``check`` decides the goal from ``(ours_p50, ratio)``; None means "no goal, for the record".
    """

    section: str
    metric: str
    unit: str
    ours: Stat | float | None
    base: Stat | float | None
    goal: str = "—"
    check: Callable[[float, float], bool] | None = None
    note: str = ""
    error: str = ""  # the measurement could not complete: shown as FAILED with this reason

    @staticmethod
    def _mid(value: Stat | float | None) -> float:
        if value is None:
            return math.nan
        return value.p50 if isinstance(value, Stat) else float(value)

    @property
    def ratio(self) -> float:
        ours, base = self._mid(self.ours), self._mid(self.base)
        if math.isnan(ours) or math.isnan(base) or base == 0:
            return math.nan
        return ours / base

    @property
    def verdict(self) -> str:
        if self.error:
            return "FAILED"
        if self.check is None:
            return ""
        ours = self._mid(self.ours)
        if math.isnan(ours):
            return "n/a"
        return "met" if self.check(ours, self.ratio) else "MISSED"

    def to_json(self) -> dict[str, object]:
        def dump(value: Stat | float | None) -> object:
            if isinstance(value, Stat):
                return {"n": value.n, "p50": value.p50, "p99": value.p99, "samples": value.samples}
            return value

        return {"section": self.section, "metric": self.metric, "unit": self.unit, "ours": dump(self.ours),
                "baseline": dump(self.base), "ratio": self.ratio, "goal": self.goal,
                "verdict": self.verdict, "note": self.note, "error": self.error}


def fmt(value: float, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}".rstrip()


def _cells(value: Stat | float | None, unit: str) -> tuple[str, str]:
    if value is None:
        return "—", ""
    if isinstance(value, Stat):
        return fmt(value.p50, unit), fmt(value.p99, unit) if value.n > 1 else ""
    return fmt(value, unit), ""


HEADERS = ("#", "metric", "n", "ours p50", "ours p99", "base p50", "base p99", "ratio", "goal", "verdict")


def table_rows(rows: Sequence[Row]) -> tuple[list[tuple[str, ...]], list[str]]:
    """The table's cells, and the footnotes (notes are numbered so the table stays narrow)."""
    out, notes = [], []
    for row in rows:
        ours50, ours99 = _cells(row.ours, row.unit)
        base50, base99 = _cells(row.base, row.unit)
        n = str(row.ours.n) if isinstance(row.ours, Stat) else ""
        ratio = "—" if math.isnan(row.ratio) else f"{row.ratio:.2f}×"
        metric = row.metric
        for text in (row.note, f"FAILED: {row.error}" if row.error else ""):
            if text:
                if text not in notes:
                    notes.append(text)
                metric += f" [{notes.index(text) + 1}]"
        out.append((row.section, metric, n, ours50, ours99, base50, base99, ratio, row.goal, row.verdict))
    return out, notes


def print_table(rows: Sequence[Row], title: str, plain: bool = False, footer: Sequence[str] = ()) -> None:
    """Print the table with rich if it is installed (and not ``plain``), else as plain text."""
    data, notes = table_rows(rows)
    lines = [f"[{i}] {note}" for i, note in enumerate(notes, start=1)] + list(footer)
    if not plain:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            plain = True
    if not plain:
        table = Table(title=title, caption="\n".join(lines), caption_justify="left")
        for header in HEADERS:
            justify = "left" if header in ("#", "metric", "goal", "verdict") else "right"
            table.add_column(header, justify=justify, no_wrap=header != "metric")
        for line in data:
            table.add_row(*line, style="red" if line[-1] in ("MISSED", "FAILED") else None)
        console = Console()
        if not console.is_terminal:
            console = Console(width=160)
        console.print(table, markup=False)
        return
    widths = [max(len(HEADERS[i]), *(len(line[i]) for line in data)) for i in range(len(HEADERS))]
    left = {0, 1, 8, 9}

    def render(cells: Sequence[str]) -> str:
        padded = (c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        return " | ".join(padded).rstrip()

    print(title)
    print(render(HEADERS))
    print("-+-".join("-" * w for w in widths))
    for line in data:
        print(render(line))
    for line in lines:
        print(line)


# -- processes -------------------------------------------------------------------------------------


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def sweep_group(pgid: int | None, grace: float = 2.0) -> list[int]:
    """Wait up to ``grace`` s for a system's process group to empty, then SIGKILL what is left.

    Only for a group this run started (an actor system's admin calls ``setsid``); never our own.
    Returns the pids that had to be killed.
    """
    if pgid is None or pgid == os.getpgid(0):
        return []
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and group_members(pgid):
        time.sleep(0.02)
    left = group_members(pgid)
    if left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and group_members(pgid):
            time.sleep(0.01)
    return left


def listening_ports(ports: Sequence[int]) -> list[int]:
    """Which of ``ports`` have a TCP socket in LISTEN state (from /proc/net/tcp{,6})."""
    wanted = set(ports)
    found: set[int] = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 3 and parts[3] == "0A":
                port = int(parts[1].rsplit(":", 1)[1], 16)
                if port in wanted:
                    found.add(port)
    return sorted(found)


def minor_faults(pids: Sequence[int]) -> int:
    """Sum of the minor page faults of ``pids`` so far (0 for a process that is gone).

    A diagnostic: a process whose message loop runs right at a CPython 3.11 data-stack chunk
    boundary maps and unmaps a 16 KiB chunk on every crossing (python/cpython#142183), which
    shows up as ~10 minor faults per message.
    """
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[7])
    return total


def count_in_thespian_log(text: str) -> int:
    """How many lines of thespian's internal log ($THESPLOG_FILE and its rotation) contain ``text``."""
    name = os.environ.get("THESPLOG_FILE")
    if not name:
        return 0
    total = 0
    for path in (Path(name + ".old"), Path(name)):
        try:
            with path.open(errors="replace") as handle:
                total += sum(1 for line in handle if text in line)
        except OSError:
            continue
    return total


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def bench_main(run: Callable[[bool], Sequence[Row]], title: str, doc: str | None) -> None:
    """The command line every table benchmark shares: ``[--quick] [--json FILE]``, one table."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer samples (under a minute)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = parser.parse_args()
    started = time.monotonic()
    rows = run(args.quick)
    print_table(rows, title, footer=[f"run time {time.monotonic() - started:.0f} s; {os.cpu_count()} cores"])
    if args.json:
        args.json.write_text(json.dumps([row.to_json() for row in rows], indent=2))
