"""Workers that assign a name the framework owns (tests/actor/test_owned_attributes.py)."""

from __future__ import annotations

from typing import Any

from ouroactors import Worker


class KeepsItsFileAsPath(Worker):
    def on_start(self, path: str) -> None:
        self.path = path  # a store's file: the tree path's name


class KeepsItsFile(Worker):
    def on_start(self, path: str) -> None:
        self.path_ = path

    def on_message(self, message: Any, sender: Any) -> Any:
        return {"path": self.path, "file": self.path_, "generation": self.generation,
                "authorities": dict(self.authorities), "data_dir": str(self.context.data_dir)}
