"""The line ``session events`` prints per event, and how a wait id names its approval (both pure)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from ouroactors.cli.session_text import ARGUMENTS_CHARS, QUOTED_CHARS, arguments_text, event_summary
from ouroactors.runtime.coordinator.record import approval_of_wait, approval_wait_id


def test_each_kind_names_what_a_reader_acts_on():
    assert event_summary("turn_started", {"prompt": "tidy up"}) == "'tidy up'"
    assert event_summary("text", {"text": "on it"}) == "'on it'"
    assert event_summary("tool_call", {"name": "write", "call_id": "w1",
                                       "arguments": {"path": "a.txt", "content": "x"}}) == \
        'write {"content": "x", "path": "a.txt"} (w1)'
    assert event_summary("tool_result", {"call_id": "w1", "status": "failed"}) == "failed (w1)"
    needed = event_summary("approval_needed", {"tool": "shell", "call_id": "s1", "reason": "no rule",
                                               "arguments": {"command": "make", "_judged_against": {"files": 3}}})
    assert needed == 'shell {"command": "make"} (s1): no rule'  # what it was judged against: `approvals show`
    assert event_summary("turn_settled", {"status": "completed", "reason": "the model answered"}) == \
        "completed: the model answered"
    assert event_summary("steered", {"text": "stop", "at_call": 2}) == "'stop' (before model call 2)"
    assert "next turn" in event_summary("steered", {"text": "stop", "at_end": True})
    assert "again" in event_summary("steered", {"text": "stop", "at_call": 1, "redelivered": True})
    assert event_summary("something_new", {"b": 1, "a": [2]}) == '{"a": [2], "b": 1}'


def test_a_summary_is_one_bounded_line_whatever_the_arguments():
    long = event_summary("tool_call", {"name": "write", "call_id": "c", "arguments": {"content": "y" * 5000}})
    assert len(long) < ARGUMENTS_CHARS + 20 and "…" in long
    assert arguments_text({1: "a", "b": 2}) in ("{1: 'a', 'b': 2}", '{"1": "a", "b": 2}')  # mixed keys: no crash
    assert arguments_text(None) == "null" and arguments_text("text") == '"text"'


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                max_size=3), max_leaves=12),
       st.sampled_from(["tool_call", "approval_needed", "text", "turn_started", "steered", "x"]))
def test_any_event_data_gives_a_line(arguments, kind):
    line = event_summary(kind, {"arguments": arguments, "text": arguments, "prompt": arguments, "at_end": arguments})
    assert isinstance(line, str)


@dataclass
class _Approval:
    approval_id: str
    state_version: int
    call_digest: str


DIGEST = "dd2002ed021310cb" + "7" * 48


def test_a_wait_id_names_the_approval_of_its_version_and_call():
    approvals = [_Approval("approval-old", 2, DIGEST), _Approval("approval-new", 4, DIGEST),
                 _Approval("approval-other", 4, "ab" * 32)]
    assert approval_wait_id(4, DIGEST) == "ask.v4.dd2002ed021310cb"
    assert approval_of_wait(approvals, "ask.v4.dd2002ed021310cb").approval_id == "approval-new"
    assert approval_of_wait(approvals, "ask.v2.dd2002ed021310cb").approval_id == "approval-old"
    assert approval_of_wait(approvals, "approval-other").approval_id == "approval-other"
    assert approval_of_wait(approvals, "ask.v3.dd2002ed021310cb") is None  # no ask at that version
    assert approval_of_wait(approvals, "ask.v4.0000000000000000") is None  # another call
    for malformed in ("ask.v4.dd2002ed021310c", "ask.v4.DD2002ED021310CB", "ask.vx.dd2002ed021310cb",
                      "ask.v4.dd2002ed021310cb.", "approval-", ""):
        assert approval_of_wait(approvals, malformed) is None, malformed


def test_a_waits_due_time_is_read_as_a_time_and_how_far_off():
    from ouroactors.cli.session_text import wait_text

    now = 1_800_000_000.0
    due = int((now + 30) * 1e9)
    assert wait_text(f"timer timer.v3 due_ns={due}", now).endswith("(in 30.0 s)")
    assert wait_text(f"timer timer.v3 due_ns={due}", now).startswith("timer timer.v3, due 2027-")
    assert wait_text(f"external_job build-7 due_ns={int((now + 86400) * 1e9)}", now).endswith("(in 24.0 h)")
    assert "expires" in wait_text(f"external_job build-7 due_ns={int((now + 600) * 1e9)}", now)
    assert wait_text(f"external_job build-7 due_ns={int((now + 600) * 1e9)}", now).endswith("(in 10 min)")
    assert wait_text(f"timer t due_ns={int((now - 5) * 1e9)}", now).endswith("(past due)")
    assert wait_text("approval ask.v4.dd2002ed021310cb") == "approval ask.v4.dd2002ed021310cb"
    assert wait_text("timer t due_ns=" + "9" * 40) == "timer t due_ns=" + "9" * 40  # out of any calendar


def test_a_turns_streamed_text_reads_as_one_line_and_nothing_reaches_the_terminal_raw():
    from ouroactors.cli.session_text import EventLines
    from ouroactors.cli.visible import visible

    out: list[str] = []
    lines = EventLines(out.append)
    lines.event(1, "turn_started", 1, {"prompt": "hi"})
    for cursor, delta in enumerate(["The ", "notes\n", "have\ttwo ", "tasks.\x1b[2J"], start=2):
        lines.event(cursor, "text", 1, {"text": delta})
    lines.event(6, "tool_call", 1, {"name": "shell", "call_id": "c\x1b]0;pwned\x07", "arguments": {"command": "ls"}})
    lines.event(7, "text", 1, {"text": "after"})
    lines.event(8, "text", 2, {"text": "next turn"})  # another turn's text starts its own line
    lines.end()
    lines.end()  # idempotent
    text = "".join(out)
    assert text.splitlines() == [
        "     1 turn_started     'hi'",
        "     2 text             The notes",
        "have\ttwo tasks.\\x1b[2J",  # a newline the model wrote is kept; an escape sequence is not obeyed
        '     6 tool_call        shell {"command": "ls"} (c\\x1b]0;pwned\\x07)',
        "     7 text             after",
        "     8 text             next turn",
    ]
    assert "\x1b" not in text and "\x07" not in text
    assert visible("plain") == "plain" and visible("a\rb") == "a\\rb" and visible("a\nb", keep="") == "a\\nb"
    assert visible("a\nb") == "a\nb"


def test_an_approval_line_says_where_to_answer_it_when_the_session_is_named():
    from ouroactors.cli.session_text import EventLines

    out: list[str] = []
    EventLines(out.append, "s1").event(4, "approval_needed", 1, {"tool": "write", "call_id": "w1", "reason": "no rule",
                                                                "arguments": {"path": "a"}})
    assert "".join(out).splitlines()[1].strip() == ("→ `ouroactors session show s1` names the approval and the "
                                                    "command that answers it")
    out.clear()
    EventLines(out.append).event(4, "approval_needed", 1, {"tool": "write"})
    assert len("".join(out).splitlines()) == 1
    # an ask the session no longer waits on (answered since, or the session cancelled) gets no directions
    asked: list[str] = []
    out.clear()
    EventLines(out.append, "s1", waiting=lambda: bool(asked.append("s1"))).event(4, "approval_needed", 1,
                                                                             {"tool": "write"})
    assert len("".join(out).splitlines()) == 1 and asked == ["s1"]


def test_a_turn_that_runs_again_says_so():
    from ouroactors.cli.session_text import RUN_AGAIN, EventLines

    out: list[str] = []
    lines = EventLines(out.append)
    lines.event(1, "turn_started", 1, {"prompt": "go"})
    lines.event(2, "approval_needed", 1, {"tool": "write"})
    lines.event(3, "turn_started", 1, {"prompt": "go"})  # the approval's answer: a new runtime runs turn 1 again
    lines.event(4, "turn_settled", 1, {"status": "completed"})
    lines.event(5, "turn_started", 2, {"prompt": "next"})  # a new turn: nothing to say
    shown = "".join(out).splitlines()
    assert not shown[0].endswith(RUN_AGAIN) and shown[2].endswith(RUN_AGAIN) and not shown[4].endswith(RUN_AGAIN)
    # (a log written before re-runs held back their repeats: today's says it with a marker)
    out.clear()
    EventLines(out.append).event(6, "turn_resumed", 1, {"not_repeated": 7, "asks": ["d" * 64]})
    assert "a new runtime goes on with the turn" in out[0] and "first 7 event(s) above" in out[0]
    assert "1 answered approval(s) among them" in out[0]


def test_a_wait_id_with_a_version_no_record_can_hold_names_nothing():
    approvals = [_Approval("approval-1", 10 ** 17, DIGEST)]
    assert approval_of_wait(approvals, "ask.v" + "9" * 19 + ".dd2002ed021310cb") is None  # over 18 digits
    assert approval_of_wait(approvals, f"ask.v{10 ** 17}.dd2002ed021310cb").approval_id == "approval-1"
    assert approval_of_wait(approvals, "ask.v4.dd2002ed021310cb\n") is None


def test_a_failed_tool_result_says_why():
    from ouroactors.cli.session_text import event_summary

    assert event_summary("tool_result", {"call_id": "c1", "status": "ok"}) == "ok (c1)"
    assert event_summary("tool_result", {"call_id": "c2", "status": "failed", "error": "no such file: a.txt",
                                         "error_kind": "tool"}) == "failed (c2): no such file: a.txt"


def test_a_tool_results_error_cannot_drive_the_terminal():
    """The error comes from what the model chose (a path, a command's message): a control sequence in it is shown,
    never sent to the terminal."""
    from ouroactors.cli.session_text import EventLines

    out: list[str] = []
    EventLines(out.append).event(3, "tool_result", 1, {"call_id": "c\x1b[2J", "status": "failed",
                                                       "error": "no such file: \x1b]0;pwned\x07x\rY"})
    text = "".join(out)
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text and "no such file: " in text


def test_a_long_prompt_or_steer_is_cut_on_its_line_and_says_how_much_is_left_out():
    prompt = "line one\n" + "x" * 200_000  # a prompt sent from a file (session send s1 - < task.md)
    line = event_summary("turn_started", {"prompt": prompt})
    assert line.startswith(repr(prompt[:QUOTED_CHARS])) and "\n" not in line
    assert line.endswith(f"… ({len(prompt) - QUOTED_CHARS:,} more characters; --json shows them)")
    steer = event_summary("steered", {"text": "y" * (QUOTED_CHARS + 1), "at_call": 2})
    assert steer == f"{'y' * QUOTED_CHARS!r}… (1 more character; --json shows it) (before model call 2)"
    short = "tidy the notes"
    assert event_summary("turn_started", {"prompt": short}) == repr(short)  # what fits is shown whole
    assert event_summary("turn_started", {"prompt": "z" * QUOTED_CHARS}) == repr("z" * QUOTED_CHARS)
