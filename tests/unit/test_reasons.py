"""Black-box tests of ouroactors.supervision.reasons: the exit-reason vocabulary."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.supervision import reasons
from ouroactors.supervision.reasons import ExitKind, ExitReason

opt_text = st.one_of(st.none(), st.text(max_size=30))
any_reason = st.builds(
    ExitReason, st.sampled_from(list(ExitKind)), opt_text, opt_text, opt_text, opt_text
)


def test_constructors_and_constants() -> None:
    assert reasons.normal() == reasons.NORMAL == ExitReason(ExitKind.NORMAL)
    assert reasons.shutdown() == reasons.SHUTDOWN == ExitReason(ExitKind.SHUTDOWN)
    assert reasons.killed() == reasons.KILLED == ExitReason(ExitKind.KILLED)
    assert reasons.shutdown("why") == ExitReason(ExitKind.SHUTDOWN, info="why")
    assert reasons.killed("oom") == ExitReason(ExitKind.KILLED, info="oom")
    assert reasons.crash_of("E", "m", "d") == ExitReason(
        ExitKind.CRASH, exc_type="E", message="m", traceback_digest="d"
    )


@pytest.mark.parametrize(
    ("reason", "normal"),
    [
        (reasons.normal(), True),
        (reasons.shutdown(), True),
        (reasons.shutdown("info"), True),
        (reasons.crash_of("E", "m"), False),
        (reasons.killed(), False),
        (reasons.killed("sigkill"), False),
    ],
)
def test_is_normal_exit_is_otps_normal_shutdown_and_shutdown_tuple(reason: ExitReason, normal: bool) -> None:
    assert reason.is_normal_exit is normal


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        (reasons.normal(), "normal"),
        (reasons.shutdown(), "shutdown"),
        (reasons.shutdown("reached_max_restart_intensity"), "shutdown(reached_max_restart_intensity)"),
        (reasons.killed(), "killed"),
        (reasons.killed("timeout"), "killed(timeout)"),
        (reasons.crash_of("ValueError", "bad", "abc"), "crash(ValueError: bad [abc])"),
    ],
)
def test_str_renders_the_otp_vocabulary(reason: ExitReason, text: str) -> None:
    assert str(reason) == text


def test_to_json_omits_absent_fields() -> None:
    assert reasons.normal().to_json() == {"kind": "normal"}
    assert reasons.shutdown("x").to_json() == {"kind": "shutdown", "info": "x"}
    assert reasons.crash_of("E", "m", "d").to_json() == {
        "kind": "crash", "exc_type": "E", "message": "m", "traceback_digest": "d",
    }


@given(any_reason)
def test_json_round_trip(reason: ExitReason) -> None:
    data = json.loads(json.dumps(reason.to_json()))
    assert ExitReason.from_json(data) == reason


@given(any_reason)
def test_pickle_round_trip(reason: ExitReason) -> None:
    assert pickle.loads(pickle.dumps(reason)) == reason


def test_reasons_are_frozen_and_hashable() -> None:
    reason = reasons.shutdown("x")
    with pytest.raises(AttributeError):
        reason.info = "y"  # type: ignore[misc]
    assert {reason, reasons.shutdown("x")} == {reason}


def _raise(message: str) -> BaseException:
    try:
        raise KeyError(message)
    except KeyError as exc:
        return exc


def test_crash_from_an_exception_names_type_message_and_digest() -> None:
    exc = _raise("missing")
    reason = reasons.crash(exc)
    assert reason.kind is ExitKind.CRASH
    assert reason.exc_type == "builtins.KeyError"
    assert reason.message == str(exc)
    assert reason.traceback_digest is not None and len(reason.traceback_digest) == 16
    int(reason.traceback_digest, 16)  # hex
    assert not reason.is_normal_exit
    assert reasons.crash(exc) == reason  # the same traceback gives the same digest


def test_crash_digest_depends_on_the_traceback() -> None:
    assert reasons.crash(_raise("a")).traceback_digest != reasons.crash(_raise("b")).traceback_digest


def test_crash_of_a_nested_class_uses_its_qualified_name() -> None:
    class Inner(Exception):
        pass

    reason = reasons.crash(Inner("x"))
    assert reason.exc_type is not None and reason.exc_type.endswith(
        "test_crash_of_a_nested_class_uses_its_qualified_name.<locals>.Inner"
    )
    assert reason.exc_type.startswith(__name__)


def test_crash_message_is_truncated_to_keep_events_small() -> None:
    reason = reasons.crash(ValueError("x" * 5000))
    assert reason.message == "x" * 500


def test_crash_of_an_exception_never_raised_still_works() -> None:
    reason = reasons.crash(RuntimeError("never raised"))
    assert reason.message == "never raised"
    assert reason.traceback_digest


def test_crash_reason_renders_to_json_and_back() -> None:
    reason = reasons.crash(_raise("k"))
    assert ExitReason.from_json(reason.to_json()) == reason
