"""The session boundary's messages attacked on real processes: the directory, a coordinator, a runtime.

The agent tree runs on a real multiproc system with LMDB on disk. Each attack sends malformed or forged
messages — wrong types, None, huge, negative and non-finite numbers, over-long ids, oversized event lists, a
push forged by something that is not the session's runtime, a ``Committed`` nudge for another session or a
cursor that is not durable or goes back, a ``SubscribeOutput`` from a stranger, ``session wait`` and
``complete-job`` commands that are malformed or name an unknown job, another session or a stale version — and
checks three things: the answer is a typed refusal naming the message and the field (or a recorded
``Rejected`` for a resume event, by design), every LMDB database is as before (digests, read in another
process; a recorded rejection is the one durable change a refused resume event makes), and no actor crashed or
restarted (same pids, generations, restart counts, no crash event).

The coordinator's door is its ``protocol`` (``ForSession``, ``WhichSession``, ``OutputReady`` checked before its
handler), the sender of a push (the attached runtime only) and the Worker base's rule that a timer comes from the
actor itself; the attacks run against the real coordinator, and against
:class:`~.session_door_support.DooredCoordinator` (the real one plus a way to make it send a forged nudge).
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from thespian.actors import WakeupMessage

from ouroactors.core.errors import BadRequest, ChildNotFound, OuroactorsError
from ouroactors.runtime.coordinator import messages as coordinator
from ouroactors.runtime.coordinator.errors import UnknownSession
from ouroactors.runtime.execution import messages as execution
from ouroactors.runtime.execution.output import OutputEvent
from ouroactors.sessions import SessionRejected, Sessions

from .session_door_support import (
    DOORED,
    REAL,
    Nudge,
    agent_tree,
    coordinator_path,
    crashes,
    durable,
    liveness,
    runtime_path,
    script,
    spray_ask_timers,
)

pytestmark = pytest.mark.multiproc
DIRECTORY = "agent/sessions"


def unchecked(cls: type, good: Any, **fields: Any) -> Any:
    """As unpickling builds a message: a good one's fields, some replaced, no __init__."""
    message = cls.__new__(cls)
    object.__setattr__(message, "__dict__", {**good.__dict__, **fields})
    return message


def raw_event(**fields: Any) -> OutputEvent:
    out = OutputEvent.__new__(OutputEvent)
    object.__setattr__(out, "__dict__", {**OutputEvent(1, "text", 1, {"text": "x"}).__dict__, **fields})
    return out


def wait_until(what: str, probe: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except OuroactorsError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.05)  # polling another process's durable state with a deadline
    raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})")


class Node:
    """A running agent tree and what the attacks compare before and after."""

    def __init__(self, system: Any, data_dir: Path, tmp: Path) -> None:
        self.system, self.data_dir, self.tmp = system, data_dir, tmp
        self.sessions = Sessions(system, follow_direct=False)  # the directory's door is tested here

    def settled(self, session_id: str, **kw: Any) -> coordinator.SessionView:
        """A session created with one settled turn (suspended, its coordinator knows the directory)."""
        self.sessions.new(session_id, script(self.tmp / f"{session_id}.toml", **kw))
        self.sessions.send(session_id, "hello")
        return wait_until("the first turn settled", lambda: (v := self.sessions.show(session_id)).state ==
                          "suspended" and v.committed_cursor > 0 and v)

    def before(self) -> dict[str, Any]:
        """What ``unchanged`` compares, once the node is quiet: a closed runtime's ledger-writer record is removed
        by the ledger's own sweep, a write of its own that no attack caused; and a settled session's runtime has
        exited (it is closed after the session is shown suspended, and one whose turns ran no tool has no writer
        record to wait for). This node keeps no spare runtimes: every runtime is a session's."""
        wait_until("no runtime running", lambda: not any(
            child.status == "running" for child in self.system.which_children("agent/execution")))
        quiet = wait_until("no runtime's writer record left", lambda: (d := durable(self.data_dir))
                           ["ledger_writers"][0] == 0 and d)
        return {"durable": quiet, "live": liveness(self.system), "mark": self.system.mark()}

    def unchanged(self, before: dict[str, Any], *, rejected: bool = False) -> None:
        """Nothing durable changed (``rejected``: but for a recorded rejection, in ``session_resume``), nothing
        restarted."""
        after, was = durable(self.data_dir), dict(before["durable"])
        if rejected:
            assert after.pop("session_resume") != was.pop("session_resume")
        assert after == was
        assert liveness(self.system) == before["live"]
        assert not crashes(self.system, before["mark"])


def start_node(tmp: Path, coordinator_class: str) -> Iterator[Node]:
    from ouroactors.system.handle import ActorSystem
    from ouroactors.testing.leaks import assert_nothing_left

    data_dir = tmp / "data"
    system = ActorSystem.start("multiproc", data_dir=data_dir)
    try:
        system.start_tree(agent_tree(str(tmp), coordinator_class))
        yield Node(system, data_dir, tmp)
    finally:
        system.shutdown()
        assert_nothing_left(system)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """The agent tree with the coordinator door (what actor.py needs) — shared by the attacks of this module."""
    yield from start_node(tmp_path_factory.mktemp("doored"), DOORED)


def refused(system: Any, path: str, message: Any, timeout: float = 10.0) -> BadRequest:
    try:
        answer = system.ask(path, message, timeout=timeout)
    except BadRequest as exc:
        return exc
    except OuroactorsError as exc:
        pytest.fail(f"{type(message).__name__} to {path}: {type(exc).__name__}: {exc}")
    pytest.fail(f"{type(message).__name__} to {path} was taken: {answer!r}")


# -- the directory's door: session wait, complete-job, reads, the Committed nudge ----------------------------------

GOOD_WAIT = coordinator.WaitSession("s-dir", "wake up", "user:x", seconds=5.0)
GOOD_JOB = coordinator.CompleteJob("s-dir", "job-1", "user:x", "j-1")
GOOD_READ = coordinator.ReadEvents("s-dir")
GOOD_STEER = coordinator.SteerSession("s-dir", "and be brief", "user:x")

DIRECTORY_ATTACKS = [
    (coordinator.WaitSession, GOOD_WAIT, {"seconds": math.inf}, "seconds"),
    (coordinator.WaitSession, GOOD_WAIT, {"seconds": math.nan}, "seconds"),
    (coordinator.WaitSession, GOOD_WAIT, {"seconds": -5.0}, "seconds"),
    (coordinator.WaitSession, GOOD_WAIT, {"seconds": 10.0**300}, "seconds"),
    (coordinator.WaitSession, GOOD_WAIT, {"seconds": "5"}, "seconds"),
    (coordinator.WaitSession, GOOD_WAIT, {"seconds": None}, "seconds"),
    (coordinator.WaitSession, GOOD_WAIT, {"job_id": "job-1"}, "seconds"),
    (coordinator.WaitSession, GOOD_WAIT, {"seconds": None, "job_id": "j" * 600}, "job_id"),
    (coordinator.WaitSession, GOOD_WAIT, {"seconds": None, "job_id": "j\x00b"}, "job_id"),
    (coordinator.WaitSession, GOOD_WAIT, {"text": "t" * 9000}, "text"),
    (coordinator.WaitSession, GOOD_WAIT, {"session_id": None}, "session_id"),
    (coordinator.CompleteJob, GOOD_JOB, {"job_id": None}, "job_id"),
    (coordinator.CompleteJob, GOOD_JOB, {"job_id": "j" * 600}, "job_id"),
    (coordinator.CompleteJob, GOOD_JOB, {"job_id": "j\udcff"}, "job_id"),
    (coordinator.CompleteJob, GOOD_JOB, {"event_id": 5}, "event_id"),
    (coordinator.CompleteJob, GOOD_JOB, {"result": "r" * 20_000}, "result"),
    (coordinator.CompleteJob, GOOD_JOB, {"result": {"x": math.nan}}, "result"),
    (coordinator.CompleteJob, GOOD_JOB, {"expected_version": 2**70}, "expected_version"),
    (coordinator.CompleteJob, GOOD_JOB, {"expected_version": -1}, "expected_version"),
    # a steer is journaled by the runtime before it is answered: nothing malformed may get that far
    (coordinator.SteerSession, GOOD_STEER, {"text": None}, "text"),
    (coordinator.SteerSession, GOOD_STEER, {"text": 5}, "text"),
    (coordinator.SteerSession, GOOD_STEER, {"text": ""}, "text"),
    (coordinator.SteerSession, GOOD_STEER, {"text": "t" * 200_001}, "text"),
    (coordinator.SteerSession, GOOD_STEER, {"text": "a\udcffb"}, "text"),
    (coordinator.SteerSession, GOOD_STEER, {"session_id": "s" * 600}, "session_id"),
    (coordinator.SteerSession, GOOD_STEER, {"principal": None}, "principal"),
    (coordinator.ReadEvents, GOOD_READ, {"wait_s": math.inf}, "wait_s"),
    (coordinator.ReadEvents, GOOD_READ, {"after": -1}, "after"),
    # the reader a read names (verified like a command's principal): typed and bounded before anyone looks it up
    (coordinator.ReadEvents, GOOD_READ, {"principal": 5}, "principal"),
    (coordinator.ReadEvents, GOOD_READ, {"principal": "p" * 300}, "principal"),
    (coordinator.ReadEvents, GOOD_READ, {"token": "short"}, "token"),
    (coordinator.ShowSession, coordinator.ShowSession("s-dir"), {"principal": ""}, "principal"),
    (coordinator.ShowSession, coordinator.ShowSession("s-dir"), {"token": b"x" * 32}, "token"),
    (coordinator.ListSessions, coordinator.ListSessions(), {"principal": ["user:x"]}, "principal"),
    (coordinator.ListSessions, coordinator.ListSessions(), {"token": "t" * 300}, "token"),
    (coordinator.Committed, coordinator.Committed("s-dir", 1), {"session_id": None}, "session_id"),
    (coordinator.Committed, coordinator.Committed("s-dir", 1), {"session_id": "s" * 600}, "session_id"),
    (coordinator.Committed, coordinator.Committed("s-dir", 1), {"cursor": -1}, "cursor"),
    (coordinator.Committed, coordinator.Committed("s-dir", 1), {"cursor": 2**70}, "cursor"),
    (coordinator.Committed, coordinator.Committed("s-dir", 1), {"cursor": math.nan}, "cursor"),
]


def test_malformed_session_commands_and_nudges_are_refused_at_the_directory(node):
    node.settled("s-dir")
    before = node.before()
    for cls, good, fields, where in DIRECTORY_ATTACKS:
        bad = refused(node.system, DIRECTORY, unchecked(cls, good, **fields), timeout=5.0)
        assert (bad.message, bad.field) == (cls.__name__, where), (fields, bad)
    node.unchanged(before)


def test_a_forged_committed_nudge_is_refused_and_publishes_nothing(node):
    """From a stranger (the test's endpoint), for another session, beyond the durable cursor, going back:
    refused, naming the field; nothing reaches a reader that is not in the durable log."""
    view = node.settled("s-nudge")
    other = node.settled("s-nudge-other")
    path = coordinator_path(node.system, "s-nudge")
    before = node.before()
    for nudge in (coordinator.Committed("s-nudge", view.committed_cursor),  # the right session, but a stranger's
                  coordinator.Committed("s-nudge", view.committed_cursor + 5),
                  coordinator.Committed("no-such-session", 1)):
        assert refused(node.system, DIRECTORY, nudge).field == "session_id"
    # Sent by the session's own coordinator (what a confused or stale coordinator could send):
    for nudge, where in ((coordinator.Committed("s-nudge", view.committed_cursor + 1), "cursor"),  # not durable
                         (coordinator.Committed("s-nudge", view.committed_cursor - 1), "cursor"),  # goes back
                         (coordinator.Committed("s-nudge-other", other.committed_cursor), "session_id"),
                         (coordinator.Committed("no-such-session", 1), "session_id")):
        bad = refused(node.system, path, Nudge(nudge))
        assert (bad.message, bad.field) == ("Committed", where), (nudge, bad)
    read = node.system.ask(DIRECTORY, coordinator.ReadEvents("s-nudge", view.committed_cursor, 10, 0.2))
    assert read.events == () and read.committed == view.committed_cursor
    node.unchanged(before)


def test_ids_that_cannot_be_keys_are_refused_at_the_door(node):
    """Session, event and job ids become LMDB keys (``record.ID_PATTERN``): one the door admitted but the store
    cannot key (a space, a ``/``, a leading ``:``) reached the coordinator and crashed it there."""
    node.settled("s-ids")
    before = node.before()
    me = node.sessions.principal
    for message, where in ((coordinator.WaitSession("s-ids", "x", me, job_id="job 1"), "job_id"),
                           (coordinator.WaitSession("s-ids", "x", me, job_id="../job"), "job_id"),
                           (coordinator.SendMessage("s-ids", "x", me, "m 1"), "event_id"),
                           (coordinator.SendMessage("s-ids", "x", me, "m/1"), "event_id"),
                           (coordinator.CompleteJob("s-ids", "job/1", me, "e1"), "job_id"),
                           (coordinator.CompleteJob("s-ids", "job-1", me, "e 1"), "event_id"),
                           (coordinator.ShowSession(":"), "session_id"),
                           (coordinator.ReadEvents("s/ids"), "session_id"),
                           (coordinator.NewSession("s ids", {}, me), "session_id"),
                           (coordinator.NewSession("s+ids", {}, me), "session_id"),  # a key, but no journal name
                           (coordinator.ApprovalAnswered("s-ids", "a/1"), "approval_id")):
        bad = refused(node.system, DIRECTORY, message)
        assert (bad.message, bad.field) == (type(message).__name__, where), (message, bad)
    node.unchanged(before)


def test_wait_and_complete_job_that_name_the_wrong_thing_are_refused_and_change_no_state(node):
    """An unknown job, another session, a stale version, another principal, a duplicate event: a typed refusal
    (a resume event's is recorded, by design: DESIGN.md's "rejected (and recorded)"); the session stays put."""
    node.settled("s-job")
    node.sessions.wait("s-job", "carry on", job="job-1")
    waiting = node.sessions.show("s-job")
    assert waiting.state == "waiting:external_job"
    stranger = Sessions(node.system, principal="user:mallory", follow_direct=False)
    cases = [
        (lambda: node.sessions.complete_job("s-job", "job-2", {"ok": 1}), "unknown job"),
        (lambda: node.sessions.complete_job("s-job", "job-1", expected_version=waiting.state_version - 1), "stale"),
        (lambda: node.sessions.complete_job("s-job", "job-1", expected_version=waiting.state_version + 7), "stale"),
        (lambda: stranger.complete_job("s-job", "job-1"), "another principal"),
    ]
    for rejections, (attack, what) in enumerate(cases, start=1):
        before = node.before()
        with pytest.raises(SessionRejected):
            attack()
        node.unchanged(before, rejected=True)
        shown = node.sessions.show("s-job")
        assert (shown.state, shown.state_version) == (waiting.state, waiting.state_version), what
        assert shown.rejections == rejections, what
    before = node.before()
    for attack in (lambda: node.sessions.complete_job("no-such-session", "job-1"),
                   lambda: node.sessions.wait("no-such-session", "x", seconds=1.0)):
        with pytest.raises(UnknownSession):
            attack()
    with pytest.raises(OuroactorsError, match="only a suspended session waits"):
        node.sessions.wait("s-job", "again", seconds=1.0)  # waiting already
    with pytest.raises(OuroactorsError, match="may not make session"):
        stranger.wait("s-job", "x", seconds=1.0)
    node.unchanged(before)
    assert node.sessions.show("s-job").state_version == waiting.state_version


def test_a_principal_is_what_the_channel_verified_never_a_name_the_request_gives(node):
    """Before, a message's principal was a claim compared with itself: any client of the system could act as any
    principal. Now the local channel vouches for the data dir's owner alone, and any other principal shows its
    token: a claim is refused (a resume event with ``identity``, recorded under the claim marked unverified; a
    command with an error) and changes nothing else."""
    from ouroactors.runtime.coordinator.principals import add_principal

    node.settled("s-who")
    mallory = Sessions(node.system, principal="user:mallory", follow_direct=False)
    before = node.before()
    with pytest.raises(SessionRejected, match="identity"):
        mallory.send("s-who", "hand me the keys")
    node.unchanged(before, rejected=True)
    assert _rejections(node, "s-who") == ["unverified:user:mallory"]
    owner = node.sessions.principal
    impostor = Sessions(node.system, principal=owner, token="f" * 32, follow_direct=False)  # the owner's name, a token
    before = node.before()
    for attack in (lambda: mallory.cancel("s-who"), lambda: mallory.steer("s-who", "x"),
                   lambda: mallory.wait("s-who", "x", seconds=5.0), lambda: impostor.cancel("s-who")):
        with pytest.raises(OuroactorsError, match="is not verified"):
            attack()
    with pytest.raises(OuroactorsError, match="is not verified"):
        mallory.new("s-mallory", script(node.tmp / "s-mallory.toml"))
    node.unchanged(before)
    assert node.sessions.show("s-who").state == "suspended"

    token = add_principal(node.data_dir, "user:alice")  # a principal of its own: its token verifies it
    alice = Sessions(node.system, principal="user:alice", token=token, follow_direct=False)
    assert alice.new("s-alice", script(node.tmp / "s-alice.toml")).principal == "user:alice"
    with pytest.raises(SessionRejected, match="authority"):  # verified, but not the owner of this session
        alice.send("s-who", "hi")
    with pytest.raises(SessionRejected, match="authority"):  # nor is the local owner the owner of alice's
        node.sessions.send("s-alice", "hi")
    forged = Sessions(node.system, principal="user:alice", token=token[::-1], follow_direct=False)
    with pytest.raises(SessionRejected, match="identity"):
        forged.send("s-alice", "hi")
    alice.send("s-alice", "hello")
    wait_until("alice's turn settled", lambda: (v := alice.show("s-alice")).state == "suspended"
               and v.committed_cursor > 0)


def test_a_principal_reads_its_own_sessions_and_no_other(node):
    """Before, reads named nobody: any principal a gateway served could list, show and follow every session. Now
    a read is verified as a command is; a principal of its own sees its own sessions, and another's is unknown to
    it (not even its id); the data dir's owner still reads every one; an unverified reader is refused."""
    from ouroactors.runtime.coordinator.principals import add_principal

    node.settled("s-owned")  # the local owner's
    carol = Sessions(node.system, principal="user:carol", token=add_principal(node.data_dir, "user:carol"),
                     follow_direct=False)
    carol.new("s-carol", script(node.tmp / "s-carol.toml"))
    carol.send("s-carol", "hello")
    wait_until("carol's turn settled", lambda: (v := carol.show("s-carol")).state == "suspended"
               and v.committed_cursor > 0)
    assert [v.session_id for v in carol.list(all=True)] == ["s-carol"]
    assert list(carol.events("s-carol"))
    for read in (lambda: carol.show("s-owned"), lambda: list(carol.events("s-owned")),
                 lambda: carol.read("s-owned", wait_s=0.5), lambda: carol.approvals("s-owned")):
        with pytest.raises(UnknownSession, match="s-owned"):
            read()
    seen = {v.session_id for v in node.sessions.list(all=True)}
    assert {"s-owned", "s-carol"} <= seen  # the data dir's owner reads all
    assert node.sessions.show("s-carol").principal == "user:carol"
    assert list(node.sessions.events("s-carol"))
    direct = Sessions(node.system, principal="user:carol", token=carol.token, follow_direct=True)
    with pytest.raises(UnknownSession):  # reading the store itself is asked of the directory first
        list(direct.events("s-owned"))
    assert list(direct.events("s-carol"))
    for stranger in (Sessions(node.system, principal="user:carol", token=carol.token[::-1], follow_direct=False),
                     Sessions(node.system, principal="user:mallory", follow_direct=False)):
        for read in (lambda s=stranger: s.list(), lambda s=stranger: s.show("s-carol"),
                     lambda s=stranger: s.read("s-carol")):
            with pytest.raises(OuroactorsError, match="is not verified"):
                read()


def _rejections(node: Any, session_id: str) -> list[str]:
    """The actors of the session's recorded rejections, read in another process (one environment per process)."""
    code = ("import sys\nfrom ouroactors.authorities.storage.env import StorageConfig, open_env\n"
            "from ouroactors.runtime.coordinator.store import SessionStore\n"
            "store = SessionStore(open_env(StorageConfig.under(sys.argv[1])))\n"
            "print('\\n'.join(r.actor for r in store.rejections(sys.argv[2])))\n")
    out = subprocess.run([sys.executable, "-c", code, str(node.data_dir), session_id], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


# -- a coordinator's door: ForSession from anyone, OutputReady forged -----------------------------------------------


def coordinator_attacks(system: Any) -> list[tuple[Any, str]]:
    grants = system.resolve("agent/grants")  # an address that is not the caller's: the answer must not go there
    good = coordinator.SendMessage("s-co", "hi", "user:x", "m-1")
    push = execution.OutputReady("s-co", "r" * 32, 1, (OutputEvent(1, "text", 1, {"text": "x"}),))
    return [
        (coordinator.ForSession(None, good), "reply_to"),
        (unchecked(coordinator.ForSession, coordinator.ForSession(grants, good), reply_to="me"), "reply_to"),
        (coordinator.ForSession(grants, "junk"), "request"),  # type: ignore[arg-type]
        (coordinator.ForSession(grants, coordinator.NewSession("s-co", {}, "x")), "request"),  # type: ignore[arg-type]
        (coordinator.ForSession(grants, unchecked(coordinator.SendMessage, good, text=None)), "request.text"),
        (coordinator.ForSession(grants, unchecked(coordinator.SendMessage, good, expected_version=2**70)),
         "request.expected_version"),
        # a spare runtime offered with a command: checked at the door like the command (then again before use)
        (coordinator.ForSession(grants, good, "junk"), "spare"),  # type: ignore[arg-type]
        (coordinator.ForSession(grants, good, coordinator.SpareRuntime("runtime#1", 1, None)), "spare.address"),
        (coordinator.ForSession(grants, good, coordinator.SpareRuntime("k" * 5000, 1, grants)), "spare.key"),
        (coordinator.ForSession(grants, good, coordinator.SpareRuntime(None, 1, grants)), "spare.key"),  # type: ignore[arg-type]
        (coordinator.ForSession(grants, good, coordinator.SpareRuntime("runtime#1", -1, grants)), "spare.generation"),
        (coordinator.ForSession(grants, good, coordinator.SpareRuntime("runtime#1", 2**70, grants)),
         "spare.generation"),
        (coordinator.ForSession(grants, good, coordinator.SpareRuntime("runtime#1", math.inf, grants)),  # type: ignore[arg-type]
         "spare.generation"),
        (coordinator.ForSession(grants, unchecked(coordinator.ControlSession,
                                                  coordinator.ControlSession("s-co", "cancel", "x"),
                                                  action="explode")), "request.action"),
        (unchecked(execution.OutputReady, push, events=None), "events"),
        (unchecked(execution.OutputReady, push, events=("junk",)), "events[0]"),
        (unchecked(execution.OutputReady, push, events=(raw_event(cursor=None),)), "events[0].cursor"),
        (unchecked(execution.OutputReady, push, events=(raw_event(data=None),)), "events[0].data"),
        (unchecked(execution.OutputReady, push, produced=-1), "produced"),
        (unchecked(execution.OutputReady, push, produced=400,
                   events=tuple(OutputEvent(i, "text", 1, {}) for i in range(1, 400))), "events"),
        (unchecked(execution.OutputReady, push, runtime_id=None), "runtime_id"),
    ]


def attack_coordinator(node: Node) -> None:
    node.settled("s-co")
    path = coordinator_path(node.system, "s-co")
    before = node.before()
    for message, where in coordinator_attacks(node.system):
        bad = refused(node.system, path, message, timeout=5.0)
        assert (bad.message, bad.field) == (type(message).__name__, where), (message, bad)
    node.unchanged(before)


def test_a_coordinator_refuses_malformed_commands_and_pushes_whoever_sends_them(node):
    attack_coordinator(node)


def test_a_coordinator_acts_on_no_other_sessions_command(node):
    """Scope: a well-formed command for another session, handed to this session's coordinator (a misrouted
    ``ForSession``), changes nothing — neither session, nothing durable — and restarts nothing."""
    node.settled("s-scope")
    shown = node.sessions.show("s-scope")
    before = node.before()
    path = coordinator_path(node.system, "s-scope")
    grants = node.system.resolve("agent/grants")
    for request in (coordinator.SendMessage("s-elsewhere", "hi", "user:x", "m-scope"),
                    coordinator.ControlSession("s-elsewhere", "cancel", "user:x"),
                    coordinator.WaitSession("s-elsewhere", "later", "user:x", seconds=5.0)):
        node.system.tell(path, coordinator.ForSession(grants, request))
    with pytest.raises(OuroactorsError, match="no turn to steer"):  # a command of its own, run after those (its
        node.sessions.steer("s-scope", "still there?")                  # jobs run one at a time, in order)
    node.unchanged(before)
    assert node.sessions.show("s-scope").state_version == shown.state_version


def forge_a_push(node: Node, session_id: str) -> tuple[BaseException | Any, list[Any]]:
    """During a slow turn, push an event for the next cursor from the test's endpoint (not the runtime), with
    the attached runtime's id (``session show`` names it): what the coordinator answers, and the durable log."""
    node.sessions.new(session_id, script(node.tmp / f"{session_id}.toml", words=4, pace_ms=1500))
    node.sessions.send(session_id, "talk slowly", last=True)
    view = wait_until("the turn's first word committed", lambda: (v := node.sessions.show(session_id))
                      .committed_cursor >= 2 and v.runtime_id and v)
    forged = execution.OutputReady(session_id, view.runtime_id, view.committed_cursor + 1,
                                   (OutputEvent(view.committed_cursor + 1, "text", 1, {"text": "FORGED"}),))
    try:
        answer: Any = node.system.ask(coordinator_path(node.system, session_id), forged, timeout=3.0)
    except OuroactorsError as exc:
        answer = exc
    events = list(node.sessions.events(session_id, follow=True, until="turn_settled", idle_timeout=30))
    return answer, events


@pytest.mark.slow
def test_a_push_forged_by_something_that_is_not_the_runtime_is_refused_and_not_published(node):
    mark = node.system.mark()
    answer, events = forge_a_push(node, "s-forge")
    assert isinstance(answer, BadRequest) and answer.field == "runtime_id", answer
    assert "FORGED" not in [e.data.get("text") for e in events]
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))
    assert events[-1].kind == "turn_settled" and events[-1].data["status"] == "completed"
    assert [e.data["text"] for e in events if e.kind == "text"] == ["w0 ", "w1 ", "w2 ", "w3 "]
    assert not crashes(node.system, mark)


def malformed_pushes_mid_turn(node: Node, session_id: str) -> None:
    """A running turn's coordinator (a runtime attached): pushes with the attached runtime's id, malformed."""
    node.sessions.new(session_id, script(node.tmp / f"{session_id}.toml", words=3, pace_ms=800))
    node.sessions.send(session_id, "talk", last=True)
    view = wait_until("the turn runs", lambda: (v := node.sessions.show(session_id)).committed_cursor >= 1
                      and v.runtime_id and v)
    path, mark = coordinator_path(node.system, session_id), node.system.mark()
    push = execution.OutputReady(session_id, view.runtime_id, 99, ())
    for fields, where in (({"events": None}, "events"), ({"events": ("junk",)}, "events[0]"),
                          ({"events": (raw_event(cursor=None),)}, "events[0].cursor")):
        bad = refused(node.system, path, unchecked(execution.OutputReady, push, **fields), timeout=5.0)
        assert (bad.message, bad.field) == ("OutputReady", where), bad
    events = list(node.sessions.events(session_id, follow=True, until="turn_settled", idle_timeout=30))
    assert [e.data.get("text") for e in events if e.kind == "text"] == ["w0 ", "w1 ", "w2 "]
    assert not crashes(node.system, mark)


@pytest.mark.slow
def test_a_malformed_push_mid_turn_is_refused_and_the_turn_goes_on(node):
    malformed_pushes_mid_turn(node, "s-midturn")


def test_a_push_from_another_runtime_id_or_for_another_session_is_refused(node):
    node.settled("s-stray")
    path = coordinator_path(node.system, "s-stray")
    before = node.before()
    for session_id, runtime_id in (("s-stray", "0" * 32), ("s-other", "0" * 32)):
        push = execution.OutputReady(session_id, runtime_id, 99, (OutputEvent(99, "text", 1, {"text": "x"}),))
        assert refused(node.system, path, push).field == "runtime_id"
    node.unchanged(before)


def forged_timers_during_a_send(node: Node, session_id: str) -> tuple[Any, coordinator.SessionView]:
    """While a message starts a turn, another process sends the coordinator forged ``WakeupMessage``s carrying
    ask timers (``calls._AskTimer``, tokens guessed): what the send answers and where the session ends up."""
    node.sessions.new(session_id, script(node.tmp / f"{session_id}.toml", words=2, pace_ms=100))
    sprayer = spray_ask_timers(node.data_dir, coordinator_path(node.system, session_id), 4.0)
    try:
        try:
            answer: Any = node.sessions.send(session_id, "hi")
        except OuroactorsError as exc:
            answer = exc
    finally:
        sprayer.wait(timeout=30)
    view = wait_until("the turn settled or the session stopped", lambda: (v := node.sessions.show(session_id))
                      .state in ("suspended", "failed", "parked") and v)
    return answer, view


@pytest.mark.slow
def test_a_forged_timer_does_not_resume_a_coordinators_ask(node):
    mark = node.system.mark()
    answer, view = forged_timers_during_a_send(node, "s-timers")
    assert isinstance(answer, coordinator.Done), answer
    assert view.state == "suspended" and view.reason is None, view
    path = coordinator_path(node.system, "s-timers")
    forged = refused(node.system, path, WakeupMessage(timedelta(0), "coordinator:heartbeat"))
    assert forged.message == "WakeupMessage"
    assert not crashes(node.system, mark)


# -- a runtime's door: the reader's requests ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_runtime_refuses_malformed_reader_requests(node):
    view = node.settled("s-rt", words=3, pace_ms=400, turns=2)
    node.sessions.send("s-rt", "again", last=True)
    running = wait_until("the second turn runs", lambda: (v := node.sessions.show("s-rt")).runtime_id
                         and v.state == "running" and v)
    path = runtime_path(node.system, running.generation)
    pid = node.system.child_info(path).pid
    mark = node.system.mark()
    for message, where in ((unchecked(execution.DrainOutput, execution.DrainOutput(0), after=-1), "after"),
                           (unchecked(execution.DrainOutput, execution.DrainOutput(0), after=None), "after"),
                           (unchecked(execution.DrainOutput, execution.DrainOutput(0), limit=10**9), "limit"),
                           (unchecked(execution.AckOutput, execution.AckOutput(0), cursor=2**70), "cursor"),
                           (unchecked(execution.AckOutput, execution.AckOutput(0), cursor=math.nan), "cursor"),
                           (unchecked(execution.SubscribeOutput, execution.SubscribeOutput(), subscriber="me"),
                            "subscriber"),
                           (unchecked(execution.SubscribeOutput, execution.SubscribeOutput(), subscriber=7),
                            "subscriber"),
                           (execution.OpenSession("s+1", {}), "session_id"),  # crashed the runtime (its journal)
                           (execution.OpenSession("s/1", {}), "session_id")):
        bad = refused(node.system, path, message)
        assert (bad.message, bad.field) == (type(message).__name__, where), bad
    events = list(node.sessions.events("s-rt", after=view.committed_cursor, follow=True, until="turn_settled",
                                       idle_timeout=30))
    assert events[-1].data["status"] == "completed"  # the turn went on, every event published once
    assert [e.cursor for e in events] == list(range(view.committed_cursor + 1, events[-1].cursor + 1))
    # The last turn done, the session completes and its runtime may already be stopped (and gone from its
    # supervisor): gone or the same process are both fine; a restart would show as a crash.
    assert current_pid(node, path) in (pid, None) and not crashes(node.system, mark)


def current_pid(node: Any, path: str) -> int | None:
    try:
        return node.system.child_info(path).pid
    except ChildNotFound:
        return None


def test_a_subscribe_from_a_stranger_is_refused(node):
    node.settled("s-sub-a")
    node.sessions.new("s-sub", script(node.tmp / "s-sub.toml", words=3, pace_ms=300, turns=1))
    node.sessions.send("s-sub", "talk", last=True)
    running = wait_until("the turn runs", lambda: (v := node.sessions.show("s-sub")).runtime_id and v)
    elsewhere = node.system.resolve(coordinator_path(node.system, "s-sub-a"))  # another session's coordinator
    try:
        answer: Any = node.system.ask(runtime_path(node.system, running.generation),
                                      execution.SubscribeOutput(elsewhere), timeout=5.0)
    except OuroactorsError as exc:
        answer = exc
    events = list(node.sessions.events("s-sub", follow=True, until="turn_settled", idle_timeout=30))
    assert events[-1].kind == "turn_settled"  # the drain at the coordinator's poll still publishes everything
    assert isinstance(answer, BadRequest), f"a stranger's SubscribeOutput was taken: {answer!r}"


# -- the real coordinator, with its door -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    yield from start_node(tmp_path_factory.mktemp("real"), REAL)


@pytest.mark.slow
def test_the_real_coordinator_refuses_malformed_commands_and_pushes(real):
    attack_coordinator(real)


@pytest.mark.slow
def test_the_real_coordinator_does_not_publish_a_forged_push(real):
    answer, events = forge_a_push(real, "s-forge-real")
    assert "FORGED" not in [e.data.get("text") for e in events], "a forged event was published"
    assert isinstance(answer, BadRequest), answer


@pytest.mark.slow
def test_the_real_coordinator_refuses_a_malformed_push_mid_turn(real):
    malformed_pushes_mid_turn(real, "s-midturn-real")


# -- the directory still takes its coordinator's own nudges ---------------------------------------------------------


@pytest.mark.slow
def test_the_coordinators_own_nudges_still_answer_a_follower_at_once(actor_system_factory, monkeypatch, tmp_path):
    """The checks on ``Committed`` (sender, durable cursor, no going back) refuse no real nudge: with the follow
    tick, the poll and the heartbeat at an hour, a follower gets every event of a paced turn (only nudges can
    answer its held reads)."""
    from ouroactors.runtime.coordinator import actor, directory

    monkeypatch.setattr(directory, "FOLLOW_TICK_S", 3600.0)  # before the system starts: its actors inherit it
    monkeypatch.setattr(actor, "POLL_S", 3600.0)
    monkeypatch.setattr(actor, "HEARTBEAT_S", 3600.0)
    system = actor_system_factory("multiproc")
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system, follow_direct=False)
    sessions.new("s1", script(tmp_path / "s1.toml", words=6, pace_ms=60))
    sessions.send("s1", "talk", last=True)
    mark = system.mark()
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.cursor for e in events] == list(range(1, 9))  # turn_started, 6 words, turn_settled
    assert not crashes(system, mark)



@pytest.mark.slow
def test_the_real_coordinator_refuses_a_forged_timer(real):
    real.settled("s-timer-real")
    forged = refused(real.system, coordinator_path(real.system, "s-timer-real"),
                     WakeupMessage(timedelta(0), "coordinator:heartbeat"), timeout=3.0)
    assert forged.message == "WakeupMessage"


@pytest.mark.slow
def test_the_real_coordinators_session_survives_forged_timers(real):
    answer, view = forged_timers_during_a_send(real, "s-timers-real")
    assert isinstance(answer, coordinator.Done), f"the send was answered {answer!r}"
    assert view.state == "suspended", f"the session is {view.state}: {view.reason}"


def test_forged_dead_letters_are_dropped_and_crash_nothing(node):
    """The directory takes back a command thespian could not deliver (a ``DeadEnvelope``): one forged by another
    process — not a command, malformed fields, an unhashable or unknown session id — is dropped, nothing else."""
    from thespian.actors import DeadEnvelope

    view = node.settled("s-dead")
    before = node.before()
    me = node.sessions.principal
    good = coordinator.SendMessage("s-dead", "x", me, "m-dead-1", expected_version=view.state_version)
    somewhere = node.system.resolve(DIRECTORY)
    for forged in ("junk",
                   coordinator.ForSession(somewhere, coordinator.ShowSession("s-dead")),  # not a command
                   unchecked(coordinator.ForSession, coordinator.ForSession(somewhere, good),
                             request=unchecked(coordinator.SendMessage, good, session_id=["s-dead"])),
                   unchecked(coordinator.ForSession, coordinator.ForSession(somewhere, good),
                             request=unchecked(coordinator.SendMessage, good, session_id="s" * 10_000)),
                   unchecked(coordinator.ForSession, coordinator.ForSession(somewhere, good), reply_to=None),
                   coordinator.ForSession(somewhere, coordinator.SendMessage("no-such-session", "x", me, "m-2"))):
        node.system.tell(DIRECTORY, DeadEnvelope(somewhere, forged))
    assert node.sessions.show("s-dead").state_version == view.state_version  # the directory answers on
    node.unchanged(before)


def test_a_runtime_refuses_a_forged_begin_loop_wakeup(node):
    """A runtime begins its trio loop on a zero-delay wakeup it sends itself once it has started (and rehearses its
    open, and ends itself if never opened, on two more): the same wakeups, or one with a junk payload, from anyone
    else are typed refusals that change nothing — a forged "unopened" must not stop a spare."""
    idle = node.system.start_child("agent/execution")  # a runtime with no session open
    path = f"agent/execution/{idle.id}"
    mark = node.system.mark()
    try:
        for payload in ("runtime:begin-loop", "runtime:rehearse", "runtime:unopened", None, "x" * 100_000, math.inf):
            forged = refused(node.system, path, WakeupMessage(timedelta(0), payload))
            assert forged.message == "WakeupMessage", forged
        status = node.system.ask(path, execution.RuntimeStatusRequest(), timeout=10.0)
        assert status.session_id is None and not status.open  # still serving, nothing opened
        assert node.system.child_info(path).pid == idle.pid and not crashes(node.system, mark)
    finally:
        node.system.terminate_child("agent/execution", idle.id)
