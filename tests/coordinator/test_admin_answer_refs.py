"""Correlated admin answers in the job runner (:mod:`ouroactors.runtime.coordinator.calls`): every AdminCall it sends
carries a fresh ref, an AdminAnswer is taken only by the ask (or watch check) sent with its ref, and a late one — of
an ask that timed out, of a check given up — is dropped, never taken for the answer of the job's next ask to the same
supervisor (which matching by sender alone did)."""

from __future__ import annotations

from typing import Any

from thespian.actors import PoisonMessage

from ouroactors.runtime.coordinator.calls import Ask, Gone, Job, Jobs, TimedOut, Watch
from ouroactors.supervision.calls import AdminAnswer, AdminCall, Ok, Tagged, TaggedAnswer

SUPERVISOR = "execution-supervisor"


class Recorder:
    """The actor's side of :class:`Jobs`: what was sent, and the timers asked for (fired by the test)."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, Any]] = []
        self.timers: list[Any] = []
        self.tags: dict[Any, str] = {}

    def send(self, target: Any, message: Any) -> None:
        if isinstance(message, Tagged):
            self.tags[target] = message.ref
        self.sent.append((target, message))

    def tagged(self, target: Any, value: Any) -> TaggedAnswer:
        """``target``'s answer to the last (tagged) request sent to it, as a worker gives it."""
        return TaggedAnswer(self.tags[target], value)

    def wakeup(self, delay: Any, payload: Any) -> None:
        self.timers.append(payload)

    def fire(self, jobs: Jobs, kind: str) -> None:
        """Fire the latest timer of ``kind`` (its class name) as the actor would: offered with no sender."""
        timer = next(t for t in reversed(self.timers) if type(t).__name__ == kind)
        assert jobs.offer(timer, None)

    def last_ref(self) -> str:
        target, message = self.sent[-1]
        assert target == SUPERVISOR and isinstance(message, AdminCall) and message.ref is not None
        return message.ref


WATCH = Watch(Ask(SUPERVISOR, AdminCall("which_child", "runtime#1"), 10.0),
              alive=lambda info: info == "running", every_s=1.0)


def run(job: Job) -> tuple[Recorder, Jobs]:
    rec = Recorder()
    jobs = Jobs(rec.send, rec.wakeup)
    jobs.submit(lambda: job)
    return rec, jobs


def test_a_late_answer_of_a_check_given_up_is_not_taken_for_the_next_asks_answer() -> None:
    log: list[Any] = []

    def job() -> Job:
        log.append((yield Ask("runtime", "ack", 10.0, WATCH)))
        log.append((yield Ask(SUPERVISOR, AdminCall("start_child"), 10.0)))

    rec, jobs = run(job())
    rec.fire(jobs, "_CheckTimer")
    check_ref = rec.last_ref()
    assert rec.sent[-1][1] == AdminCall("which_child", "runtime#1", ref=check_ref)
    rec.fire(jobs, "_CheckTimeout")  # the check went unanswered: given up
    assert jobs.offer(rec.tagged("runtime", "acked"), "runtime") and log == ["acked"]
    start_ref = rec.last_ref()
    assert start_ref != check_ref
    assert jobs.offer(AdminAnswer(check_ref, "running"), SUPERVISOR)  # the check's answer, late: dropped
    assert log == ["acked"]
    assert jobs.offer(AdminAnswer(start_ref, "child"), SUPERVISOR)
    assert log == ["acked", "child"] and not jobs.busy


def test_a_late_answer_of_a_timed_out_ask_is_dropped_and_the_next_ask_gets_its_own() -> None:
    log: list[Any] = []

    def job() -> Job:
        log.append((yield Ask(SUPERVISOR, AdminCall("which_child", "runtime#1"), 10.0)))
        log.append((yield Ask(SUPERVISOR, AdminCall("terminate_child", "runtime#1"), 10.0)))

    rec, jobs = run(job())
    first = rec.last_ref()
    rec.fire(jobs, "_AskTimer")
    assert log == [TimedOut(AdminCall("which_child", "runtime#1"))]  # the message as the job asked it (no ref)
    second = rec.last_ref()
    assert jobs.offer(AdminAnswer(first, "which_child's info"), SUPERVISOR)
    assert len(log) == 1
    assert jobs.offer(AdminAnswer(second, Ok()), SUPERVISOR)
    assert log[1] == Ok()


def test_a_late_answer_of_an_earlier_check_is_dropped_while_the_next_check_is_out() -> None:
    log: list[Any] = []

    def job() -> Job:
        log.append((yield Ask("runtime", "ack", 10.0, WATCH)))

    rec, jobs = run(job())
    rec.fire(jobs, "_CheckTimer")
    first = rec.last_ref()
    rec.fire(jobs, "_CheckTimeout")
    rec.fire(jobs, "_CheckTimer")
    second = rec.last_ref()
    assert second != first
    assert jobs.offer(AdminAnswer(first, "restarted"), SUPERVISOR)  # would say "gone": it is not this check's answer
    assert log == []
    assert jobs.offer(AdminAnswer(second, "restarted"), SUPERVISOR)
    assert log == [Gone("ack", "restarted")]


def test_an_answer_is_unwrapped_for_the_job_and_a_check_answer_judges_by_its_value() -> None:
    log: list[Any] = []

    def job() -> Job:
        log.append((yield Ask("runtime", "ack", 10.0, WATCH)))
        log.append((yield Ask(SUPERVISOR, AdminCall("which_children"), 10.0)))

    rec, jobs = run(job())
    rec.fire(jobs, "_CheckTimer")
    assert jobs.offer(AdminAnswer(rec.last_ref(), "running"), SUPERVISOR) and log == []  # alive: watched on
    rec.fire(jobs, "_CheckTimer")
    check = rec.last_ref()
    assert jobs.offer(rec.tagged("runtime", "acked"), "runtime") and log == []  # held until the check is answered
    assert jobs.offer(AdminAnswer(check, "running"), SUPERVISOR) and log == ["acked"]
    assert jobs.offer(AdminAnswer(rec.last_ref(), ["a", "b"]), SUPERVISOR) and log == ["acked", ["a", "b"]]


def test_every_call_gets_a_fresh_ref_a_jobs_own_ref_is_kept_and_other_requests_go_tagged() -> None:
    def job() -> Job:
        yield Ask(SUPERVISOR, AdminCall("which_children"), 1.0)
        yield Ask(SUPERVISOR, AdminCall("which_children"), 1.0)
        yield Ask(SUPERVISOR, AdminCall("which_children", ref="mine"), 1.0)
        yield Ask("ledger", "read", 1.0)

    rec, jobs = run(job())
    refs = [rec.last_ref()]
    assert jobs.offer(AdminAnswer(refs[0], []), SUPERVISOR)
    refs.append(rec.last_ref())
    assert jobs.offer(AdminAnswer(refs[1], []), SUPERVISOR)
    assert rec.last_ref() == "mine"
    assert jobs.offer(AdminAnswer("mine", []), SUPERVISOR)
    target, sent = rec.sent[-1]  # not an admin call: tagged with a ref of its own
    assert target == "ledger" and isinstance(sent, Tagged) and sent.request == "read" and sent.ref not in refs
    assert len(set(refs)) == 2 and all(isinstance(r, str) and 0 < len(r) <= 128 for r in [*refs, sent.ref])
    assert jobs.offer(TaggedAnswer(sent.ref, "entries"), "ledger") and not jobs.busy


def test_an_answer_with_no_ask_waiting_for_it_is_taken_and_dropped_never_passed_on() -> None:
    rec = Recorder()
    jobs = Jobs(rec.send, rec.wakeup)
    assert jobs.offer(AdminAnswer("j.nobody.1", "info"), SUPERVISOR)  # idle: consumed (not "unexpected")
    log: list[Any] = []

    def job() -> Job:
        log.append((yield Ask(SUPERVISOR, AdminCall("which_child", "x"), 10.0)))

    jobs.submit(lambda: job())
    ref = rec.last_ref()
    assert jobs.offer(AdminAnswer(ref, "info"), "another-supervisor")  # the right ref from the wrong sender
    assert jobs.offer(AdminAnswer(7, "info"), SUPERVISOR)  # type: ignore[arg-type]  # a junk ref matches nothing
    assert log == []
    assert jobs.offer(AdminAnswer(ref, "info"), SUPERVISOR) and log == ["info"]


def test_a_poison_message_is_matched_by_the_ref_of_the_call_it_returns() -> None:
    log: list[Any] = []

    def job() -> Job:
        log.append((yield Ask(SUPERVISOR, AdminCall("which_child", "x"), 10.0)))
        log.append((yield Ask(SUPERVISOR, AdminCall("which_child", "y"), 10.0)))

    rec, jobs = run(job())
    old = rec.sent[-1][1]
    rec.fire(jobs, "_AskTimer")
    current = rec.sent[-1][1]
    assert jobs.offer(PoisonMessage(old), SUPERVISOR) and len(log) == 1  # the returned call was given up
    poison = PoisonMessage(current)
    assert jobs.offer(poison, SUPERVISOR) and log[1] is poison  # delivered as before: the job judges it


# -- tagged asks: requests to runtimes and authorities ------------------------------------------------------------


def test_a_late_answer_of_a_tagged_ask_that_timed_out_is_dropped_and_the_next_ask_gets_its_own() -> None:
    """The attack this closes: a runtime slow to answer ``drain`` answers after the ask timed out, while the job
    waits for its ``ack``: matched by sender alone, the drain's answer would have been taken for the ack's."""
    log: list[Any] = []

    def job() -> Job:
        log.append((yield Ask("runtime", "drain", 10.0)))
        log.append((yield Ask("runtime", "ack", 10.0)))

    rec, jobs = run(job())
    drain_ref = rec.tags["runtime"]
    rec.fire(jobs, "_AskTimer")
    assert log == [TimedOut("drain")]  # the request as the job asked it
    ack_ref = rec.tags["runtime"]
    assert ack_ref != drain_ref and rec.sent[-1] == ("runtime", Tagged(ack_ref, "ack"))
    assert jobs.offer(TaggedAnswer(drain_ref, "events 1-9"), "runtime")  # late: taken off the queue, dropped
    assert log == [TimedOut("drain")] and jobs.busy
    assert jobs.offer(TaggedAnswer(ack_ref, "acked"), "runtime")
    assert log == [TimedOut("drain"), "acked"] and not jobs.busy


def test_a_bare_message_from_the_one_asked_is_not_the_answer_of_a_tagged_ask() -> None:
    log: list[Any] = []

    def job() -> Job:
        log.append((yield Ask("runtime", "ack", 10.0)))

    rec, jobs = run(job())
    assert not jobs.offer("acked", "runtime")  # left to the actor's handlers, as any message nobody asked for
    assert log == [] and jobs.busy
    assert jobs.offer(TaggedAnswer(rec.tags["runtime"], "acked"), "someone-else")  # right ref, wrong sender:
    assert log == [] and jobs.busy  # dropped
    assert jobs.offer(TaggedAnswer(rec.tags["runtime"], "acked"), "runtime") and log == ["acked"]


def test_a_tagged_request_the_worker_could_not_handle_comes_back_by_its_ref() -> None:
    log: list[Any] = []

    def job() -> Job:
        log.append((yield Ask("runtime", "ack", 10.0)))

    rec, jobs = run(job())
    _, sent = rec.sent[-1]
    returned = PoisonMessage(sent)
    assert jobs.offer(returned, "runtime") and log == [returned]
