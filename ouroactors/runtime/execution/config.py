"""A session's configuration: one TOML table, validated by pydantic, with errors as good as a tree file's.

::

    workspace = "/srv/work/repo"
    system_prompt = "You are a careful coding agent."

    [model]
    kind = "openai"                  # scripted | openai
    base_url = "http://127.0.0.1:8000/v1"
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"   # the NAME of the variable holding the key — never the key

    [tools]
    enabled = ["read", "list", "shell"]

    [sandbox]
    mode = "bwrap"                   # bwrap | none

    [limits]
    max_turns = 50                   # user turns in the session
    max_model_calls = 25             # model calls in one turn (the agentic steps)
    max_tokens = 200000              # input + output tokens over the session
    max_output_bytes = 65536         # tool output handed to the model per call (the rest is cut, and says so)
    turn_deadline_s = 600

    [pins]                           # what a checkpoint pins (DESIGN.md, Coordinator)
    prompt = "p1"

Every problem names its key path, the value given and, for closed choices, the allowed values
(``sandbox.mode: got 'chroot'; allowed: 'bwrap', 'none'``), as :class:`~ouroactors.core.errors.SpecError` — the
same error type as tree files. A key given in place of the key's variable name (``api_key``) is refused by name.
Nothing is read from the environment here: the key's variable is resolved by the provider when it connects.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...core.codec import digest_of
from ...core.errors import SpecError
from ...supervision.specs import format_location
from .providers.config import OpenAIConfig, ProviderConfig, ScriptedConfig

WHAT = "session configuration"  # what a SpecError of this module says is invalid

ToolName = Literal["read", "write", "edit", "list", "shell", "http"]
TOOL_NAMES: tuple[ToolName, ...] = ("read", "write", "edit", "list", "shell", "http")


MAX_TOKENS = 1 << 62  # limits.max_tokens at most (a session's budget is stored as a 64-bit integer)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def model_name(model: ScriptedConfig | OpenAIConfig) -> str:
    """The model name requests carry (the scripted provider has none of its own)."""
    return model.model if isinstance(model, OpenAIConfig) else "scripted"


class ToolSettings(_Strict):
    enabled: tuple[ToolName, ...] = TOOL_NAMES


class SandboxSettings(_Strict):
    mode: Literal["bwrap", "none"] = "bwrap"
    network: bool = False


class Limits(_Strict):
    """Bounds the loop enforces (see :mod:`.loop`); deadlines in seconds."""

    max_turns: Annotated[int, Field(ge=1, le=1_000_000)] = 1000
    max_model_calls: Annotated[int, Field(ge=1, le=10_000)] = 50
    max_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)] = 2_000_000
    max_output_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    max_output_bytes: Annotated[int, Field(ge=256, le=64 << 20)] = 64 << 10
    turn_deadline_s: Annotated[float, Field(gt=0, le=7 * 86400)] = 1800.0
    model_deadline_s: Annotated[float, Field(gt=0, le=86400)] = 600.0
    tool_deadline_s: Annotated[float, Field(gt=0, le=86400)] = 600.0
    journal_budget_bytes: Annotated[int, Field(ge=64 << 10, le=1 << 40)] = 64 << 20  # then old turns are dropped


class Pins(_Strict):
    """The versions a session runs under, kept in its durable record (``session show``). Two are enforced, both
    resolved at creation and checked wherever the session continues (its messages are refused, its recovery parks,
    a runtime will not open it): ``workflow`` (``default`` becomes this code's :data:`.versions.WORKFLOW`; see
    :mod:`.versions`) and ``tool_set`` (``default`` becomes the digest of the enabled tools as this code defines
    them; see :mod:`.tool_set`). ``prompt``, ``model`` and ``policy`` are labels the caller chooses: the prompt and
    the model settings are in the stored configuration itself, and the policy is the grants authority's."""

    prompt: str = "default"
    model: str = "default"
    tool_set: str = "default"
    workflow: str = "default"
    policy: str = "default"


class SessionConfig(_Strict):
    model: ProviderConfig = Field(default_factory=lambda: ScriptedConfig(kind="scripted"))
    tools: ToolSettings = Field(default_factory=ToolSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    workspace: str | None = None
    system_prompt: str = "You are a helpful agent. Use the tools when they help."
    limits: Limits = Field(default_factory=Limits)
    pins: Pins = Field(default_factory=Pins)

    def digest(self) -> str:
        """Canonical digest of the whole configuration (journaled in ``session_opened``)."""
        return digest_of(self.model_dump(mode="python"))


_KNOWN = {
    "": tuple(SessionConfig.model_fields),
    "model": tuple(sorted(set(ScriptedConfig.model_fields) | set(OpenAIConfig.model_fields))),
    "tools": tuple(ToolSettings.model_fields),
    "sandbox": tuple(SandboxSettings.model_fields),
    "limits": tuple(Limits.model_fields),
    "pins": tuple(Pins.model_fields),
}
_SECRET_KEYS = ("api_key", "key", "token", "secret", "password", "authorization")


def load_session_config(path: str | Path) -> SessionConfig:
    """Read and validate a session TOML file; :class:`SpecError` names what is wrong and where."""
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SpecError([("", f"cannot read session config: {exc.strerror}")], source, WHAT) from None
    return parse_session_config(text, source)


def parse_session_config(text: str | dict[str, Any], source: str = "<string>") -> SessionConfig:
    """Validate a session table (TOML text, or a table already parsed, e.g. a tree file's kwargs)."""
    if isinstance(text, str):
        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SpecError([("", f"malformed TOML: {exc}")], source, WHAT) from None
    else:
        data = text
    if not isinstance(data, dict):
        raise SpecError([("", f"a session config is a table, got {type(data).__name__}")], source, WHAT)
    try:  # strictly typed, as a tree file is: "10" is no number of seconds, "yes" no boolean
        return SessionConfig.model_validate(_arrays_as_tuples(data), strict=True)
    except ValidationError as exc:
        raise _spec_error(exc, source) from None


def _arrays_as_tuples(value: Any) -> Any:
    """``value`` with every list a tuple: a TOML array is a list, and the configuration's sequences are tuples (which
    strict validation takes as tuples only)."""
    if isinstance(value, dict):
        return {key: _arrays_as_tuples(item) for key, item in value.items()}
    if isinstance(value, list):
        return tuple(_arrays_as_tuples(item) for item in value)
    return value


def _spec_error(exc: ValidationError, source: str) -> SpecError:
    problems: list[tuple[str, str]] = []
    for error in exc.errors():
        loc = tuple(p for p in error["loc"] if p not in ("scripted", "openai"))
        where = format_location(loc)
        kind = error["type"]
        if kind == "extra_forbidden":
            key = str(loc[-1]) if loc else ""
            section = format_location(loc[:-1]) if len(loc) > 1 else ""
            if key.lower() in _SECRET_KEYS or ("key" in key.lower() and key != "api_key_env"):
                message = (f"unknown key {key!r}: a secret never goes in the config; put it in an environment "
                           "variable and name that variable in model.api_key_env")
            else:
                close = difflib.get_close_matches(key, _KNOWN.get(section, ()), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                message = f"unknown key {key!r}{hint}; allowed: {', '.join(_KNOWN.get(section, ()))}"
        elif kind == "missing":
            message = "is required"
        elif kind == "union_tag_invalid" or kind == "union_tag_not_found":
            given = error.get("input")
            where = f"{where}.kind" if where else "kind"
            if kind == "union_tag_invalid":  # the table has a kind, and it is not one: show that value
                given = given.get("kind") if isinstance(given, dict) else given
                message = f"got {_shown(given)}; allowed kinds: 'scripted', 'openai'"
            else:
                message = "is required; allowed kinds: 'scripted', 'openai'"
        elif isinstance(error.get("input"), float) and not math.isfinite(error["input"]):
            given = error["input"]  # NaN passes every bound unnoticed (it compares false): said as what it is
            what = "NaN is not a number" if given != given else "an infinity is not a number"
            message = f"got {given!r}; {what}{' of seconds' if where.endswith('_s') else ''}"
        else:
            text = str(error["msg"]).removeprefix("Value error, ")
            if kind == "tuple_type":  # what a TOML file spells it as
                text = "Input should be an array, such as [\"read\", \"list\"]"
            elif kind.endswith("_type") and isinstance(error.get("input"), str):
                text += " (a string was given: write the value without quotes)"
            if kind == "literal_error":
                text = "allowed: " + str(error.get("ctx", {}).get("expected", text)).replace(" or ", ", ")
            if where.endswith("api_key_env"):  # it may be the key itself: never echo it
                problems.append((where, "must be the NAME of an environment variable (letters, digits, _), "
                                        "not the key itself (the value given is not shown)"))
                continue
            message = f"got {_shown(error.get('input'))}; {text}"
        problems.append((where, message))
    return SpecError(problems, source, WHAT)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
