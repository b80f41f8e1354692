"""The agent tree with real coordinators, and waits on durable facts (no sleeps as synchronisation)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ouroactors import supervisor, worker
from ouroactors.runtime.coordinator.messages import EventsRead, ReadEvents

from ..journal_support import journal_kinds as journal_kinds  # re-exported: the tests import it from here

RULES = {"user": ["allow:Read(**)", "allow:Edit(**)", "allow:Bash(grep *)"]}
T = TypeVar("T")


def agent_tree(root: str, rules: dict[str, list[str]] = RULES, spares: Any = 0,
               runtime_kwargs: dict[str, Any] | None = None, grants_kwargs: dict[str, Any] | None = None) -> Any:
    """storage, ledger, grants, workspace, execution, coordinator, sessions — agent.toml's order (``spares``: the
    directory's ``spare_runtimes``; none by default, so that a test's running runtimes are its sessions' own;
    ``grants_kwargs``: more of the grants authority's)."""
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        worker("grants", "ouroactors.authorities.grants.actor:Grants",
               kwargs={"rules": rules, **(grants_kwargs or {})}),
        worker("workspace", "ouroactors.authorities.workspace.actor:Workspace", kwargs={"allowed_roots": [root]}),
        supervisor("execution", [worker("runtime", "ouroactors.runtime.execution.runtime:Runtime",
                                        restart="transient", kwargs=runtime_kwargs or {})],
                   strategy="simple_one_for_one", intensity=10),
        supervisor("coordinator", [worker("session", "ouroactors.runtime.coordinator.actor:Coordinator",
                                          restart="transient")], strategy="simple_one_for_one", intensity=10),
        worker("sessions", "ouroactors.runtime.coordinator.directory:Sessions",
               kwargs={"spare_runtimes": spares} if spares != 0 else {}),
    ])


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 30.0, every: float = 0.05) -> T:
    """Poll ``probe`` (a read of another process's durable state) until it answers, with a deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except Exception as exc:  # the actor asked may be restarting: ask again until the deadline
            last = exc
        else:
            if last:
                return last
        time.sleep(every)  # polling with a deadline, not synchronising on time
    raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})")


def stream(system: Any, after: int, wait_s: float = 20.0, session: str = "s1") -> list[EventsRead]:
    """One streamed read of ``session`` through the directory, raw: every answer to it until the final one."""
    request_id = uuid.uuid4().hex
    answers = [system.ask("agent/sessions", ReadEvents(session, after, 256, wait_s, request_id, True), 30.0)]
    while not answers[-1].final:
        following = system.listen_tagged(request_id, 30.0)
        assert isinstance(following, EventsRead), following
        answers.append(following)
    return answers


def slow_script(path: Path, words: int = 40, pace_ms: int = 100) -> Path:
    """A scripted turn that streams ``words`` text chunks ``pace_ms`` apart (time to kill something mid-turn),
    then a short answer for the session's next turn (a runtime continues the conversation from the journal)."""
    chunks = ", ".join(f'{{ kind = "text", text = "w{i} " }}' for i in range(words))
    path.write_text(f"[[turns]]\npace_ms = {pace_ms}\nevents = [{chunks}]\n\n"
                    '[[turns]]\nevents = [{ kind = "text", text = "next" }]\n')
    return path


def three_word_session(system: Any, tmp_path: Path, ws: Path | None = None,
                       arm_first: tuple[str, Any] | None = None) -> Any:
    """The agent tree and session s1 on a three-word scripted turn (``ws``: its workspace); ``arm_first``: a fault
    plan ``(path, plan)`` armed before the session is created (a coordinator's plan reaches the one forked for it).
    The :class:`~ouroactors.sessions.Sessions` it was made with."""
    from ouroactors.sessions import Sessions

    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system)
    if arm_first is not None:
        system.arm_faults(*arm_first)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(
        slow_script(tmp_path / "s.toml", words=3, pace_ms=1))}))
    return sessions


def session_config(ws: Path | None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"sandbox": {"mode": "none"}, **extra}
    if ws is not None:
        config["workspace"] = str(ws)
    return config


def waiting_on_an_approval(system: Any, tmp_path: Path, command: str, ask: str, answer: str,
                           call_id: str = "call_touch", spares: int = 0) -> tuple[Any, Path]:
    """The agent tree whose user rules add ``ask`` (e.g. ``ask:Bash(touch *)``) and session s1, in workspace
    ``<tmp>/ws``, whose scripted model asks for one ``shell`` call of ``command`` and then says ``answer``: sent a
    message and waiting on the call's approval. The :class:`~ouroactors.sessions.Sessions` and the workspace."""
    from ouroactors.sessions import Sessions

    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    script = tmp_path / "ask.toml"
    script.write_text(f'[[turns]]\nevents = [{{ kind = "tool_call", id = "{call_id}", name = "shell", '
                      f'arguments = {{ command = "{command}" }} }}]\n'
                      f'[[turns]]\nevents = [{{ kind = "text", text = "{answer}" }}]\n')
    system.start_tree(agent_tree(str(tmp_path), {"user": [*RULES["user"], ask]}, spares=spares))
    sessions = Sessions(system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "go")
    wait_for("waiting", lambda: sessions.show("s1").state == "waiting:approval")
    return sessions, ws


def suspended_after_a_turn(system: Any, tmp_path: Path) -> Any:
    """The agent tree with session s1 on a two-turn text script, its first turn run and settled (suspended, its
    runtime closed); the :class:`~ouroactors.sessions.Sessions` it was driven with."""
    from ouroactors.sessions import Sessions

    system.start_tree(agent_tree(str(tmp_path)))
    script = tmp_path / "s.toml"
    script.write_text('[[turns]]\nevents = [{ kind = "text", text = "one" }]\n\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "two" }]\n')
    sessions = Sessions(system)
    sessions.new("s1", session_config(None, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "hello")
    wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    wait_for("its runtime closed", lambda: not [c for c in system.which_children("agent/execution")
                                                if c.status == "running"])
    return sessions


def child_path(system: Any, supervisor: str) -> str:
    """The path of ``supervisor``'s one running child."""
    running = [c for c in system.which_children(supervisor) if c.status == "running"]
    assert len(running) == 1, running
    return f"{supervisor}/{running[0].id}"


def live_leases(system: Any) -> list[Any]:
    from ouroactors.authorities.asking import ask_authority

    return list(ask_authority(system, "agent/workspace", "leases"))


def recover_with_coordinator_killed_at(system: Any, tmp_path: Path, point: str, timeout: float) -> tuple[Any, Any]:
    """Run session s1 mid-turn, arm its coordinator to die at ``point``, kill the runtimes (their lease becomes a
    reservation the recovery reclaims) and wait for the kill to fire; the record before and the lease lost."""
    from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
    from ouroactors.sessions import Sessions

    ws = tmp_path / "ws"
    ws.mkdir()
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted",
                                                 "script": str(slow_script(tmp_path / "slow.toml"))}))
    sessions.send("s1", "talk slowly")
    before = wait_for("some output committed", lambda: (v := sessions.show("s1")).committed_cursor >= 4 and v)
    [lost] = live_leases(system)
    assert lost.status == "active"
    coordinator = child_path(system, "agent/coordinator")
    system.arm_faults(coordinator, FaultPlan((FaultRule(point, FaultAction.KILL, nth=1),)))
    system.kill(child_path(system, "agent/execution"))  # its lease becomes a reservation: recovery reclaims it
    fired = system.wait_for("fault_fired", coordinator, timeout=timeout)
    assert fired.fields["point"] == point and fired.fields["action"] == "kill"
    return before, lost
