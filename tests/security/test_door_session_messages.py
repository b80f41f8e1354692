"""The door on the session boundary's messages, pure (no actors): runtime, coordinator and directory.

Every message a session runtime, a coordinator or the session directory accepts — the runtime's requests, the
pushes (``OutputReady`` carrying events), the directory's ``Committed`` nudge, the ``ForSession`` wrapper the
directory hands a coordinator, the wait / complete-job commands — must be listed in its receiver's ``protocol``
(checked by :func:`ouroactors.core.boundary.check_message` before a handler runs) and its annotations must say
what a well-formed one is: a bad field is a :class:`BadRequest` naming the message and the field, never a crash.
The real-process side (nothing durable changes, nothing restarts) is ``test_door_session_actors``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from thespian.actors import ActorAddress

from ouroactors.authorities.ledger.messages import RecordBatch, RecordSettled
from ouroactors.core.boundary import Data, check_field, check_message
from ouroactors.core.errors import BadRequest
from ouroactors.runtime.coordinator import messages as coordinator
from ouroactors.runtime.coordinator.actor import Coordinator
from ouroactors.runtime.coordinator.directory import Sessions
from ouroactors.runtime.execution import messages as execution
from ouroactors.runtime.execution.output import OutputEvent
from ouroactors.runtime.execution.runtime import Runtime

ADDRESS = ActorAddress("somewhere")


def event(cursor: int = 1, kind: str = "text", turn: int = 1, data: Any = None) -> OutputEvent:
    return OutputEvent(cursor, kind, turn, {"text": "hi"} if data is None else data)


# One well-formed instance of every message a runtime, a coordinator or the directory accepts.
GOOD: dict[type, Any] = {
    execution.OpenSession: execution.OpenSession("s1", {"sandbox": {"mode": "none"}}, None, ADDRESS),
    execution.SendText: execution.SendText("hello"),
    execution.SteerTurn: execution.SteerTurn("also this"),
    execution.InterruptTurn: execution.InterruptTurn(),
    execution.CloseSession: execution.CloseSession(False),
    execution.DrainOutput: execution.DrainOutput(3, 10),
    execution.AckOutput: execution.AckOutput(3),
    execution.RuntimeStatusRequest: execution.RuntimeStatusRequest(),
    execution.SubscribeOutput: execution.SubscribeOutput(ADDRESS),
    execution.OutputReady: execution.OutputReady("s1", "r" * 32, 2, (event(1), event(2))),
    coordinator.NewSession: coordinator.NewSession("s1", {}, "user:me"),
    coordinator.ListSessions: coordinator.ListSessions(True),
    coordinator.ShowSession: coordinator.ShowSession("s1"),
    coordinator.ReadEvents: coordinator.ReadEvents("s1", 0, 10, 1.5),
    coordinator.StopReading: coordinator.StopReading("s1", "a" * 32),
    coordinator.SendMessage: coordinator.SendMessage("s1", "hi", "user:me", "m-1", expected_version=2),
    coordinator.SteerSession: coordinator.SteerSession("s1", "more", "user:me"),
    coordinator.ControlSession: coordinator.ControlSession("s1", "cancel", "user:me"),
    coordinator.WaitSession: coordinator.WaitSession("s1", "wake up", "user:me", seconds=2.5),
    coordinator.CompleteJob: coordinator.CompleteJob("s1", "job-1", "user:me", "j-1", {"ok": True}, expected_version=3),
    coordinator.ApprovalAnswered: coordinator.ApprovalAnswered("s1", "approval-1"),
    coordinator.WhichSession: coordinator.WhichSession(),
    coordinator.ForSession: coordinator.ForSession(ADDRESS, coordinator.SendMessage("s1", "hi", "user:me", "m-1")),
    coordinator.Committed: coordinator.Committed("s1", 7),
    coordinator.RuntimeStarted: coordinator.RuntimeStarted("s1"),
    coordinator.Taken: coordinator.Taken("s1", 3),
    coordinator.SpareWanted: coordinator.SpareWanted("s1"),
}

# Who receives each of them (the actor class whose protocol must list it).
RECEIVER: dict[type, type] = {
    **{t: Runtime for t in execution.REQUESTS},
    **{t: Sessions for t in coordinator.REQUESTS},
    coordinator.Committed: Sessions, coordinator.RuntimeStarted: Sessions, coordinator.Taken: Sessions,
    coordinator.SpareWanted: Sessions,
    coordinator.ForSession: Coordinator, coordinator.WhichSession: Coordinator, execution.OutputReady: Coordinator,
}


def unchecked(cls: type, **fields: Any) -> Any:
    """As unpickling builds a message: no __init__, no __post_init__; a good one's fields, some replaced."""
    message = cls.__new__(cls)
    object.__setattr__(message, "__dict__", {**GOOD[cls].__dict__, **fields})
    return message


def raw_event(**fields: Any) -> OutputEvent:
    out = OutputEvent.__new__(OutputEvent)
    object.__setattr__(out, "__dict__", {**event().__dict__, **fields})
    return out


def test_every_message_of_the_session_boundary_has_a_good_sample_and_a_receiver():
    messages = {t for t in (*execution.REQUESTS, *coordinator.REQUESTS)} | {
        execution.OutputReady, coordinator.Committed, coordinator.RuntimeStarted, coordinator.ForSession,
        coordinator.WhichSession, coordinator.Taken, coordinator.SpareWanted}
    assert messages == set(GOOD) == set(RECEIVER) == {*coordinator.DIRECTORY_REQUESTS, *execution.REQUESTS,
                                                      *coordinator.COORDINATOR_REQUESTS}


@pytest.mark.parametrize("cls", sorted(GOOD, key=lambda t: t.__name__), ids=lambda t: t.__name__)
def test_a_well_formed_message_passes_the_door_unchanged(cls):
    assert check_message(unchecked(cls)) == GOOD[cls]


@pytest.mark.parametrize("cls", sorted(set(RECEIVER) - {coordinator.ForSession, coordinator.WhichSession,
                                                       execution.OutputReady}, key=lambda t: t.__name__),
                         ids=lambda t: t.__name__)
def test_every_message_is_checked_at_its_receivers_door(cls):
    assert cls in RECEIVER[cls].protocol, f"{RECEIVER[cls].__name__}.protocol does not list {cls.__name__}"


@pytest.mark.parametrize("cls", [coordinator.ForSession, coordinator.WhichSession, execution.OutputReady],
                         ids=lambda t: t.__name__)
def test_the_coordinator_checks_what_it_accepts_at_its_door(cls):
    assert cls in Coordinator.protocol, f"Coordinator.protocol does not list {cls.__name__}"


def test_the_coordinators_protocol_is_named_next_to_its_messages():
    assert set(coordinator.COORDINATOR_REQUESTS) == {coordinator.ForSession, coordinator.WhichSession,
                                                     execution.OutputReady}


BAD: list[tuple[type, dict[str, Any], str]] = [
    # the runtime's pushes: OutputReady carrying events
    (execution.OutputReady, {"session_id": None}, "session_id"),
    (execution.OutputReady, {"session_id": ""}, "session_id"),
    (execution.OutputReady, {"session_id": "s" * 201}, "session_id"),
    (execution.OutputReady, {"runtime_id": 7}, "runtime_id"),
    (execution.OutputReady, {"runtime_id": "r" * 600}, "runtime_id"),
    (execution.OutputReady, {"produced": -1}, "produced"),
    (execution.OutputReady, {"produced": 2**63}, "produced"),
    (execution.OutputReady, {"produced": True}, "produced"),
    (execution.OutputReady, {"produced": 2.0}, "produced"),
    (execution.OutputReady, {"events": None}, "events"),
    (execution.OutputReady, {"events": "junk"}, "events"),
    (execution.OutputReady, {"events": ("junk",)}, "events[0]"),
    (execution.OutputReady, {"events": (raw_event(cursor=None),)}, "events[0].cursor"),
    (execution.OutputReady, {"events": (raw_event(data="text"),)}, "events[0].data"),
    (execution.OutputReady, {"events": (raw_event(data={"x": math.nan}),)}, "events[0].data"),
    (execution.OutputReady, {"produced": 300, "events": tuple(event(i) for i in range(1, 300))}, "events"),
    (execution.OutputReady, {"produced": 1, "events": (event(2),)}, "events[0].cursor"),  # beyond produced
    (execution.OutputReady, {"events": (event(0),)}, "events[0].cursor"),
    (execution.OutputReady, {"events": (event(-5),)}, "events[0].cursor"),
    (execution.OutputReady, {"events": (event(2), event(1))}, "events[1].cursor"),  # goes back
    (execution.OutputReady, {"events": (event(1), event(1))}, "events[1].cursor"),  # a duplicate
    # the runtime's reader requests
    (execution.SubscribeOutput, {"subscriber": "coordinator"}, "subscriber"),
    (execution.SubscribeOutput, {"subscriber": 5}, "subscriber"),
    (execution.DrainOutput, {"after": -1}, "after"),
    (execution.DrainOutput, {"after": 2**63}, "after"),
    (execution.DrainOutput, {"after": None}, "after"),
    (execution.DrainOutput, {"after": "0"}, "after"),
    (execution.DrainOutput, {"limit": 0}, "limit"),
    (execution.DrainOutput, {"limit": 5000}, "limit"),
    (execution.DrainOutput, {"limit": math.nan}, "limit"),
    (execution.AckOutput, {"cursor": -1}, "cursor"),
    (execution.AckOutput, {"cursor": 2**70}, "cursor"),
    (execution.AckOutput, {"cursor": None}, "cursor"),
    (execution.AckOutput, {"cursor": 1.0}, "cursor"),
    (execution.OpenSession, {"start": -3}, "start"),
    (execution.OpenSession, {"subscriber": "me"}, "subscriber"),
    (execution.OpenSession, {"answered": ("a",) * 65}, "answered"),
    (execution.CloseSession, {"settle": "no"}, "settle"),
    # the directory's nudge
    (coordinator.Committed, {"session_id": None}, "session_id"),
    (coordinator.Committed, {"session_id": 5}, "session_id"),
    (coordinator.Committed, {"session_id": ""}, "session_id"),
    (coordinator.Committed, {"session_id": "s" * 600}, "session_id"),
    (coordinator.Committed, {"cursor": -1}, "cursor"),
    (coordinator.Committed, {"cursor": 2**70}, "cursor"),
    (coordinator.Committed, {"cursor": "1"}, "cursor"),
    (coordinator.Committed, {"cursor": math.nan}, "cursor"),
    (coordinator.Committed, {"cursor": True}, "cursor"),
    # the coordinator's word that it started a cold command's runtime
    (coordinator.RuntimeStarted, {"session_id": None}, "session_id"),
    (coordinator.RuntimeStarted, {"session_id": "s" * 600}, "session_id"),
    (coordinator.RuntimeStarted, {"session_id": b"s1"}, "session_id"),
    # the coordinator's word that it took a forwarded command
    (coordinator.Taken, {"ticket": 0}, "ticket"),
    (coordinator.Taken, {"ticket": -1}, "ticket"),
    (coordinator.Taken, {"ticket": 2**70}, "ticket"),
    (coordinator.Taken, {"ticket": "3"}, "ticket"),
    (coordinator.Taken, {"ticket": True}, "ticket"),
    (coordinator.Taken, {"session_id": None}, "session_id"),
    (coordinator.Taken, {"returned": "yes"}, "returned"),
    (coordinator.Taken, {"returned": None}, "returned"),
    (coordinator.Taken, {"answered": True, "returned": True}, "returned"),
    # a coordinator asking its directory for a spare runtime
    (coordinator.SpareWanted, {"session_id": None}, "session_id"),
    (coordinator.SpareWanted, {"session_id": "../s1"}, "session_id"),
    (coordinator.SpareWanted, {"session_id": "s" * 100_000}, "session_id"),
    (coordinator.SpareWanted, {"session_id": 7}, "session_id"),
    (coordinator.SpareWanted, {"session_id": float("nan")}, "session_id"),
    # the directory -> a coordinator
    (coordinator.ForSession, {"reply_to": None}, "reply_to"),
    (coordinator.ForSession, {"ticket": -1}, "ticket"),
    (coordinator.ForSession, {"ticket": "7"}, "ticket"),
    (coordinator.ForSession, {"tag": ""}, "tag"),
    (coordinator.ForSession, {"tag": 7}, "tag"),
    (coordinator.ForSession, {"tag": "t" * 100_000}, "tag"),
    (coordinator.ForSession, {"tag": float("inf")}, "tag"),
    (coordinator.ForSession, {"ticket": 1.5}, "ticket"),
    (coordinator.ForSession, {"reply_to": "someone"}, "reply_to"),
    (coordinator.ForSession, {"request": None}, "request"),
    (coordinator.ForSession, {"request": "junk"}, "request"),
    (coordinator.ForSession, {"request": coordinator.NewSession("s1", {}, "me")}, "request"),  # not a command
    (coordinator.ForSession, {"request": unchecked(coordinator.SendMessage, text=None)}, "request.text"),
    (coordinator.ForSession, {"request": unchecked(coordinator.SendMessage, expected_version=2**70)},
     "request.expected_version"),
    (coordinator.ForSession, {"request": unchecked(coordinator.ControlSession, action="explode")}, "request.action"),
    (coordinator.ForSession, {"request": unchecked(coordinator.WaitSession, job_id="j1")}, "request.seconds"),
    (coordinator.ForSession, {"request": unchecked(coordinator.CompleteJob, result={1, 2})}, "request.result"),
    # `session wait` / `complete-job`
    (coordinator.WaitSession, {"seconds": math.inf}, "seconds"),
    (coordinator.WaitSession, {"seconds": math.nan}, "seconds"),
    (coordinator.WaitSession, {"seconds": -1.0}, "seconds"),
    (coordinator.WaitSession, {"seconds": 1e12}, "seconds"),
    (coordinator.WaitSession, {"seconds": "5"}, "seconds"),
    (coordinator.WaitSession, {"seconds": True}, "seconds"),
    (coordinator.WaitSession, {"seconds": None}, "seconds"),  # neither a timer nor a job
    (coordinator.WaitSession, {"job_id": "j1"}, "seconds"),  # both
    (coordinator.WaitSession, {"seconds": None, "job_id": ""}, "job_id"),
    (coordinator.WaitSession, {"seconds": None, "job_id": "j" * 201}, "job_id"),
    (coordinator.WaitSession, {"seconds": None, "job_id": "a\x00b"}, "job_id"),
    (coordinator.WaitSession, {"seconds": None, "job_id": "j1", "expires_s": 0.0}, "expires_s"),
    (coordinator.WaitSession, {"seconds": None, "job_id": "j1", "expires_s": -5.0}, "expires_s"),
    (coordinator.WaitSession, {"seconds": None, "job_id": "j1", "expires_s": math.inf}, "expires_s"),
    (coordinator.WaitSession, {"seconds": None, "job_id": "j1", "expires_s": math.nan}, "expires_s"),
    (coordinator.WaitSession, {"seconds": None, "job_id": "j1", "expires_s": "60"}, "expires_s"),
    (coordinator.WaitSession, {"expires_s": 60.0}, "expires_s"),  # a timer has no expiry of its own
    (coordinator.SendMessage, {"token": 12345678901234567890}, "token"),  # a principal's token: a str
    (coordinator.SendMessage, {"token": "short"}, "token"),
    (coordinator.SendMessage, {"token": "t" * 257}, "token"),
    (coordinator.ControlSession, {"token": b"x" * 32}, "token"),
    (coordinator.NewSession, {"token": "t" * 10_000}, "token"),
    (coordinator.CompleteJob, {"token": ["t" * 32]}, "token"),
    (coordinator.WaitSession, {"text": ""}, "text"),
    (coordinator.WaitSession, {"text": "x" * 8001}, "text"),
    (coordinator.WaitSession, {"principal": None}, "principal"),
    (coordinator.WaitSession, {"session_id": "s" * 300}, "session_id"),
    (coordinator.CompleteJob, {"job_id": None}, "job_id"),
    (coordinator.CompleteJob, {"job_id": ""}, "job_id"),
    (coordinator.CompleteJob, {"job_id": "j" * 300}, "job_id"),
    (coordinator.CompleteJob, {"job_id": "j\udcff"}, "job_id"),
    (coordinator.CompleteJob, {"event_id": None}, "event_id"),
    (coordinator.CompleteJob, {"result": {1, 2}}, "result"),
    (coordinator.CompleteJob, {"result": "x" * 17_000}, "result"),
    (coordinator.CompleteJob, {"result": {"x": math.nan}}, "result"),
    (coordinator.CompleteJob, {"expected_version": -1}, "expected_version"),
    (coordinator.CompleteJob, {"expected_version": 2**63}, "expected_version"),
    (coordinator.CompleteJob, {"expected_version": "3"}, "expected_version"),
    (coordinator.CompleteJob, {"channel": ""}, "channel"),
    (coordinator.ReadEvents, {"wait_s": math.inf}, "wait_s"),
    (coordinator.ReadEvents, {"wait_s": 61.0}, "wait_s"),
    (coordinator.ReadEvents, {"after": -1}, "after"),
    (coordinator.ReadEvents, {"limit": 0}, "limit"),
    (coordinator.ReadEvents, {"request_id": "r" * 65}, "request_id"),  # echoed in the answer: kept short and plain
    (coordinator.ReadEvents, {"request_id": "r id"}, "request_id"),
    (coordinator.ReadEvents, {"request_id": 7}, "request_id"),
    (coordinator.ReadEvents, {"stream": "yes"}, "stream"),
    (coordinator.StopReading, {"request_id": "r" * 65}, "request_id"),  # a reader's stream to end: its own id
    (coordinator.StopReading, {"request_id": None}, "request_id"),
    (coordinator.StopReading, {"session_id": "s 1"}, "session_id"),
    (coordinator.StopReading, {"principal": 3}, "principal"),
    (coordinator.Committed, {"served": ("ok", "not ok")}, "served[1]"),  # the ids of lent polls a coordinator answered
    (coordinator.Committed, {"served": tuple(f"r{i}" for i in range(257))}, "served"),
    (coordinator.Committed, {"served": "r1"}, "served"),
    (coordinator.SendMessage, {"text": ""}, "text"),
    (coordinator.SendMessage, {"event_id": "e" * 201}, "event_id"),
    (coordinator.ControlSession, {"action": "explode"}, "action"),
    (coordinator.ApprovalAnswered, {"approval_id": None}, "approval_id"),
    (coordinator.NewSession, {"config": {"x": {1, 2}}}, "config"),
    # ids that become LMDB keys and journal names
    (coordinator.NewSession, {"session_id": "s+1"}, "session_id"),  # a record key, but not a journal name
    (coordinator.NewSession, {"session_id": "a/b"}, "session_id"),
    (coordinator.ShowSession, {"session_id": ":"}, "session_id"),
    (coordinator.ReadEvents, {"session_id": "s 1"}, "session_id"),
    (coordinator.SendMessage, {"event_id": "m 1"}, "event_id"),
    (coordinator.WaitSession, {"seconds": None, "job_id": "job 1"}, "job_id"),
    (coordinator.CompleteJob, {"job_id": "job/1"}, "job_id"),
    (coordinator.CompleteJob, {"event_id": "-e"}, "event_id"),
    (coordinator.ApprovalAnswered, {"approval_id": "a/1"}, "approval_id"),
    (coordinator.Committed, {"session_id": "s\n1"}, "session_id"),
    (execution.OpenSession, {"session_id": "s+1"}, "session_id"),
    (execution.OutputReady, {"session_id": "s:1/x"}, "session_id"),
]


@pytest.mark.parametrize(("cls", "fields", "where"), BAD,
                         ids=[f"{c.__name__}-{'-'.join(f)}-{i}" for i, (c, f, _) in enumerate(BAD)])
def test_a_bad_field_is_refused_naming_the_message_and_the_field(cls, fields, where):
    with pytest.raises(BadRequest) as caught:
        check_message(unchecked(cls, **fields))
    assert (caught.value.message, caught.value.field) == (cls.__name__, where), caught.value


def test_a_nested_records_own_cross_field_check_runs_too():
    """A ledger batch carried a settlement claiming an operator (``by="operator:…"``), which the same settlement
    sent alone is refused for: the nested record's ``check`` did not run."""
    forged = RecordSettled("e1", "ok", by="runner")
    object.__setattr__(forged, "by", "operator:alice")
    with pytest.raises(BadRequest) as caught:
        check_message(forged)
    assert caught.value.field == "by"
    with pytest.raises(BadRequest) as caught:
        check_message(RecordBatch((forged,)))
    assert (caught.value.message, caught.value.field) == ("RecordBatch", "items[0].by"), caught.value


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=140), st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@+\-/ ]{0,130}", fullmatch=True)))
def test_an_id_the_door_admits_is_one_the_journal_and_the_store_can_key(text):
    from ouroactors.runtime.coordinator.record import check_id
    from ouroactors.runtime.execution.journal import check_session

    try:
        check_field(coordinator.NewSession, "session_id", text)
    except BadRequest:
        pass
    else:
        check_session(text)  # the runtime's journal
        check_id(text, "session_id")  # the coordinator's record keys
    try:
        check_field(coordinator.CompleteJob, "event_id", text)
    except BadRequest:
        pass
    else:
        check_id(text, "event_id")


@dataclass(frozen=True)
class Carrier:
    data: Annotated[dict[str, Any], Data(10_000)]
    small: dict[str, Any] | None = None


def test_a_data_bound_on_a_dict_bounds_the_whole_dict_not_each_value():
    assert check_message(Carrier({"prompt": "x" * 8000})).data["prompt"] == "x" * 8000  # one value over 4 KB
    with pytest.raises(BadRequest) as caught:
        check_message(Carrier({"a": "x" * 6000, "b": "y" * 6000}))  # together over the bound
    assert caught.value.field == "data"
    with pytest.raises(BadRequest) as caught:
        check_message(Carrier({1: "x"}))  # type: ignore[dict-item]
    assert caught.value.field == "data<key>"
    with pytest.raises(BadRequest) as caught:
        check_message(Carrier({}, {"prompt": "x" * 8000}))  # unbounded by a Data: each value, 4 KB
    assert caught.value.field == "small['prompt']"


def test_a_push_of_a_long_prompt_the_runtime_really_emits_passes_the_door():
    """``turn_started`` carries the turn's prompt (up to 200,000 bytes): the coordinator's door must admit it."""
    pushed = execution.OutputReady("s1", "r" * 32, 1, (event(1, "turn_started", 1, {"prompt": "p" * 200_000}),))
    assert check_message(pushed) == pushed


junk = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
              st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
              st.sampled_from(["s" * 600, "x\udcff", "\x00", "", "-1"]), st.binary(max_size=12),
              st.just(ADDRESS), st.builds(raw_event, cursor=st.integers(-3, 3)),
              st.sampled_from(list(GOOD.values()))),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
                            st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=3)),
    max_leaves=8)


@st.composite
def tampered(draw: st.DrawFn) -> tuple[type, str, Any]:
    cls = draw(st.sampled_from(sorted(GOOD, key=lambda t: t.__name__)))
    names = [f.name for f in dataclasses.fields(cls)]
    if not names:
        return cls, "", unchecked(cls)
    name = draw(st.sampled_from(names))
    return cls, name, unchecked(cls, **{name: draw(junk)})


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(tampered())
def test_any_value_in_any_field_is_admitted_or_refused_never_anything_else(case):
    cls, name, message = case
    try:
        rebuilt = check_message(message)
    except BadRequest as refused:
        assert refused.message == cls.__name__
        top = refused.field.split(".")[0].split("[")[0].split("<")[0]
        assert top == name or hasattr(cls, "check"), refused
    else:
        assert type(rebuilt) is cls
