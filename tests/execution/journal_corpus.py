"""The replay corpus: scripted sessions recorded through the real loop, kept as journal archives.

``tests/data/journals/*.journal`` were written by this module; ``test_replay_corpus.py`` replays them through
today's loop, so a change to the loop that changes what a recorded session would do (the requests it builds, the
conversation it keeps, how it settles) fails a test. After an *intended* change, re-record and review the diff::

    python -m tests.execution.journal_corpus tests/data/journals
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import lmdb
import trio

from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
from ouroactors.runtime.execution.archive import write_archive

from .loop_support import FakeEffects, Harness, call, make_session, text, usage

Recorder = Callable[[lmdb.Environment, str], None]


def _text_turns(env: lmdb.Environment, session: str) -> None:
    h = make_session(env, session, [[text("Hello"), text(", world"), usage(5, 3)], [text("Again."), usage(9, 2)]])
    for prompt in ("hi", "once more"):
        trio.run(h.loop.run_turn, prompt)


def _tools(env: lmdb.Environment, session: str) -> None:
    effects = FakeEffects(barrier=2, answers={"read": "- [ ] ship it\n", "list": "NOTES.md\nsrc/\n"})
    h = make_session(env, session, [
        [text("Let me look."), call("c1", "read", path="NOTES.md"), call("c2", "list", path="."), usage(20, 9)],
        [call("c3", "write", path="NOTES.md", content="- [x] ship it\n"), call("c4", "nope", x=1),
         call("c5", "read", paht="typo")],
        [text("Done: the task is ticked."), usage(40, 8)],
    ], effects=effects)
    trio.run(h.loop.run_turn, "tick the first task")


def _steer_and_interrupt(env: lmdb.Environment, session: str) -> None:
    effects = FakeEffects(block=frozenset({"list"}))
    h = make_session(env, session, [
        [call("c1", "read", path="a.txt")],
        [text("with y as well"), usage(3, 3)],
        [call("c2", "list", path=".")],
    ], effects=effects)
    h.steering.steer(1, "also look at y")
    trio.run(h.loop.run_turn, "read a")

    async def interrupted(harness: Harness) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(harness.loop.run_turn, "list everything")
            with trio.fail_after(5):
                while effects.started < 2:
                    await trio.sleep(0.001)
            harness.steering.interrupt(2)
            harness.loop.cancel_activity()

    trio.run(interrupted, h)


def _errors_and_limits(env: lmdb.Environment, session: str) -> None:
    h = make_session(env, session, [
        [call("c1", "read", path="x"), usage(70, 40)],
        [text("over budget")],
    ], config='[limits]\nmax_tokens = 100\nmax_model_calls = 5\n[sandbox]\nmode = "none"')
    trio.run(h.loop.run_turn, "spend")  # settles on max_tokens after the tool call
    trio.run(h.loop.run_turn, "again")  # refused by the limit before any call
    h2 = make_session(env, session + "-model-error", [[text("one")]])
    trio.run(h2.loop.run_turn, "one")
    trio.run(h2.loop.run_turn, "two")  # the script has no turn left: a recorded, typed model error


CORPUS: dict[str, Recorder] = {
    "text-turns": _text_turns,
    "tools": _tools,
    "steer-interrupt": _steer_and_interrupt,
    "errors-limits": _errors_and_limits,
}
SESSIONS = ["text-turns", "tools", "steer-interrupt", "errors-limits", "errors-limits-model-error"]


def record_corpus(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = StorageConfig.under(tmp)
        env = open_env(config)
        try:
            for name, recorder in CORPUS.items():
                recorder(env, name)
            for name in SESSIONS:
                path = out / f"{name}.journal"
                write_archive(env, name, path)
                written.append(path)
        finally:
            close_env(config)
    return written


if __name__ == "__main__":
    for path in record_corpus(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/journals")):
        print(path)
