"""``ouroactors ask --json``: an answer JSON cannot hold as it is is shown by its fields, not as a repr string."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from pydantic import BaseModel

from ouroactors.cli.messaging import _as_json


@dataclass
class Item:
    key: str
    tags: tuple[str, ...]


class Color(enum.Enum):
    RED = "red"


class Model(BaseModel):
    n: int
    color: Color


def test_dataclasses_models_sets_and_enums_are_json_values() -> None:
    answer = {"item": Item("a", ("x", "y")), "model": Model(n=1, color=Color.RED), "seen": {3, 1}, "c": Color.RED,
              "other": object}
    shown = json.loads(json.dumps(answer, default=_as_json))
    assert shown["item"] == {"key": "a", "tags": ["x", "y"]}  # was "Item(key='a', tags=('x', 'y'))"
    assert shown["model"] == {"n": 1, "color": "red"}
    assert shown["seen"] == [1, 3] and shown["c"] == "red"
    assert shown["other"] == "<class 'object'>"  # what has no fields: its repr, as before
