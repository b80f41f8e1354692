"""System benchmark: booting trees and asking a running system, against raw thespian, same run.

    python -m benchmarks.bench_system [--quick] [--json FILE]

* boot of ``supervision_trees/agent.toml`` and of a flat 50-child tree (system start excluded:
  from ``start_tree`` to every child answering) vs raw thespian creating the same number of
  actors from one parent actor and getting a first answer from each;
* ``ouroactors status`` and ``tree`` against a running system: the CLI as a subprocess (what a user
  waits for: interpreter, imports, the asks — the thin client of ``ouroactors.system.client``) vs
  ``python -c pass``, and the same queries in-process (connect + trees + walk) vs a raw thespian ask.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from thespian.actors import ActorExitRequest
from thespian.actors import ActorSystem as ThespianSystem

from ouroactors import ActorSystem, supervisor, worker
from ouroactors.system import _patches
from ouroactors.system.config import load_tree

from ._actors import RawEcho, RawParent
from ._common import Row, Stat, bench_main, free_port, progress

REPO = Path(__file__).resolve().parents[1]
ECHO = "ouroactors.examples.workers:Echo"


def raw_boot(asys: ThespianSystem, count: int) -> float:
    """ms for one raw parent actor to create ``count`` children and get an answer from each."""
    start = time.perf_counter()
    parent = asys.createActor(RawParent)
    answer = asys.ask(parent, ("spawn", count), 120)
    elapsed = (time.perf_counter() - start) * 1000.0
    if not (isinstance(answer, tuple) and answer and answer[0] == "done"):
        raise RuntimeError(f"raw parent answered {answer!r}")
    asys.ask(parent, ("stop_all",), 120)
    asys.tell(parent, ActorExitRequest())
    return elapsed


def our_boot(system: ActorSystem, tree: object) -> float:
    """ms for ``start_tree``: it returns once every child has reported itself started."""
    start = time.perf_counter()
    system.start_tree(tree)  # type: ignore[arg-type]
    elapsed = (time.perf_counter() - start) * 1000.0
    system.stop_tree(tree.id)  # type: ignore[attr-defined]
    return elapsed


def run(quick: bool) -> list[Row]:
    rows: list[Row] = []
    rounds = 3 if quick else 8
    work = Path(tempfile.mkdtemp(prefix="bench-system-"))
    _patches.install()
    os.environ["OUROACTORS_BIND_HOST"] = os.environ["THESPIAN_BASE_IPADDR"] = "127.0.0.1"
    os.environ.setdefault("THESPLOG_FILE", str(work / "thespian.log"))
    agent = load_tree(REPO / "supervision_trees" / "agent.toml").tree
    flat = supervisor("flat", [worker(f"w{i}", ECHO) for i in range(50)], intensity=10)

    raw = ThespianSystem("multiprocTCPBase", {"Admin Port": free_port()}, transientUnique=True)
    system = ActorSystem.start("multiproc", work / "data")
    try:
        raw.ask(raw.createActor(RawEcho), "warm", 10)
        progress("boot agent.toml and a 50-child tree")
        agent_ours, agent_raw, flat_ours, flat_raw = Stat(), Stat(), Stat(), Stat()
        for _ in range(rounds):
            agent_ours.samples.append(our_boot(system, agent))
            agent_raw.samples.append(raw_boot(raw, 8))  # agent.toml: 6 children + 2 supervisors' worth
            flat_ours.samples.append(our_boot(system, flat))
            flat_raw.samples.append(raw_boot(raw, 50))
        rows.append(Row("boot", "agent.toml (8 actors, LMDB open)", "ms", agent_ours, agent_raw, "report", None,
                        "baseline: raw parent creates 8 actors + first answer each"))
        rows.append(Row("boot", "50-child tree", "ms", flat_ours, flat_raw, "report", None,
                        "baseline: raw parent creates 50 actors + first answer each"))

        progress("status latency")
        system.start_tree(flat)
        data_dir = str(system.data_dir)
        cli, cli_tree, inproc, raw_ask = Stat(), Stat(), Stat(), Stat()
        echo = raw.createActor(RawEcho)
        for _ in range(rounds):
            for stat, command in ((cli, "status"), (cli_tree, "tree")):
                start = time.perf_counter()
                result = subprocess.run([sys.executable, "-m", "ouroactors.cli", command, "--data-dir", data_dir],
                                        capture_output=True, text=True, timeout=60)
                stat.samples.append((time.perf_counter() - start) * 1000.0)
                if result.returncode != 0:
                    raise RuntimeError(result.stderr)
            start = time.perf_counter()
            client = ActorSystem.connect(data_dir)
            client.trees()
            client.walk()
            inproc.samples.append((time.perf_counter() - start) * 1000.0)
            start = time.perf_counter()
            raw.ask(echo, "x", 10)
            raw_ask.samples.append((time.perf_counter() - start) * 1000.0)
        progress("CLI start-up")
        bare, version, helped = Stat(), Stat(), Stat()
        for _ in range(rounds * 2):
            for stat, argv in ((bare, ["-c", "pass"]), (version, ["-m", "ouroactors.cli", "--version"]),
                               (helped, ["-m", "ouroactors.cli", "--help"])):
                start = time.perf_counter()
                subprocess.run([sys.executable, *argv], capture_output=True, timeout=60, check=True)
                stat.samples.append((time.perf_counter() - start) * 1000.0)
        rows.append(Row("cli", "`ouroactors --version`", "ms", version, bare, "≤ 150 ms", lambda o, _r: o <= 150,
                        "baseline: `python -c pass` (the interpreter alone)"))
        rows.append(Row("cli", "`ouroactors --help`", "ms", helped, bare, "≤ 150 ms", lambda o, _r: o <= 150))
        rows.append(Row("status", "`ouroactors status` (subprocess, 50 children)", "ms", cli, bare, "≤ 300 ms",
                        lambda o, _r: o <= 300, "includes Python start-up and imports; baseline: `python -c pass`"))
        rows.append(Row("status", "`ouroactors tree` (subprocess, 50 children)", "ms", cli_tree, bare, "≤ 300 ms",
                        lambda o, _r: o <= 300, "50 rows off a terminal; baseline: `python -c pass`"))
        rows.append(Row("status", "connect + trees + walk (in-process)", "ms", inproc, raw_ask, "report", None,
                        "baseline: one raw thespian ask"))
    finally:
        system.shutdown()
        raw.shutdown()
    return rows


def main() -> None:
    bench_main(run, "ouroactors system: boot and status vs raw thespian (same run, multiprocTCPBase)", __doc__)


if __name__ == "__main__":
    main()
