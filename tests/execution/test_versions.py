"""Workflow versions: a pin resolves to this code's version or names one it must provide."""

from __future__ import annotations

import pickle

import pytest

from ouroactors.runtime.execution import versions
from ouroactors.runtime.execution.errors import RuntimeRefusal


def test_default_resolves_to_this_codes_version_and_is_always_provided():
    assert versions.resolve("default") == versions.WORKFLOW
    assert versions.check("s1", "default") == versions.WORKFLOW
    assert versions.check("s1", versions.WORKFLOW) == versions.WORKFLOW
    assert versions.WORKFLOW in versions.PROVIDED


def test_a_version_this_code_does_not_provide_is_refused_by_name():
    with pytest.raises(versions.WorkflowUnavailable, match=r"pinned to workflow 'turn-loop/0'.*provides") as err:
        versions.check("s1", "turn-loop/0")
    assert isinstance(err.value, RuntimeRefusal) and not versions.provides("turn-loop/0")
    again = pickle.loads(pickle.dumps(err.value))  # it crosses processes as the runtime's answer
    assert (again.session_id, again.pinned, again.provided) == ("s1", "turn-loop/0", versions.PROVIDED)
    assert str(again) == str(err.value)


def test_the_loop_that_stops_on_an_unknown_outcome_is_version_2_and_still_continues_version_1_sessions():
    assert versions.WORKFLOW == "turn-loop/2"  # older code must not continue a session this code pinned
    assert versions.check("s1", "turn-loop/1") == "turn-loop/1"  # their journals replay alike, or are refused
