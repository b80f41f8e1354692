"""Watched asks (:mod:`ouroactors.runtime.coordinator.calls`): an ask whose peer died ends when its watch's check says
so, not at its timeout; an answer, or the timeout, that comes while a check is out waits for the check's answer, so
no check's answer is left to be taken for the answer of the job's next ask to the supervisor."""

from __future__ import annotations

from typing import Any

from ouroactors.runtime.coordinator.calls import Ask, Gone, Job, Jobs, TimedOut, Watch
from ouroactors.supervision.calls import Tagged, TaggedAnswer


class Recorder:
    """The actor's side of :class:`Jobs`: what was sent, and the timers asked for (fired by the test)."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, Any]] = []
        self.timers: list[Any] = []
        self.refs: dict[Any, str] = {}

    def send(self, target: Any, message: Any) -> None:
        """Recorded as the request itself; the ref of a tagged one is kept to answer it (:meth:`tagged`)."""
        if isinstance(message, Tagged):
            self.refs[target] = message.ref
            message = message.request
        self.sent.append((target, message))

    def tagged(self, target: Any, value: Any) -> TaggedAnswer:
        """``target``'s answer to the last request sent to it, as a worker gives it."""
        return TaggedAnswer(self.refs[target], value)

    def wakeup(self, delay: Any, payload: Any) -> None:
        self.timers.append(payload)

    def fire(self, jobs: Jobs, kind: str) -> None:
        """Fire the latest timer of ``kind`` (its class name) as the actor would: offered with no sender."""
        timer = next(t for t in reversed(self.timers) if type(t).__name__ == kind)
        assert jobs.offer(timer, None)


WATCH = Watch(Ask("supervisor", "which_child r1", 10.0), alive=lambda info: info == "running", every_s=1.0)


def asking(log: list[Any]) -> Job:
    log.append((yield Ask("runtime", "ack", 10.0, WATCH)))
    log.append((yield Ask("supervisor", "start_child", 10.0)))  # the next ask goes to the supervisor itself


def started(rec: Recorder) -> tuple[Jobs, list[Any]]:
    log: list[Any] = []
    jobs = Jobs(rec.send, rec.wakeup)
    jobs.submit(lambda: asking(log))
    assert rec.sent == [("runtime", "ack")]
    return jobs, log


def test_a_peer_found_gone_ends_the_ask_at_once_with_gone() -> None:
    rec = Recorder()
    jobs, log = started(rec)
    rec.fire(jobs, "_CheckTimer")
    assert rec.sent[-1] == ("supervisor", "which_child r1") and log == []
    assert jobs.offer(rec.tagged("supervisor", "restarted"), "supervisor")
    assert log == [Gone("ack", "restarted")] and isinstance(log[0], TimedOut)  # handled wherever a timeout is
    assert rec.sent[-1] == ("supervisor", "start_child")
    assert jobs.offer(rec.tagged("supervisor", "child"), "supervisor") and log[-1] == "child"


def test_a_live_peer_is_checked_again_and_its_answer_resumes_the_job() -> None:
    rec = Recorder()
    jobs, log = started(rec)
    rec.fire(jobs, "_CheckTimer")
    assert jobs.offer(rec.tagged("supervisor", "running"), "supervisor") and log == []
    rec.fire(jobs, "_CheckTimer")  # a second slice: checked again, the ask itself is not sent again
    assert [m for _, m in rec.sent] == ["ack", "which_child r1", "which_child r1"]
    assert jobs.offer(rec.tagged("supervisor", "running"), "supervisor")
    assert jobs.offer(rec.tagged("runtime", "acked"), "runtime") and log == ["acked"]


def test_an_answer_during_a_check_waits_for_the_checks_answer_which_is_not_left_behind() -> None:
    rec = Recorder()
    jobs, log = started(rec)
    rec.fire(jobs, "_CheckTimer")
    # held: the check's answer is still to come
    assert jobs.offer(rec.tagged("runtime", "acked"), "runtime") and log == []
    # taken by the check, not by the job's next ask
    assert jobs.offer(rec.tagged("supervisor", "restarted"), "supervisor")
    assert log == ["acked"] and rec.sent[-1] == ("supervisor", "start_child")
    assert jobs.offer(rec.tagged("supervisor", "child"), "supervisor") and log == ["acked", "child"]


def test_a_timeout_during_a_check_ends_the_ask_once_a_live_peer_is_confirmed() -> None:
    rec = Recorder()
    jobs, log = started(rec)
    rec.fire(jobs, "_CheckTimer")
    rec.fire(jobs, "_AskTimer")
    assert log == []
    assert jobs.offer(rec.tagged("supervisor", "running"), "supervisor")
    assert log == [TimedOut("ack")] and type(log[0]) is TimedOut


def test_an_unanswered_check_judges_nothing_and_the_watch_goes_on() -> None:
    rec = Recorder()
    jobs, log = started(rec)
    rec.fire(jobs, "_CheckTimer")
    rec.fire(jobs, "_CheckTimeout")
    assert log == [] and type(rec.timers[-1]).__name__ == "_CheckTimer"
    rec.fire(jobs, "_CheckTimer")
    assert jobs.offer(rec.tagged("supervisor", "gone"), "supervisor") and log == [Gone("ack", "gone")]


def test_timers_of_an_ask_already_answered_change_nothing() -> None:
    rec = Recorder()
    jobs, log = started(rec)
    stale = list(rec.timers)  # the ack's timeout and its first check
    assert jobs.offer(rec.tagged("runtime", "acked"), "runtime") and log == ["acked"]
    for timer in stale:
        assert jobs.offer(timer, None)
    assert log == ["acked"] and rec.sent[-1] == ("supervisor", "start_child")
