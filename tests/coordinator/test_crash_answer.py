"""What a command's caller hears when its coordinator crashes handling it (:func:`crash_answer`, pure).

Seen in ``test_actor_directory_killed`` before ``ActorStopped``: the restarted directory's sweep started a second
coordinator for the session while the first one handled a command; the first, losing its commit, answered its caller
the store's ``RevisionConflict`` ("another coordinator wrote it; this one must stop") — an internal error, outside
the documented answers to a command (README: ``ActorCrashed``, send it again with its event id).
"""

from __future__ import annotations

import pickle

from ouroactors.core.errors import ActorCrashed, CommitOutcomeUnknown
from ouroactors.runtime.coordinator.errors import NotOwner, RevisionConflict, crash_answer

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
