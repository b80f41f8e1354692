"""What a tool is to the turn loop: its declaration, the context it runs in, and the outcome it reports.

A tool is a *declaration* the loop can reason about before anything runs — its name and description (what the
model sees, with the JSON schema of its :attr:`Tool.Args`), its effect class (what grants judge), its fingerprint
fields (what the ledger's idempotency digest covers), its reconciler (who settles an ambiguous entry) and the
:class:`~ouroactors.authorities.grants.rules.Request` grants must judge — plus an ``async run`` under trio.

The loop's order for one call (issue 13 item 3) is: :func:`parse_call` (a bad call is a :class:`ToolCallError`,
reported to the model and recorded; nothing runs) → :meth:`Tool.grant_request` (may raise :class:`ToolRefused`,
e.g. a path outside the lease: same treatment) → grants → ledger start → :meth:`Tool.run` → settlement with
:attr:`ToolOutcome.evidence` → journal.

Why ``run`` returns an outcome instead of raising: every failure *after* the ledger start must be settled with
evidence, so a run turns refusals, exit codes, HTTP statuses and transport errors into a :class:`ToolOutcome`.
The one exception is cancellation: ``trio.Cancelled`` propagates (after the tool has killed what it started), so
the loop decides what an interrupted effect means. ``status="unknown"`` is the honest answer when the tool cannot
tell whether the effect happened (a request sent but no reply): the loop must not settle it as failed — the
entry stays started for the reconciler (the chaos workload's honesty rules).
"""

from __future__ import annotations

import json
import os
import posixpath
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ....authorities.grants.rules import Effect, Request
from ....core.errors import OuroactorsError
from ...sandbox import Boundary, SandboxMode
from ..model import ToolCall, ToolSpec

DEFAULT_OUTPUT_CAP = 64 * 1024
MAX_OUTPUT_CAP = 16 * 1024 * 1024


class ToolError(OuroactorsError):
    """A tool call refused before or while running; ``kind`` is a short machine name, the message says where."""

    kind = "tool_error"

    def __init__(self, tool: str, detail: str, *, kind: str | None = None) -> None:
        self.tool = tool
        self.detail = detail
        if kind is not None:
            self.kind = kind
        super().__init__(f"tool {tool!r}: {detail}")

    def outcome(self) -> ToolOutcome:
        """This refusal as a journal-able ``failed`` outcome (nothing ran), for the loop to record and report."""
        evidence: dict[str, Any] = {"ran": False}
        problems = getattr(self, "problems", None)
        if problems:
            evidence["problems"] = [[where, what] for where, what in problems]
        return ToolOutcome(status="failed", error=str(self), error_kind=self.kind, evidence=evidence)


class ToolRefused(ToolError):
    """The call is well-formed but names something the session may not touch (a path outside its lease, …)."""

    kind = "refused"


class ToolCallError(ToolError):
    """The model's call cannot be run as given: unknown tool, or arguments that fail the tool's schema.

    ``problems`` lists ``(field path, problem)`` pairs, e.g. ``("arguments.timeout_s", "Input should be greater
    than 0 (got -1)")``. Nothing ran; the loop reports the message to the model as a tool error and journals it.
    """

    def __init__(self, tool: str, call_id: str, kind: Literal["unknown_tool", "bad_arguments"],
                 problems: list[tuple[str, str]]) -> None:
        self.call_id = call_id
        self.problems = problems
        lines = "; ".join(f"{where}: {what}" if where else what for where, what in problems)
        super().__init__(tool, f"call {call_id!r} refused ({kind}): {lines}", kind=kind)


class BoundaryRecord(BaseModel):
    """The sandbox :class:`~ouroactors.runtime.sandbox.Boundary` as journal-able data."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: str
    read_only_root: bool
    writable: tuple[str, ...]
    network: bool
    private_tmp: bool
    die_with_parent: bool
    backend_version: str | None
    notes: tuple[str, ...]
    read_only: tuple[str, ...] = ()
    network_policy: str = "none"
    visible: tuple[str, ...] = ()
    leased_root: str | None = None

    @classmethod
    def of(cls, boundary: Boundary) -> BoundaryRecord:
        return cls(mode=boundary.mode.value, read_only_root=boundary.read_only_root, writable=boundary.writable,
                   network=boundary.network, private_tmp=boundary.private_tmp,
                   die_with_parent=boundary.die_with_parent, backend_version=boundary.backend_version,
                   notes=boundary.notes, read_only=boundary.read_only, network_policy=boundary.network_policy,
                   visible=boundary.visible, leased_root=boundary.leased_root)


class ToolOutcome(BaseModel):
    """What one run produced: journaled as ``tool_result``, its ``evidence`` recorded by the ledger's settlement.

    ``status``: ``ok`` the effect happened as asked; ``failed`` it definitely did not happen or failed (nothing
    ambiguous); ``unknown`` the tool cannot tell (leave the ledger entry started for the reconciler).
    ``output`` is capped at ``output_cap_bytes`` (UTF-8), ``truncated`` says whether anything was cut.
    ``error_kind`` is a short machine name (``path_escapes``, ``ambiguous_match``, ``timeout``, ``exit_status``…).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["ok", "failed", "unknown"]
    output: str = ""
    truncated: bool = False
    output_cap_bytes: int = DEFAULT_OUTPUT_CAP
    error: str | None = None
    error_kind: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)
    boundary: BoundaryRecord | None = None
    duration_ms: int = 0

    @field_validator("output", "error", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return clean_text(value) if isinstance(value, str) else value

    @field_validator("evidence", mode="before")
    @classmethod
    def _evidence(cls, value: Any) -> Any:
        return _clean(value)

    def for_model(self) -> str:
        """The text the model sees as the tool result."""
        parts = [self.output] if self.output else []
        if self.truncated:
            parts.append(f"[output truncated at {self.output_cap_bytes} bytes]")
        if self.error:
            parts.append(f"error ({self.error_kind or 'failed'}): {self.error}")
        return "\n".join(parts) if parts else f"({self.status}, no output)"


class ToolContext(BaseModel):
    """Where and how one call runs. The loop builds it per call from the session and the ledger start.

    ``root`` is the session's leased workspace root, already canonical (the workspace authority leased it);
    every path a tool touches must resolve inside it. ``idempotency_key`` is the key the ledger start used (the
    http tool sends it; its reconciler asks for it); when unset it is derived from ``effect_id`` then
    ``call_id`` (:meth:`key`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    session_id: str = Field(min_length=1, max_length=200)
    root: str
    sandbox_mode: SandboxMode = SandboxMode.BWRAP
    data_dir: str | None = None
    output_cap_bytes: int = Field(DEFAULT_OUTPUT_CAP, gt=0, le=MAX_OUTPUT_CAP)
    timeout_s: float = Field(60.0, gt=0, le=24 * 3600)
    network_domains: tuple[str, ...] = ()  # granted domain patterns (example.com, *.example.com, *)
    network_private: tuple[str, ...] = ()  # non-public destinations a rule names (127.0.0.1/32, db.internal)
    call_id: str | None = Field(None, max_length=200)
    effect_id: str | None = Field(None, max_length=200)
    idempotency_key: str | None = Field(None, min_length=1, max_length=200)

    @field_validator("root")
    @classmethod
    def _root_canonical(cls, value: str) -> str:
        if not value.startswith("/") or posixpath.normpath(value) != value or value == "/" or "\0" in value:
            raise ValueError(f"root must be a canonical absolute directory other than / (got {value!r})")
        if os.path.realpath(value) != value:
            raise ValueError(f"root {value!r} is not canonical (it resolves to {os.path.realpath(value)!r})")
        return value

    def key(self) -> str:
        """The idempotency key of this call's effect."""
        key = self.idempotency_key or self.effect_id or (f"{self.session_id}/{self.call_id}" if self.call_id else None)
        if key is None:
            raise ToolError("?", "no idempotency key: the context has neither idempotency_key, effect_id nor call_id",
                            kind="no_idempotency_key")
        return key


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown fields are refused (and named), values are frozen."""

    model_config = ConfigDict(frozen=True, extra="forbid")


A = TypeVar("A", bound=ToolArgs)


_SCHEMAS: dict[type[BaseModel], str] = {}  # argument class -> its JSON schema, as JSON text (see Tool.spec)


class Tool(ABC, Generic[A]):
    """One tool: a declaration the loop reasons about, and an async ``run`` under trio."""

    name: ClassVar[str]
    description: ClassVar[str]
    effect: ClassVar[Effect]
    Args: ClassVar[type[ToolArgs]]
    fingerprint_fields: ClassVar[tuple[str, ...]]
    ledger_kind: ClassVar[str] = "tool_call"  # the ledger effect kind its starts are recorded under
    reconciler: ClassVar[str | None] = None  # "module:function" as the ledger's ``reconcilers`` config takes it
    compensation: ClassVar[str | None] = None  # how an effect that ran is undone, when retrying cannot (None: it isn't)
    # True: it writes the files its grant request names; the effect port holds their write locks (.._serial) from
    # the call's intent through its run, so that calls of one turn on one file run one after the other
    writes_files: ClassVar[bool] = False

    def spec(self) -> ToolSpec:
        """What the model is shown. The JSON schema is generated once per argument class (pydantic takes ~1 ms a
        tool, and a runtime opens a session per turn) and each spec gets its own copy of it."""
        text = _SCHEMAS.get(self.Args)
        if text is None:
            text = _SCHEMAS[self.Args] = json.dumps(self.Args.model_json_schema())
        return ToolSpec(name=self.name, description=self.description, parameters=json.loads(text))

    def fingerprint_args(self, args: A) -> dict[str, Any]:
        """The arguments the ledger fingerprint covers: ``fingerprint(ledger_kind, tool.fingerprint_args(args))``."""
        dumped = args.model_dump(mode="json")
        return {"tool": self.name, **{name: dumped[name] for name in self.fingerprint_fields}}

    def intent(self, args: A, ctx: ToolContext) -> dict[str, Any] | None:
        """What the call means to leave behind, recorded with its ledger start for its reconciler (None: nothing a
        reconciler could check). Called after :meth:`grant_request`, before the start; it must not change
        anything, and a failure to work it out is None, never an error (the run reports what is wrong)."""
        return None

    @abstractmethod
    def grant_request(self, args: A, ctx: ToolContext) -> Request:
        """What grants must judge. May raise :class:`ToolRefused` (nothing runs, nothing is recorded as started)."""

    @abstractmethod
    async def run(self, args: A, ctx: ToolContext) -> ToolOutcome:
        """Run under trio. Returns an outcome for every failure; only ``trio.Cancelled`` propagates."""


def parse_call(call: ToolCall, tools: Mapping[str, Tool[Any]]) -> tuple[Tool[Any], ToolArgs]:
    """Find the tool and validate its arguments, or raise :class:`ToolCallError` naming the field and problem."""
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "(none)"
        raise ToolCallError(call.name, call.id, "unknown_tool", [("name", f"no tool {call.name!r}; tools: {known}")])
    try:
        args = tool.Args.model_validate(call.arguments)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            where = ".".join(["arguments", *(str(p) for p in err["loc"])])
            given = "" if err["type"] == "missing" else f" (got {_short(err.get('input'))})"
            problems.append((where, f"{err['msg']}{given}"))
        raise ToolCallError(call.name, call.id, "bad_arguments", problems) from None
    return tool, args


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clean_text(text: str) -> str:
    """``text`` with undecodable file-name bytes (surrogate escapes) shown as ``\\xff``: a name on disk need not be
    UTF-8, but the journal's canonical encoding refuses lone surrogates, and a tool must still answer."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def cap_bytes(data: bytes, cap: int) -> tuple[str, bool]:
    """Decode ``data`` as UTF-8 (invalid bytes replaced) after cutting it to ``cap`` bytes on a character edge."""
    if len(data) <= cap:
        return data.decode("utf-8", errors="replace"), False
    return data[: _char_edge(data, cap)].decode("utf-8", errors="replace"), True


def _char_edge(data: bytes, cap: int) -> int:
    """The largest cut ``<= cap`` that does not split a multi-byte UTF-8 sequence (garbage is cut as is)."""
    for back in range(1, min(4, cap) + 1):
        byte = data[cap - back]
        if byte & 0xC0 != 0x80:  # a lead byte (or ASCII): how long is its sequence?
            need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
            return cap - back if need > back else cap
    return cap


__all__ = [
    "DEFAULT_OUTPUT_CAP", "BoundaryRecord", "Tool", "ToolArgs", "ToolCallError", "ToolContext", "ToolError",
    "ToolOutcome", "ToolRefused", "cap_bytes", "clean_text", "parse_call",
]
