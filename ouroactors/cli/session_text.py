"""One line of text per committed session event: what ``session events`` prints and the demo narrates.

A reader following a session wants to know, line by line, what the model said, which tool it called with what,
and what waits on them — an approval's tool and call, not a bare ``approval_needed``. The full event is one
``--json`` away; these lines are for reading. Argument keys starting with ``_`` (what an approval was judged
against: a file's hash, the workspace's) are left out of the line: ``approvals show`` prints the whole call.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..runtime.coordinator.workflow import TERMINAL
from .visible import visible

ARGUMENTS_CHARS = 120  # an argument summary longer than this is cut (with "…"): one line per event
QUOTED_CHARS = 300  # a prompt or a steer longer than this is cut on its line (a message may hold 200,000)


def arguments_text(arguments: Any, limit: int = ARGUMENTS_CHARS) -> str:
    """``arguments`` as compact JSON, keys sorted, private (``_``) keys left out, at most ``limit`` characters."""
    if isinstance(arguments, dict):
        arguments = {k: v for k, v in arguments.items() if not str(k).startswith("_")}
    try:
        text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):  # keys of mixed types: still one line
        text = repr(arguments)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def quoted(text: Any, limit: int = QUOTED_CHARS) -> str:
    """``repr(text)``, or its first ``limit`` characters' repr and how much was left out: a prompt read from a file
    is one line here, not a screenful (``--json`` has it whole)."""
    if not isinstance(text, str) or len(text) <= limit:
        return repr(text)
    left = len(text) - limit
    rest = f"{left:,} more characters; --json shows them" if left > 1 else "1 more character; --json shows it"
    return f"{text[:limit]!r}… ({rest})"


def event_summary(kind: str, data: dict[str, Any]) -> str:
    """The line's text for an event of ``kind`` with ``data`` (an unknown kind: its data as compact JSON), made
    :func:`.visible.visible`: a call id, a tool name or a reason may come from the model."""
    return visible(_summary(kind, data), keep="")


def _summary(kind: str, data: dict[str, Any]) -> str:
    if kind == "text":
        return repr(data.get("text", ""))
    if kind == "tool_call":
        return f"{data.get('name')} {arguments_text(data.get('arguments'))} ({data.get('call_id')})"
    if kind == "tool_result":
        error = data.get("error")
        return f"{data.get('status')} ({data.get('call_id')})" + (f": {error}" if isinstance(error, str) else "")
    if kind == "approval_needed":
        return (f"{data.get('tool')} {arguments_text(data.get('arguments'))} ({data.get('call_id')}): "
                f"{data.get('reason')}")
    if kind == "turn_settled":
        return f"{data.get('status')}: {data.get('reason')}"
    if kind == "turn_started":
        return quoted(data.get("prompt", ""))
    if kind == "turn_resumed":
        held = data.get("not_repeated")
        taken = len(data.get("asks") or ())
        asks = f", {taken} answered approval(s) among them" if taken else ""
        return (f"a new runtime goes on with the turn (after an approval wait or a crash): it repeated the turn's "
                f"first {held} event(s) above{asks} from the journal and the ledger, not published again")
    if kind == "steered":
        again = ", a lost run's steer delivered again" if data.get("redelivered") else ""
        if data.get("at_end"):
            return f"{quoted(data.get('text', ''))} (after the turn stopped: for the next turn's model{again})"
        return f"{quoted(data.get('text', ''))} (before model call {data.get('at_call')}{again})"
    return arguments_text(data, limit=2 * ARGUMENTS_CHARS)


# A log written before re-runs held back what they repeat (execution.repeats) has the whole turn again after this.
RUN_AGAIN = ("  (the turn again, on a new runtime: its earlier run was cut short by an approval wait or a crash; "
             "recorded answers and settled effects are taken, not repeated)")


class EventLines:
    """The plain output of ``session events``: a line per event (cursor, kind, :func:`event_summary`), except that a
    turn's consecutive ``text`` events continue one line — the model's answer as it streams, led by its first
    event's cursor — instead of a line per delta. A ``turn_resumed`` says that a new runtime goes on with the turn
    (what it repeated of the cut run is not published again); in a log written before that, a ``turn_started`` of a
    turn that started before and never settled says that the turn runs again (the events that follow repeat the cut
    run's, from the journal). Everything written is :func:`.visible.visible`."""

    def __init__(self, write: Callable[[str], None], session_id: str | None = None,
                 waiting: Callable[[], bool] | None = None) -> None:
        self.write = write
        self.session_id = session_id  # given: an approval_needed line is followed by how to answer it, unless
        self.waiting = waiting  # this says the session waits on no approval now (it was answered, or it ended)
        self.text_turn: int | None = None  # the turn whose text line is open (not ended yet)
        self.text_open = False
        self.unsettled: int | None = None  # the turn that started and has not settled (as far as shown)

    def event(self, cursor: int, kind: str, turn: int | None, data: dict[str, Any]) -> None:
        if kind == "text" and isinstance(data.get("text"), str):
            if not (self.text_open and self.text_turn == turn):
                self.end()
                self.write(f"{cursor:>6} {'text':<16} ")
                self.text_open, self.text_turn = True, turn
            self.write(visible(data["text"]))
            return
        self.end()
        again = ""
        if kind == "turn_started":  # the same turn again, never settled: a new runtime runs it (see the module doc)
            again = RUN_AGAIN if turn is not None and turn == self.unsettled else ""
            self.unsettled = turn
        elif kind == "turn_settled":
            self.unsettled = None
        self.write(f"{cursor:>6} {visible(kind, keep=''):<16} {event_summary(kind, data)}{again}\n")
        if kind == "approval_needed" and self.session_id is not None and (self.waiting is None or self.waiting()):
            self.write(f"{'':>6} {'':<16} → `ouroactors session show {self.session_id}` names the approval and the "
                       "command that answers it\n")

    def end(self) -> None:
        """End an open text line (before another event, and when the output ends)."""
        if self.text_open:
            self.write("\n")
            self.text_open = False


def ended_text(view: Any) -> str | None:
    """What a follow that ended prints when its session ended (a terminal state, with its reason); else None."""
    if view.state not in _TERMINAL:
        return None
    return f"session {view.session_id} is {view.state}{f' ({view.reason})' if view.reason else ''}: its log ends here"


_TERMINAL = frozenset(state.value for state in TERMINAL)
_WAIT = re.compile(r"(\S+) (\S+) due_ns=(\d+)")


def wait_text(wait: str, now_s: float | None = None) -> str:
    """A view's wait (``"<kind> <id> due_ns=<ns>"``) with its due time readable — a timer's firing, a job's expiry —
    in local time and relative to ``now_s`` (default: now). Any other text is returned as it is."""
    found = _WAIT.fullmatch(wait)
    if found is None:
        return wait
    kind, wait_id, due_s = found.group(1), found.group(2), int(found.group(3)) / 1e9
    try:
        when = datetime.fromtimestamp(due_s).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    except (OverflowError, OSError, ValueError):  # a due time no calendar has: shown as it is
        return wait
    left = due_s - (time.time() if now_s is None else now_s)
    relative = ("past due" if left < 0 else f"in {left:.1f} s" if left < 120 else f"in {left / 60:.0f} min"
                if left < 7200 else f"in {left / 3600:.1f} h")
    return f"{kind} {wait_id}, {'expires' if kind == 'external_job' else 'due'} {when} ({relative})"


__all__ = ["ARGUMENTS_CHARS", "QUOTED_CHARS", "EventLines", "arguments_text", "event_summary", "quoted",
           "wait_text"]
