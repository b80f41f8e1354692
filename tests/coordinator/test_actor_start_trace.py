"""A session's start leaves trace marks in order (``ouroactors.runtime.coordinator.trace``): what
``bench_peers --breakdown`` reads to say where a session's start goes. Real processes: the marks come from the
directory, the coordinator and the runtime, forked after the switch was turned on."""

from __future__ import annotations

import pytest

from ouroactors.runtime.coordinator import trace
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, session_config

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

IN_ORDER = ("start.coordinator_asked", "start.coordinator_started", "start.message_received", "start.resumed",
            "start.runtime_asked", "start.runtime_started", "start.leased", "start.open_received", "start.opened",
            "start.text_received")


def test_a_sessions_start_is_marked_in_order_by_every_process(actor_system_factory, tmp_path, monkeypatch):
    marks = tmp_path / "trace.txt"
    monkeypatch.setattr(trace, "_PATH", None)  # both restored when the test ends
    monkeypatch.setenv("OUROACTORS_PUBTRACE", "")
    trace.enable(str(marks))  # before the system forks: its processes inherit the switch
    ws = tmp_path / "ws"
    ws.mkdir()
    system = actor_system_factory(data_dir=tmp_path / "data")
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system)
    sessions.new("s1", session_config(ws))
    sessions.send("s1", "hello")
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert events[-1].data["status"] == "completed"
    lines = [line.split(" ", 3) for line in marks.read_text().splitlines()]
    starts = sorted((int(at), name, int(pid)) for at, pid, name, *_ in lines if name.startswith("start."))
    assert tuple(name for _, name, _ in starts) == IN_ORDER
    assert len({pid for _, _, pid in starts}) >= 3  # the directory, the coordinator, the runtime
