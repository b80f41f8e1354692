"""What a command's caller hears when its coordinator crashes handling it (:func:`crash_answer`, pure).

Seen in ``test_actor_directory_killed`` before ``ActorStopped``: the restarted directory's sweep started a second
coordinator for the session while the first one handled a command; the first, losing its commit, answered its caller
the store's ``RevisionConflict`` ("another coordinator wrote it; this one must stop") — an internal error, outside
the documented answers to a command (README: ``ActorCrashed``, send it again with its event id). The last test drives
the command path itself (``Commands._command``), so the wiring is pinned as well as the rule.
"""

from __future__ import annotations

import pickle
from collections.abc import Generator
from typing import Any

import pytest

from ouroactors.core.errors import ActorCrashed, CommitOutcomeUnknown
from ouroactors.runtime.coordinator.commands import Commands
from ouroactors.runtime.coordinator.errors import NotOwner, RevisionConflict, crash_answer
from ouroactors.runtime.coordinator.messages import SendMessage
from ouroactors.supervision.calls import Asker

PATH = "agent/coordinator/session#1"


def test_losing_the_session_to_another_coordinator_is_answered_as_a_crash_with_what_to_do():
    for lost in (RevisionConflict("s1", 6, 11), NotOwner("s1", "incarnation-b", "incarnation-a")):
        answer = crash_answer(PATH, lost)
        assert isinstance(answer, ActorCrashed) and answer.path == PATH
        assert "another coordinator took the session over" in str(answer)
        assert "send it again with its event id" in str(answer) and str(lost) in str(answer)
        assert str(pickle.loads(pickle.dumps(answer))) == str(answer)  # it travels to the caller


def test_other_crashes_are_answered_as_before():
    unknown = CommitOutcomeUnknown("eio")
    assert crash_answer(PATH, unknown) is unknown  # typed errors pass as they are
    raw = crash_answer(PATH, KeyError("x"))
    assert isinstance(raw, ActorCrashed) and "KeyError" in str(raw)  # an untyped one is no answer: a crash


class _Losing(Commands):
    """A coordinator whose message handling loses the session's record to another coordinator (the store raises)."""

    session_id = "s1"
    path = PATH

    def __init__(self) -> None:
        self.begun: set[int] = set()
        self.answered: list[Any] = []

    def _taken(self, ticket: int, answered: bool = False, returned: bool = False) -> None:
        pass

    def _message(self, request: Any) -> Generator[Any, Any, Any]:
        raise RevisionConflict("s1", 6, 11)
        yield  # a job, as the real one is

    def _answer_caller(self, caller: Asker, answer: Any, ticket: int = 0) -> None:
        self.answered.append(answer)


def test_the_command_path_answers_the_caller_with_it_then_crashes():
    coordinator = _Losing()
    request = SendMessage(session_id="s1", text="again", principal="alice", event_id="m-2")
    with pytest.raises(RevisionConflict):  # the coordinator crashes (let it crash: recovery reads the record back)
        next(coordinator._command(Asker("caller"), request, 0))
    [answer] = coordinator.answered
    assert isinstance(answer, ActorCrashed) and "send it again with its event id" in str(answer)
