"""``ouroactors demo``: a guided run of a real supervision tree on real processes.

Until the agent runtime lands, the demo boots a small rest_for_one tree (an authority, a
consumer, a worker pair under one_for_all) and shows each OTP behaviour happening for real: a
crash restarted with its reason, a SIGKILL noticed and repaired, an authority changing generation
so its consumers restart and stale requests are refused, and a clean shutdown that leaves no
process behind. Then a small agent tree (storage, ledger, a leaf actor recording effects directly
into LMDB) shows the write-ahead ledger: an effect is recorded before it runs, and when its runner
is killed before settling, the entry turns ``ambiguous`` at once — never ``failed``, never lost.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from ..authorities.ledger.domain import StartRequest, Status, fingerprint
from ..authorities.ledger.messages import GetEntry, RecordSettled, RecordStarted
from ..core.errors import ActorCrashed, StaleGeneration
from ..supervision.specs import supervisor, worker
from ..system.handle import ActorSystem, _group_alive
from .render import children_table, format_generation

DEMO_TREE = supervisor(
    "demo",
    strategy="rest_for_one",
    intensity=5,
    period=5,
    children=[
        worker("authority", "ouroactors.examples.workers:Authority"),
        worker("consumer", "ouroactors.examples.workers:Counter"),
        supervisor("pair", strategy="one_for_all", children=[
            worker("left", "ouroactors.examples.workers:Echo"),
            worker("right", "ouroactors.examples.workers:Echo"),
        ]),
    ],
)

EFFECTS_TREE = supervisor("agent", strategy="rest_for_one", children=[
    worker("storage", "ouroactors.authorities.storage.actor:Storage"),
    worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
    worker("runner", "ouroactors.examples.workers:DirectRecorder"),
])


def _effect(effect_id: str, command: str) -> StartRequest:
    arguments = {"command": command}
    return StartRequest(effect_id=effect_id, kind="shell", idempotency_key=effect_id,
                        fingerprint=fingerprint("shell", arguments), principal="demo", session_id="demo-session",
                        turn_id="turn-1", call_id=effect_id, grant=None, cause="ouroactors demo")


def _show_effects(console: Console, system: ActorSystem, base: str) -> None:
    """Effects are recorded before they run; a runner killed mid-effect leaves its entry ambiguous."""
    system.start_tree(EFFECTS_TREE)
    run = f"demo{system.context.node_epoch}"  # effect ids of their own on every run over the same data dir
    first_id, second_id = f"{run}-1", f"{run}-2"
    first = system.ask("agent/runner", RecordStarted(_effect(first_id, "make test")))
    settled = system.ask("agent/runner", RecordSettled(first_id, "ok", evidence={"exit": 0}))
    console.print(f"{first_id}: recorded {first.entry.status.value} (seq {first.entry.seq}) before running, "
                  f"then {settled.entry.status.value} — written by the runner itself, fenced on the ledger's "
                  "generation inside its LMDB transaction", markup=False)
    system.ask("agent/runner", RecordStarted(_effect(second_id, "git push")))
    if base != "multiproc":
        console.print(f"{second_id}: started; killing its runner needs the multiproc base", markup=False)
        return
    system.kill("agent/runner")
    deadline = time.monotonic() + 10.0
    entry = system.ask("agent/ledger", GetEntry(second_id))
    while entry.status is Status.STARTED and time.monotonic() < deadline:
        time.sleep(0.05)  # the ledger checks its watched writers every 0.25 s
        entry = system.ask("agent/ledger", GetEntry(second_id))
    console.print(f"{second_id}: its runner was killed mid-effect; the ledger now says {entry.status.value} "
                  f"({entry.reason}) — not failed: the push may have happened. "
                  f"`ouroactors ledger settle {second_id} ok|failed --reason …` once someone knows.", markup=False)


def run_demo(console: Console, base: str, data_dir: Path) -> int:
    console.rule("ouroactors demo")
    started = time.monotonic()
    system = ActorSystem.start(base, data_dir)
    mark = 0
    console.print(f"system up on {base} in {1000 * (time.monotonic() - started):.0f} ms; data dir {data_dir}")
    try:
        system.start_tree(DEMO_TREE)
        console.print(children_table(system, "demo"))

        console.rule("1. a crash is a restart with a reason")
        system.ask("demo/consumer", "incr")
        mark = system.mark()
        try:
            system.ask("demo/consumer", "crash")
        except ActorCrashed as exc:
            console.print(f"caller got: {exc}", markup=False)
        event = system.wait_for("started", "demo/consumer", after=mark)
        console.print(f"consumer restarted (generation {format_generation(event.generation)}); its count is back to "
                      f"{system.ask('demo/consumer', 'get')}; rest_for_one restarted the pair after it too")

        if base == "multiproc":
            console.rule("2. SIGKILL is noticed and repaired")
            mark = system.mark()
            killed_at = time.time_ns()
            pid = system.kill("demo/pair/left")
            exited = system.wait_for("exited", "demo/pair/left", after=mark)
            system.wait_for("started", "demo/pair/right", after=mark)
            console.print(f"killed pid {pid}; supervisor noticed after {(exited.time_ns - killed_at) / 1e6:.1f} ms "
                          "(reason killed); one_for_all restarted left and right together")

        console.rule("3. an authority changes generation: its consumers restart")
        old = system.child_info("demo/authority").generation
        mark = system.mark()
        system.ask("demo/authority", "revoke")
        system.wait_for("started", "demo/consumer", after=mark)
        new = system.child_info("demo/authority").generation
        try:
            system.ask("demo/authority", "decide", stamp=old)
        except StaleGeneration as exc:
            console.print(f"request stamped with the old generation refused: {exc}", markup=False)
        console.print(f"stamped with the new generation: {system.ask('demo/authority', 'decide', stamp=new)}")
        console.print(children_table(system, "demo"))

        console.rule("4. durable effects: recorded before they run")
        _show_effects(console, system, base)
    finally:
        console.rule("5. shutdown in reverse start order")
        pgid = system.pgid
        mark = system.mark()
        system.shutdown()
    for event in system.events.all()[mark:]:
        if event.kind == "terminated":
            console.print(f"  terminated {event.path}")
    if pgid is not None and _group_alive(pgid):
        console.print("[red]processes were left behind[/red]")
        return 1
    console.print(f"no process left behind; events in {system.context.events_path}")
    return 0
