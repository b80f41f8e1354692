"""A user's own tree for the scenario enumeration tests: a file-backed key-value store.

``Store`` writes its file atomically (a temp file, fsync, rename); ``TornStore`` writes it in place in two steps with
a fault point between them — the bug a crash there exposes (the file holds half a document after a restart).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ouroactors import Worker, faults

faults.register_point("scenario_app.half_written", "TornStore: the first half of the file is written")


class Store(Worker):
    def on_start(self, path: str) -> None:
        # relative to the system's data dir: every run of an enumeration starts from its own (empty) one
        self.file = os.path.join(self.context.data_dir, path) if self.context is not None else path
        try:
            with open(self.file) as f:
                self.data: dict[str, Any] = json.load(f)
        except FileNotFoundError:
            self.data = {}

    def on_message(self, message: Any, sender: Any) -> Any:
        if isinstance(message, tuple) and message[:1] == ("put",):
            _, key, value = message
            self.data[key] = value
            self._save()
            return "ok"
        if isinstance(message, tuple) and message[:1] == ("get",):
            return self.data.get(message[1], "<missing>")
        if message == "keys":
            return sorted(self.data)
        return super().on_message(message, sender)

    def _save(self) -> None:
        tmp = f"{self.file}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.file)


class TornStore(Store):
    def on_start(self, path: str) -> None:
        try:
            super().on_start(path)
        except json.JSONDecodeError:  # what the torn write left: the store starts empty, the keys are lost
            self.data = {}

    def _save(self) -> None:
        text = json.dumps(self.data)
        with open(self.file, "w") as f:
            f.write(text[: len(text) // 2])
            f.flush()
            faults.point("scenario_app.half_written")
            f.write(text[len(text) // 2:])
