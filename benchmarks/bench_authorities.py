"""Grants, workspace and sandbox: the cost of authority, against baselines in the same run.

    python -m benchmarks.bench_authorities [--quick] [--json FILE]

* decision latency (posture + rules + ledger record), asked of the grants authority, vs a bare
  ledger record (one RecordStarted) — both one actor round trip and one synced commit;
* lease acquire + release per second with 1000 leases held, vs the same with none held;
* a sandboxed `true` (bubblewrap, the exact flags commands get) vs an unsandboxed one.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from ouroactors import ActorSystem, supervisor, worker
from ouroactors.authorities.asking import StampedRef
from ouroactors.authorities.grants.actor import Decide
from ouroactors.authorities.grants.rules import Effect, Request
from ouroactors.authorities.ledger.actor import RecordStarted
from ouroactors.authorities.ledger.domain import StartRequest, fingerprint
from ouroactors.authorities.workspace.actor import Acquire, Release
from ouroactors.runtime import sandbox

from ._common import Row, Stat, bench_main, progress

RULES = {"node": ["deny:Bash(rm *)", "deny:Bash(sudo *)"],
         "user": ["allow:Bash(git status)", "allow:Bash(git diff *)", "ask:Bash(git push *)", "allow:Read(**)"]}


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def run(quick: bool) -> list[Row]:
    rows: list[Row] = []
    n = 100 if quick else 400
    work = Path(tempfile.mkdtemp(prefix="bench-authorities-"))
    roots = work / "roots"
    for i in range(1000 + n):
        (roots / f"r{i}").mkdir(parents=True)
    tree = supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        worker("grants", "ouroactors.authorities.grants.actor:Grants", kwargs={"rules": RULES}),
        worker("workspace", "ouroactors.authorities.workspace.actor:Workspace",
               kwargs={"allowed_roots": [str(roots)], "heartbeat_s": 5.0, "owner_lost_after_s": 60.0}),
        worker("owner", "ouroactors.examples.workers:Echo"),
    ])
    system = ActorSystem.start("multiproc", work / "data")
    try:
        system.start_tree(tree)
        grants, ledger, workspace = (StampedRef(system, f"agent/{x}") for x in ("grants", "ledger", "workspace"))
        owner = system.resolve("agent/owner")
        request = Request(principal="s1", tool="Bash", effect=Effect.EXECUTE, command="git diff --stat && git status")
        # a start names every published authority at its generation (the ledger refuses one that leaves grants out)
        authority = {"grants": grants.generation}
        for i in range(20):
            grants.ask(Decide(request))
            ledger.ask(RecordStarted(StartRequest(effect_id=f"w{i}", kind="example", idempotency_key=f"w{i}",
                                                  fingerprint=fingerprint("example", i), principal="s1",
                                                  authority=authority)))
        progress("decision latency")
        decide, record = Stat(), Stat()
        for i in range(n):
            decide.samples.append(timed(lambda: grants.ask(Decide(request))))
            start = StartRequest(effect_id=f"b{i}", kind="example", idempotency_key=f"b{i}",
                                 fingerprint=fingerprint("example", i), principal="s1", authority=authority)
            record.samples.append(timed(lambda start=start: ledger.ask(RecordStarted(start))))
        rows.append(Row("grants", "decision: posture + rules + ledger record", "ms", decide, record, "report", None,
                        "baseline: a bare ledger record (RecordStarted)"))

        progress("leases")

        def cycle(i: int) -> None:
            granted = workspace.ask(Acquire(str(roots / f"r{1000 + i}"), "exclusive", f"s{i}", owner=owner))
            workspace.ask(Release(granted.lease.lease_id, capability=granted.capability))

        empty = n / (sum(timed(lambda i=i: cycle(i)) for i in range(n)) / 1000)
        for i in range(1000):
            workspace.ask(Acquire(str(roots / f"r{i}"), "exclusive", f"held{i}", owner=owner))
        held = n / (sum(timed(lambda i=i: cycle(i)) for i in range(n)) / 1000)
        rows.append(Row("workspace", "acquire+release with 1000 leases held", "cycles/s", held, empty, "report", None,
                        "baseline: the same with no lease held"))
    finally:
        system.shutdown()

    progress("sandbox")
    probe = sandbox.probe()
    workdir = work / "ws"
    workdir.mkdir()
    plain, boxed = Stat(), Stat()
    runs = 20 if quick else 60
    for _ in range(runs):
        plain.samples.append(timed(lambda: sandbox.run(["true"], mode=sandbox.SandboxMode.NONE,
                                                       workspace=str(workdir))))
        if probe.available:
            boxed.samples.append(timed(lambda: sandbox.run(["true"], mode=sandbox.SandboxMode.BWRAP,
                                                           workspace=str(workdir), probe=probe)))
    rows.append(Row("sandbox", "bwrap `true` vs unsandboxed `true`", "ms", boxed if probe.available else None, plain,
                    "report", None, "the cost of the boundary" if probe.available else f"bwrap: {probe.failure}"))
    shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    bench_main(run, "ouroactors authorities: grants, workspace, sandbox (same run, multiprocTCPBase)", __doc__)


if __name__ == "__main__":
    main()
