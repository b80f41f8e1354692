"""A job's blocking call run beside the actor (OffThread): the job waits for it, nothing else of the job runs
meanwhile, its value or its exception comes back into the job; without a thread it runs inline; a real
CallThread wakes its reader through the pipe and hands the exception back instead of dying with it."""

from __future__ import annotations

import select
import threading
from typing import Any

import pytest

from ouroactors.core.call_thread import CallThread
from ouroactors.runtime.coordinator.calls import Ask, Job, Jobs, OffThread
from ouroactors.supervision.calls import Tagged, TaggedAnswer


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, Any]] = []
        self.offloaded: list[Any] = []
        self.ref = ""

    def send(self, target: Any, message: Any) -> None:
        """Recorded as the request itself (asks go tagged: the ref is kept to answer them)."""
        if isinstance(message, Tagged):
            self.ref, message = message.ref, message.request
        self.sent.append((target, message))

    def answer(self, value: Any) -> TaggedAnswer:
        return TaggedAnswer(self.ref, value)

    def wakeup(self, delay: Any, payload: Any) -> None:
        pass


def job(log: list[Any], fail: bool = False) -> Job:
    def commit() -> str:
        if fail:
            raise OSError("disk")
        return "committed"

    try:
        log.append((yield OffThread(commit)))
    except OSError as exc:
        log.append(f"raised {exc}")
    log.append((yield Ask("peer", "after")))


def test_an_offloaded_call_holds_its_job_and_resumes_it_with_the_value() -> None:
    rec, log = Recorder(), []
    jobs = Jobs(rec.send, rec.wakeup, rec.offloaded.append)
    jobs.submit(lambda: job(log))
    jobs.submit(lambda: job(log))  # queued behind the first: one job at a time, even while it is away
    assert len(rec.offloaded) == 1 and log == [] and rec.sent == [] and jobs.busy
    assert not jobs.offer("an answer", "peer")  # nothing is asked while the call is away
    jobs.finished(rec.offloaded[0](), None)
    assert log == ["committed"] and rec.sent == [("peer", "after")]
    jobs.finished("stray", None)  # a stray wake-up while the job waits on an ask changes nothing
    assert log == ["committed"]
    assert jobs.offer(rec.answer("answer"), "peer")
    assert log == ["committed", "answer"] and len(rec.offloaded) == 2  # the second job started and went away


def test_an_offloaded_calls_exception_is_raised_in_the_job() -> None:
    rec, log = Recorder(), []
    jobs = Jobs(rec.send, rec.wakeup, rec.offloaded.append)
    jobs.submit(lambda: job(log, fail=True))
    jobs.finished(None, OSError("disk"))
    assert log == ["raised disk"] and rec.sent == [("peer", "after")]


def test_without_a_thread_the_call_runs_inline() -> None:
    rec, log = Recorder(), []
    jobs = Jobs(rec.send, rec.wakeup)
    jobs.submit(lambda: job(log))
    assert log == ["committed"] and rec.sent == [("peer", "after")]
    jobs = Jobs(rec.send, rec.wakeup)
    jobs.submit(lambda: job(log, fail=True))
    assert log[-1] == "raised disk"


def test_an_unhandled_exception_ends_the_job_and_reaches_the_actor() -> None:
    rec = Recorder()
    jobs = Jobs(rec.send, rec.wakeup, rec.offloaded.append)

    def crashing() -> Job:
        yield OffThread(lambda: None)

    jobs.submit(crashing)
    with pytest.raises(RuntimeError, match="boom"):
        jobs.finished(None, RuntimeError("boom"))
    assert not jobs.busy


def test_a_call_thread_wakes_its_reader_and_returns_value_or_exception() -> None:
    thread = CallThread("test-commit")
    try:
        names: list[str] = []
        thread.submit(lambda: names.append(threading.current_thread().name) or 42)
        assert select.select([thread.fd], [], [], 10)[0] == [thread.fd]
        assert thread.poll() == (42, None) and names == ["test-commit"]  # run on the thread, not the caller's
        assert thread.poll() is None  # a stray wake-up finds nothing
        thread.submit(lambda: 1 / 0)
        assert select.select([thread.fd], [], [], 10)[0] == [thread.fd]
        value, error = thread.poll()  # type: ignore[misc]
        assert value is None and isinstance(error, ZeroDivisionError)
        thread.submit(lambda: "still alive")  # the exception did not end the thread
        assert select.select([thread.fd], [], [], 10)[0] == [thread.fd]
        assert thread.poll() == ("still alive", None)
    finally:
        thread.close()
