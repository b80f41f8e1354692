"""A worker that answers a request and then fails in ``after_message``, or answers one request twice.

``"answer then fail"``: the handler answers ``"answered"``, then the batch flush after it (``after_message``, where
the ledger's group commit answers its askers) raises — the worker crashes with its request already answered.
``"twice"``: the handler answers ``"first"`` itself and returns ``"second"`` (a stray tagged answer for the handle).
Anything else is echoed.
"""

from __future__ import annotations

from typing import Any

from ouroactors.supervision.worker import Worker

ANSWERED_ONCE = "tests.actor.answered_once:AnswersThenFails"


class AnswersThenFails(Worker):
    def on_start(self) -> None:
        self.fail_after = False

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "answer then fail":
            self.fail_after = True
            return "answered"
        if message == "twice":
            self.answer_asker(self.asker_of(sender), "first")
            return "second"
        return ("echo", message)

    def after_message(self) -> None:
        if self.fail_after:
            raise RuntimeError("the flush after the answer failed")
