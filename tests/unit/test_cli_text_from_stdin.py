"""``session send|steer|wait SESSION -``: a message's text from standard input.

One argument may hold 128 KiB on Linux and a prompt kept in a file had to be pasted through ``"$(cat f)"``; ``-``
reads it instead. What is read is held to the field's rules as an argument is, before any system is reached: the
refusals below run with no system at all. The accepted text is checked on the way to the sessions client (a
stand-in that records the call: what is tested is the CLI's reading, not the session; ``tests/e2e/test_cli_session``
sends through stdin to a served system).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from ouroactors.cli import main
from ouroactors.cli import session as session_cli
from ouroactors.runtime.coordinator.messages import MAX_PROMPT_BYTES


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def send(self, session_id: str, text: str, **_: Any) -> Any:
        self.calls.append(("send", (session_id, text)))
        return SimpleNamespace(view=SimpleNamespace(state="running", state_version=1), detail="")

    def steer(self, session_id: str, text: str) -> None:
        self.calls.append(("steer", (session_id, text)))

    def wait(self, session_id: str, text: str, **_: Any) -> Any:
        self.calls.append(("wait", (session_id, text)))
        return SimpleNamespace(view=SimpleNamespace(state="waiting", state_version=1), detail="waits")


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    found = _Recorder()
    monkeypatch.setattr(session_cli, "_sessions", lambda *_a, **_k: found)
    return found


def run(tmp_path: Any, *args: str, stdin: bytes) -> Any:
    return CliRunner().invoke(main, ["session", args[0], "--data-dir", str(tmp_path), *args[1:]], input=stdin)


@pytest.mark.parametrize(("stdin", "text"), [
    (b"tidy the notes\n", "tidy the notes"),           # echo's line end is not part of the message
    (b"tidy the notes\r\n", "tidy the notes"),
    (b"line one\nline two\n\n", "line one\nline two\n"),  # only one line end goes
    ("caf\u00e9 \u2713".encode(), "caf\u00e9 \u2713"),
])
def test_send_takes_its_text_from_stdin(tmp_path: Any, recorder: _Recorder, stdin: bytes, text: str) -> None:
    result = run(tmp_path, "send", "s1", "-", stdin=stdin)
    assert result.exit_code == 0, result.output
    assert recorder.calls == [("send", ("s1", text))]


def test_a_prompt_longer_than_one_argument_may_be_is_read_whole(tmp_path: Any, recorder: _Recorder) -> None:
    long = "x" * MAX_PROMPT_BYTES  # over the 128 KiB an argv string may hold
    assert run(tmp_path, "send", "s1", "-", stdin=long.encode() + b"\n").exit_code == 0
    assert recorder.calls == [("send", ("s1", long))]


def test_steer_and_wait_read_stdin_too(tmp_path: Any, recorder: _Recorder) -> None:
    assert run(tmp_path, "steer", "s1", "-", stdin=b"say when done\n").exit_code == 0
    assert run(tmp_path, "wait", "s1", "-", "--seconds", "5", stdin=b"go on\n").exit_code == 0
    assert recorder.calls == [("steer", ("s1", "say when done")), ("wait", ("s1", "go on"))]


@pytest.mark.parametrize(("args", "stdin", "words"), [
    (("send", "s1", "-"), b"\xff\xfe", "standard input is not UTF-8 text: byte 0 is 0xff"),
    (("send", "s1", "-"), b"", "must be 1 to"),
    (("send", "s1", "-"), b"\n", "must be 1 to"),
    (("send", "s1", "-"), b"x" * (MAX_PROMPT_BYTES + 1), f"must be 1 to {MAX_PROMPT_BYTES} bytes"),
    (("send", "s1", "-"), b"x" * (MAX_PROMPT_BYTES + 10), f"at most {MAX_PROMPT_BYTES} bytes of UTF-8"),
    (("wait", "s1", "-", "--seconds", "5"), b"y" * 8001, "must be 1 to 8000 bytes"),
])
def test_bad_stdin_is_a_usage_error_naming_the_argument(tmp_path: Any, recorder: _Recorder,
                                                        args: tuple[str, ...], stdin: bytes, words: str) -> None:
    result = run(tmp_path, *args, stdin=stdin)
    assert result.exit_code == 2, result.output
    assert "Invalid value for 'TEXT'" in result.output and words in result.output, result.output
    assert recorder.calls == []  # nothing was sent


def test_a_dash_is_only_stdin_when_it_is_the_whole_argument(tmp_path: Any, recorder: _Recorder) -> None:
    assert run(tmp_path, "send", "s1", "--", "- a list item", stdin=b"ignored").exit_code == 0
    assert recorder.calls == [("send", ("s1", "- a list item"))]
