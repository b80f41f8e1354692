"""The tools a session's model may call: ``read``, ``write``, ``edit``, ``list``, ``shell`` and ``http``.

:data:`TOOLS` is the registry by name; :func:`parse_call` turns a model's :class:`~..model.ToolCall` into the
tool and its validated arguments, or raises :class:`ToolCallError` (nothing runs). See :mod:`.base` for the
contract (declaration, context, outcome) and the loop's order of calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ..model import ToolCall, ToolSpec
from . import base
from ._paths import PathRefused
from .base import (
    BoundaryRecord,
    Tool,
    ToolArgs,
    ToolCallError,
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolRefused,
)
from .files import EditTool, ListTool, ReadTool, WriteTool
from .http import HttpTool, Reconciled, check_key, check_key_async, judge_lookup, reconcile
from .shell import ShellTool

TOOLS: Mapping[str, Tool[Any]] = MappingProxyType(
    {tool.name: tool for tool in (ReadTool(), WriteTool(), EditTool(), ListTool(), ShellTool(), HttpTool())})
for _tool in TOOLS.values():  # their schemas made at import: a runtime forked after it inherits them (Tool.spec)
    _tool.spec()


def parse_call(call: ToolCall, tools: Mapping[str, Tool[Any]] = TOOLS) -> tuple[Tool[Any], ToolArgs]:
    """The tool named by ``call`` and its validated arguments; :class:`ToolCallError` names what is wrong."""
    return base.parse_call(call, tools)


def specs(names: tuple[str, ...] | None = None, tools: Mapping[str, Tool[Any]] = TOOLS) -> tuple[ToolSpec, ...]:
    """The :class:`ToolSpec` of each tool (all, or ``names`` in that order; an unknown name is a KeyError)."""
    return tuple(tools[n].spec() for n in (names if names is not None else tuple(tools)))


__all__ = [
    "TOOLS", "BoundaryRecord", "EditTool", "HttpTool", "ListTool", "PathRefused", "ReadTool", "Reconciled",
    "ShellTool", "Tool", "ToolArgs", "ToolCallError", "ToolContext", "ToolError", "ToolOutcome", "ToolRefused",
    "WriteTool", "check_key", "check_key_async", "judge_lookup", "parse_call", "reconcile", "specs",
]
