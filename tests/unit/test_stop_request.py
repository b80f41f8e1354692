"""The foreground run's stop request: a signal ends the wait, and a storm of them never deadlocks it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from ouroactors.cli.stop_request import StopRequest

# A parent loops on wait() while a child sends it SIGTERM as fast as it can: a handler that took a lock the
# waiting loop holds (threading.Event.set inside Event.wait) hung this loop in about half the runs.
STORM = r"""
import os, signal, sys, time
from ouroactors.cli.stop_request import StopRequest

request = StopRequest()
parent = os.getpid()
child = os.fork()
if child == 0:
    for _ in range(20000):
        try:
            os.kill(parent, signal.SIGTERM)
        except ProcessLookupError:
            break
    os._exit(0)
seen, deadline = 0, time.monotonic() + 2.0
while time.monotonic() < deadline:
    if request.wait(0.0005):
        seen += 1
        request.requested = False
os.waitpid(child, 0)
print(seen)
"""


def test_a_storm_of_stop_signals_never_deadlocks_the_waiting_loop():
    done = subprocess.run([sys.executable, "-c", STORM], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0  # the signals were seen, not merely survived


# A signal's Python handler runs between two bytecodes of the main thread. This delivers one at *every* line of the
# waiting code (a trace function calls the handler there), so a handler that takes a lock the wait holds deadlocks
# every time, not one run in two; faulthandler ends a stuck process after 3 s with exit code 1.
AT_EVERY_LINE = r"""
import faulthandler, signal, sys, threading
from ouroactors.cli import stop_request

faulthandler.dump_traceback_later(3, exit=True)
if sys.argv[1] == "event":  # the handler run() had before: Event.set from inside Event.wait
    waiter = threading.Event()
    handler, wait = waiter.set, waiter.wait
    codes = {threading.Event.wait.__code__, threading.Condition.wait.__code__,
             threading.Condition.__enter__.__code__, threading.Condition.__exit__.__code__}
else:
    waiter = stop_request.StopRequest()
    handler, wait = (lambda: waiter._on_signal(signal.SIGTERM, None)), waiter.wait
    codes = {stop_request.StopRequest.wait.__code__}
delivered = 0

def trace(frame, event, arg):
    if frame.f_code not in codes:
        return None
    def each_line(frame, event, arg):
        global delivered
        if event == "line":
            delivered += 1
            handler()
        return each_line
    return each_line

sys.settrace(trace)
woke = wait(0)
sys.settrace(None)
print(delivered, woke)
"""


@pytest.mark.slow
def test_a_stop_signal_delivered_at_any_point_of_the_wait_never_deadlocks_it():
    ours = subprocess.run([sys.executable, "-c", AT_EVERY_LINE, "ours"], capture_output=True, text=True, timeout=60)
    assert ours.returncode == 0, ours.stderr
    delivered, woke = ours.stdout.split()
    assert int(delivered) > 0 and woke == "True"
    # the harness finds the bug it is for: the Event-based handler deadlocks under it
    event = subprocess.run([sys.executable, "-c", AT_EVERY_LINE, "event"], capture_output=True, text=True, timeout=60)
    assert event.returncode != 0 and "in set" in event.stderr, event.stdout + event.stderr


def test_a_signal_ends_the_wait_at_once_and_close_puts_the_old_handlers_back():
    before = signal.getsignal(signal.SIGTERM)
    request = StopRequest()
    try:
        assert not request.wait(0)
        threading.Thread(target=os.kill, args=(os.getpid(), signal.SIGTERM)).start()
        started = time.monotonic()
        assert request.wait(30)
        assert time.monotonic() - started < 10  # woken by the signal, not by the end of the timeout
        assert request.is_set() and request.wait(0)  # it stays requested
    finally:
        request.close()
    assert signal.getsignal(signal.SIGTERM) is before
