"""Runtime metrics: a real session's turn shows up in the Prometheus page served by ``run --metrics-port``.

The counts travel in the runtime's ``turn_settled`` event (no event per tool call) and are summed when the page is
read, like the supervision metrics; the pure renderer is also checked on hand-made events (retries, a malformed
count that must not break the page).
"""

from __future__ import annotations

import re

import httpx
import pytest

from ouroactors.cli.run import _serve_metrics
from ouroactors.runtime.execution.messages import OpenSession, SendText
from ouroactors.runtime.execution.metrics import TurnStats, render
from ouroactors.supervision.events import Event
from ouroactors.system.handle import free_port

from .test_runtime_actor import agent_tree, drain_until, runtime_with_lease


def _value(page: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", page, re.M)
    assert found, f"{name} not in the page:\n{page}"
    return float(found.group(1))


@pytest.mark.multiproc
def test_a_turn_is_counted_in_the_served_metrics(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "NOTES.md").write_text("# notes\n- [ ] try the demo\n- [ ] read the docs\n")
    actor_system.start_tree(agent_tree(str(tmp_path)))
    path, lease = runtime_with_lease(actor_system, ws, "m1")
    actor_system.ask(path, OpenSession("m1", {"workspace": str(ws), "sandbox": {"mode": "none"}}, lease.lease_id))
    actor_system.ask(path, SendText("please"))  # the embedded script: read, edit, shell, answer
    drain_until(actor_system, path, "turn_settled")
    server = _serve_metrics(actor_system, port := free_port())
    try:
        page = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        server.shutdown()
        server.server_close()
    assert _value(page, 'ouroactors_runtime_turns_total{status="completed"}') == 1
    assert _value(page, 'ouroactors_runtime_tool_calls_total{outcome="ok"}') == 3
    assert _value(page, "ouroactors_runtime_model_calls_total") == 4  # one per tool call, then the answer
    assert _value(page, "ouroactors_runtime_step_seconds_count") == 3
    assert _value(page, 'ouroactors_runtime_step_seconds_bucket{le="+Inf"}') == 3
    assert 0 < _value(page, "ouroactors_runtime_step_seconds_sum") < 60
    assert _value(page, "ouroactors_runtime_model_retries_total") == 0


def _event(kind: str, epoch: int, **fields: object) -> Event:
    return Event(kind=kind, path="agent/execution/runtime#1", supervisor="agent/execution", child="runtime#1",
                 time_ns=0, epoch=epoch, node="n", fields=dict(fields))


def test_counts_are_summed_over_turns_of_this_run_only() -> None:
    one, two = TurnStats(), TurnStats()
    one.model_call()
    one.tool_call("ok", 0.002)
    one.tool_call("denied", 0.0005)
    two.model_call()
    two.model_call()
    two.tool_call("ok", 0.03)
    events = [
        _event("turn_settled", 7, status="completed", metrics=one.take()),
        _event("turn_settled", 7, status="interrupted", metrics=two.take()),
        _event("turn_settled", 6, status="completed", metrics=TurnStats(model_calls=5).fields()),  # an older run
        _event("turn_settled", 7, status="completed", metrics={"model_calls": "many", "tool_calls": 3}),  # garbage
        _event("model_retry", 7, attempt=1, status=429),
        _event("model_retry", 7, attempt=2, status=503),
    ]
    page = "\n".join(render(events, 7)) + "\n"
    assert _value(page, 'ouroactors_runtime_turns_total{status="completed"}') == 2  # the garbage one counts as a turn
    assert _value(page, 'ouroactors_runtime_turns_total{status="interrupted"}') == 1
    assert _value(page, 'ouroactors_runtime_tool_calls_total{outcome="ok"}') == 2
    assert _value(page, 'ouroactors_runtime_tool_calls_total{outcome="denied"}') == 1
    assert _value(page, "ouroactors_runtime_model_calls_total") == 3
    assert _value(page, "ouroactors_runtime_model_retries_total") == 2
    assert _value(page, 'ouroactors_runtime_step_seconds_bucket{le="0.001"}') == 1
    assert _value(page, 'ouroactors_runtime_step_seconds_bucket{le="0.0025"}') == 2
    assert _value(page, 'ouroactors_runtime_step_seconds_bucket{le="0.025"}') == 2
    assert _value(page, 'ouroactors_runtime_step_seconds_bucket{le="0.05"}') == 3
    assert _value(page, "ouroactors_runtime_step_seconds_count") == 3
    assert _value(page, "ouroactors_runtime_step_seconds_sum") == pytest.approx(0.0325)
    assert one.take()["model_calls"] == 0  # take() started counting afresh
