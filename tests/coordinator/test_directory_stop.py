"""A session directory that stops (an upstream authority's restart stops it: rest_for_one) answers the long polls
it holds, so its readers read again from the directory that replaces it instead of waiting out their asks' whole
timeout (wait_s + 60 s: the enumeration's commit_unknown at the grants authority left its follower there)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ouroactors.faults._asking import isolated
from ouroactors.runtime.coordinator.messages import EventsRead, ReadEvents
from ouroactors.sessions import Sessions

from .actor_support import suspended_after_a_turn, wait_for

pytestmark = [pytest.mark.multiproc]

HELD_S = 60.0  # the longest poll a reader may hold, far beyond the test: only an answer at the stop is in time


def test_a_stopping_directory_answers_the_polls_it_holds(actor_system, tmp_path):
    sessions: Sessions = suspended_after_a_turn(actor_system, tmp_path)
    cursor = sessions.show("s1").committed_cursor
    answers: list[Any] = []

    def held_read() -> None:
        try:  # its own endpoint: the main thread asks meanwhile
            with isolated(actor_system) as view:
                answers.append(view.ask("agent/sessions", ReadEvents("s1", cursor, wait_s=HELD_S,
                                                                     request_id="held-1"), HELD_S + 60))
        except Exception as exc:  # whatever came back is the test's to judge
            answers.append(exc)

    reader = threading.Thread(target=held_read, daemon=True)
    reader.start()
    for _ in range(3):  # asked after the read: the directory has the poll in hand by the time it answers these
        assert sessions.show("s1").state == "suspended"
    assert reader.is_alive(), answers  # held: nothing new is committed in a suspended session
    began = time.monotonic()
    actor_system.terminate_child("agent", "sessions")
    reader.join(timeout=20)
    assert not reader.is_alive(), "the held read was not answered when its directory stopped"
    [answer] = answers
    assert isinstance(answer, EventsRead), answer
    assert answer.request_id == "held-1" and answer.events == () and answer.state == "suspended"
    assert answer.committed == cursor and time.monotonic() - began < 20
    # the reader reads again from the directory that replaces it
    actor_system.restart_child("agent", "sessions")
    wait_for("the new directory answers", lambda: sessions.show("s1").state == "suspended")
    again = actor_system.ask("agent/sessions", ReadEvents("s1", cursor, wait_s=0.0, request_id="r2"), 30)
    assert isinstance(again, EventsRead) and again.committed == cursor
