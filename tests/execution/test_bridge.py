"""The trio loop beside an actor: calls cross threads, tasks run while the caller carries on, stop cancels."""

from __future__ import annotations

import threading
import time

import pytest
import trio

from ouroactors.runtime.execution.bridge import TrioThread


def test_call_runs_in_the_loop_thread_and_returns() -> None:
    loop = TrioThread()
    try:
        assert loop.call(threading.current_thread) is not threading.current_thread()
        assert loop.call(lambda a, b: a + b, 2, 3) == 5
    finally:
        assert loop.stop()


def test_a_started_task_runs_while_the_actor_thread_is_free_and_stop_cancels_it() -> None:
    loop = TrioThread()
    started, cancelled = threading.Event(), threading.Event()

    async def activity() -> None:
        started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.set()
            raise

    loop.start(activity)
    assert started.wait(5)
    assert loop.call(lambda: "still served") == "still served"  # the actor side is never blocked by the task
    assert loop.stop(5)
    assert cancelled.is_set()
    assert not loop.alive


def test_a_task_that_raises_ends_the_loop_visibly() -> None:
    loop = TrioThread()

    async def broken() -> None:
        raise ValueError("boom")

    loop.start(broken)
    assert loop.stop(5)
    assert loop.error is not None and "boom" in repr(loop.error)


def test_to_thread_works_in_a_process_forked_after_trio_used_its_thread_cache() -> None:
    import os

    from ouroactors.runtime.execution import bridge  # noqa: F401  (registers the fork handler)

    async def use() -> int:
        return await trio.to_thread.run_sync(lambda: 42)

    assert trio.run(use) == 42  # the parent now has a cached idle worker thread
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: without the reset its first to_thread waits forever for a thread that is gone
        os.close(read)
        loop = TrioThread()
        done = threading.Event()

        async def child() -> None:
            await trio.to_thread.run_sync(lambda: None)
            done.set()

        loop.start(child)
        os.write(write, b"1" if done.wait(5) else b"0")
        os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"1"
    finally:
        os.close(read)
        os.waitpid(pid, 0)


def test_the_loops_pulse_stops_while_its_thread_is_blocked_and_where_names_the_blocking_call() -> None:
    loop = TrioThread()
    release = threading.Event()

    def block_the_loop() -> None:  # a synchronous call inside the loop: no deadline of trio can end it
        release.wait(30)

    async def activity() -> None:
        block_the_loop()

    try:
        assert loop.stalled_for() < 5  # a free loop pulses every PULSE_S
        loop.start(activity)
        deadline = time.monotonic() + 10
        while loop.stalled_for() < 1.5 and time.monotonic() < deadline:
            release.wait(0.05)  # (waiting on the condition with a deadline; the event is never set here)
        assert loop.stalled_for() >= 1.5
        assert "block_the_loop" in loop.where() and "activity" in loop.where()
    finally:
        release.set()
        assert loop.stop()
    assert not loop.alive and "ended" in loop.where()


def test_the_loop_starts_while_its_owner_goes_on_and_the_first_call_waits_for_it(monkeypatch) -> None:
    """A runtime's start does not wait for its loop (2-3 ms in a freshly forked process): it reports that it started
    meanwhile, and its first call waits until the loop runs."""
    from ouroactors.runtime.execution import bridge

    gate = threading.Event()
    real_run = trio.run

    def held_run(fn, *args):  # the loop's thread waits for the gate before trio starts
        gate.wait(30)
        return real_run(fn, *args)

    monkeypatch.setattr(bridge.trio, "run", held_run)
    loop = TrioThread()  # returns although the loop cannot have started
    answered: list[str] = []
    caller = threading.Thread(target=lambda: answered.append(loop.call(lambda: "after the start")))
    caller.start()
    caller.join(0.2)
    assert answered == [] and caller.is_alive()  # the call waits for the loop
    gate.set()
    caller.join(10)
    assert answered == ["after the start"]
    assert loop.stop(5)


def test_a_loop_that_fails_to_start_fails_the_first_call_with_its_error(monkeypatch) -> None:
    from ouroactors.runtime.execution import bridge

    def broken_run(fn, *args):
        raise OSError("no epoll here")

    monkeypatch.setattr(bridge.trio, "run", broken_run)
    loop = TrioThread()
    with pytest.raises(RuntimeError, match=r"failed to start.*no epoll here"):
        loop.call(lambda: None)
    assert loop.stop(5)


def test_a_loop_made_not_to_start_starts_at_begin_or_at_its_first_call() -> None:
    """``start=False``: a runtime makes its loop before it reports its start and begins it afterwards, so the loop's
    ~2 ms of Python does not take turns on the GIL with the start itself."""
    before = {t.name for t in threading.enumerate()}
    loop = TrioThread("unbegun-loop", start=False)
    assert "unbegun-loop" not in {t.name for t in threading.enumerate()} - before  # no thread yet
    assert loop.stop(5)  # never begun: nothing to stop, and it stays ended
    assert not loop.alive
    with pytest.raises(RuntimeError, match="failed to start"):  # a stopped loop runs no call
        loop.call(lambda: None)
    later = TrioThread("begun-at-first-call", start=False)
    try:
        assert later.call(lambda: threading.current_thread().name) == "begun-at-first-call"
        later.begin()  # once only: a second begin changes nothing
        assert later.call(lambda: 7) == 7
    finally:
        assert later.stop(5)
