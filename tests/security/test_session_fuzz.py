"""Fuzz the session boundary's doors: random instances of every message a runtime, a coordinator or the session
directory accepts, against the real agent tree (the coordinator with the door its actor needs, see
``session_door_support``).

As ``test_message_fuzz`` does for the four authorities: hypothesis builds instances of every runtime request, every
directory request (and the ``Committed`` nudge), and ``ForSession`` / ``WhichSession`` / ``OutputReady`` for a
coordinator, with random field values — None, huge and negative ints, inf/nan, over-long and surrogate strings,
bytes, wrong types, nested commands and events built without validation, as unpickling builds them — and sends
each to its receiver. Then:

* a malformed one is answered :class:`BadRequest`; a well-formed harmless one (a read, or a request to a runtime
  with no session open) gets an answer, never a crash or a silence;
* nothing restarted and nothing durable changed (every LMDB database, by digest).

A well-formed message that would change state by design (a ``NewSession``, a ``SendMessage`` …) is not sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ouroactors.core.boundary import check_message
from ouroactors.core.errors import ActorCrashed, AskTimeout, BadRequest, NoSuchActor, OuroactorsError
from ouroactors.runtime.coordinator import messages as coordinator
from ouroactors.runtime.execution import messages as execution
from ouroactors.runtime.execution.output import OutputEvent

from .session_door_support import DOORED, agent_tree, coordinator_path, crashes, durable, liveness, script
from .test_message_fuzz import junk, names

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

RUNTIME, DIRECTORY, COORDINATOR = "runtime", "directory", "coordinator"
RECEIVER: dict[type, str] = {
    **{t: RUNTIME for t in execution.REQUESTS},
    **{t: DIRECTORY for t in coordinator.DIRECTORY_REQUESTS},
    **{t: COORDINATOR for t in coordinator.COORDINATOR_REQUESTS},
}
# Well-formed, these change nothing: reads, and every request to a runtime with no session open (NotOpen) but
# opening one; a stranger's Committed, RuntimeStarted, Taken, SpareWanted or OutputReady (refused: not the
# coordinator, not the attached runtime).
HARMLESS_WHEN_VALID = {
    coordinator.ListSessions, coordinator.ShowSession, coordinator.Committed, coordinator.RuntimeStarted,
    coordinator.Taken, coordinator.SpareWanted,
    coordinator.WhichSession, execution.OutputReady, *(set(execution.REQUESTS) - {execution.OpenSession}),
}


def unbuilt(cls: type, fields: dict[str, Any]) -> Any:
    message = cls.__new__(cls)
    object.__setattr__(message, "__dict__", fields)  # as unpickled: no __init__ ran
    return message


@st.composite
def events(draw: st.DrawFn) -> OutputEvent:
    good = {"cursor": draw(st.integers(0, 3)), "kind": "text", "turn": 1, "data": {"text": "x"}}
    bad = draw(st.lists(st.sampled_from(sorted(good)), max_size=2, unique=True))
    return unbuilt(OutputEvent, {k: (draw(junk) if k in bad else v) for k, v in good.items()})


@st.composite
def commands(draw: st.DrawFn) -> Any:
    cls = draw(st.sampled_from(sorted(coordinator.COMMANDS, key=lambda t: t.__name__)))
    return unbuilt(cls, draw(field_values(cls)))


def field_values(cls: type) -> st.SearchStrategy[dict[str, Any]]:
    nested: dict[str, st.SearchStrategy[Any]] = {
        "request": st.one_of(commands(), junk),
        "events": st.one_of(st.lists(st.one_of(events(), junk), max_size=3).map(tuple), junk),
        "session_id": st.one_of(st.just("s-fz"), names, junk),
    }
    return st.fixed_dictionaries({f.name: st.one_of(nested.get(f.name, junk), names, junk)
                                  for f in dataclasses.fields(cls)})


@st.composite
def messages(draw: st.DrawFn) -> tuple[type, Any]:
    """Every field random, or a well-formed message with one field replaced (the handlers behind the door see
    near-valid input too)."""
    from .test_door_session_messages import GOOD

    cls = draw(st.sampled_from(sorted(RECEIVER, key=lambda t: t.__name__)))
    fields = [f.name for f in dataclasses.fields(cls)]
    if not fields or draw(st.booleans()):
        return cls, unbuilt(cls, draw(field_values(cls)))
    name = draw(st.sampled_from(fields))
    return cls, unbuilt(cls, {**GOOD[cls].__dict__, name: draw(field_values(cls))[name]})


def classify(message: Any) -> str:
    try:
        valid = check_message(message)
    except BadRequest:
        return "bad"
    except Exception as exc:  # the checker itself must never fail otherwise
        raise AssertionError(f"check_message raised {type(exc).__name__}: {exc}") from exc
    if type(valid) is coordinator.ReadEvents:
        return "harmless" if valid.wait_s == 0 else "mutating"  # a held long poll is not an answer
    return "harmless" if type(valid) in HARMLESS_WHEN_VALID else "mutating"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from ouroactors.sessions import Sessions
    from ouroactors.system.handle import ActorSystem
    from ouroactors.testing.leaks import assert_nothing_left

    from .test_door_session_actors import wait_until

    tmp = tmp_path_factory.mktemp("session-fuzz")
    system = ActorSystem.start("multiproc", data_dir=tmp / "data")
    try:
        system.start_tree(agent_tree(str(tmp), DOORED))
        sessions = Sessions(system)
        sessions.new("s-fz", script(tmp / "s.toml"))
        sessions.send("s-fz", "hello")
        wait_until("settled", lambda: sessions.show("s-fz").state == "suspended")
        idle = system.start_child("agent/execution")  # a runtime with no session open
        paths = {RUNTIME: f"agent/execution/{idle.id}", DIRECTORY: "agent/sessions",
                 COORDINATOR: coordinator_path(system, "s-fz")}
        # the settled session's runtime is gone and its record swept; the idle one has committed nothing, so it is
        # not registered (a writer's record rides in its first commit)
        quiet = wait_until("quiet", lambda: (d := durable(tmp / "data"))["ledger_writers"][0] == 0 and d)
        yield {"system": system, "paths": paths, "data": tmp / "data", "durable": quiet,
               "live": liveness(system), "mark": system.mark()}
    finally:
        system.shutdown()
        assert_nothing_left(system)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=messages())
def test_random_session_messages_never_crash_an_actor_or_change_anything(node, case):
    cls, message = case
    kind = classify(message)
    event(f"{RECEIVER[cls]} {kind}")
    if kind == "mutating":
        return  # well-formed and state-changing by design: not bad input
    path = node["paths"][RECEIVER[cls]]
    try:
        answer = node["system"].ask(path, message, timeout=10.0)
    except (ActorCrashed, AskTimeout, NoSuchActor) as exc:
        pytest.fail(f"{cls.__name__} crashed or silenced {path}: {exc!r}")
    except OuroactorsError as exc:
        answer = exc
    if kind == "bad":
        assert isinstance(answer, BadRequest) and answer.message == cls.__name__, (message, answer)


def test_after_the_fuzz_nothing_restarted_and_nothing_durable_changed(node):
    """Runs after the fuzz (same module, same system)."""
    assert liveness(node["system"]) == node["live"]
    assert durable(node["data"]) == node["durable"]
    assert not crashes(node["system"], node["mark"])


def test_the_fuzz_covers_every_message_the_session_actors_accept():
    assert set(RECEIVER) == {*execution.REQUESTS, *coordinator.REQUESTS, coordinator.Committed,
                             coordinator.RuntimeStarted, coordinator.Taken, coordinator.SpareWanted,
                             coordinator.ForSession,
                             coordinator.WhichSession, execution.OutputReady}
