"""Workers whose handlers return None to an ask (which answers nothing), for :mod:`.test_none_answers`.

:class:`Lookup` is a user's key-value worker: ``("get", key)`` returns ``dict.get`` — None for a missing key, the
mistake a user makes first. ``("later", key)`` keeps its asker (``asker_of``) and answers at the next ``"flush"``;
``("raw later", key)`` keeps the bare sender, as a plain thespian actor would, and answers it by a raw ``send`` at the
next ``"flush"``.
"""

from __future__ import annotations

from typing import Any

from ouroactors.supervision.worker import Worker

LOOKUP = "tests.actor.none_answers:Lookup"


class Lookup(Worker):
    def on_start(self) -> None:
        self.data = {"a": 1}
        self.kept: list[Any] = []
        self.raw: list[Any] = []

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "flush":
            for asker in self.kept:
                self.answer_asker(asker, "kept answer")
            for address in self.raw:
                self.send(address, "raw answer")
            answered = len(self.kept) + len(self.raw)
            self.kept, self.raw = [], []
            return answered
        op, key = message
        if op == "get":
            return self.data.get(key)
        if op == "later":
            self.kept.append(self.asker_of(sender))
            return None
        if op == "raw later":
            self.raw.append(sender)
            return None
        return self.unhandled(message, sender)
