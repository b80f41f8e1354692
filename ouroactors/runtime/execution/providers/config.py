"""``ProviderConfig``: which model provider a session uses and its settings — the ``[model]`` table of a session.

::

    [model]
    kind = "openai"
    base_url = "http://127.0.0.1:8080/v1"   # {base_url}/chat/completions is what gets called
    model = "qwen2.5-coder"
    api_key_env = "MY_LLM_KEY"               # the NAME of the variable holding the key; never the key itself

    [model]
    kind = "scripted"
    script = "scripts/demo.toml"             # omit for the embedded default

A discriminated union on ``kind``; every problem names its key path, the value given and the allowed values
(:func:`parse_provider_config`). The key itself never enters a configuration, a journal or an error message: only
the environment variable's name does, and the variable is read when a request is sent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StrictStr, TypeAdapter, ValidationError, field_validator

from ._errors import ProviderConfigError, problems_from


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedConfig(_Config):
    kind: Literal["scripted"]
    script: StrictStr | None = None  # a .toml/.json file; relative paths resolve against the session's base dir


_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"


class OpenAIConfig(_Config):
    kind: Literal["openai"]
    base_url: StrictStr
    model: Annotated[StrictStr, Field(min_length=1)]
    # None: send no Authorization header (local servers). Pattern-checked, and never echoed in an error.
    api_key_env: Annotated[StrictStr, Field(pattern=_ENV_NAME)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    include_usage: bool = True  # ask for the usage chunk (stream_options.include_usage)
    trust_env: bool = False  # honour HTTP(S)_PROXY / NO_PROXY / SSL_CERT_FILE from the environment
    connect_timeout_s: Annotated[float, Field(gt=0, le=300)] = 10.0
    first_token_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0  # request sent → first chunk
    stall_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0  # longest silence between two chunks
    max_attempts: Annotated[int, Field(ge=1, le=20)] = 4  # 1 = no retry
    backoff_base_s: Annotated[float, Field(ge=0, le=60)] = 0.5
    backoff_max_s: Annotated[float, Field(ge=0, le=600)] = 20.0
    max_retry_after_s: Annotated[float, Field(ge=0, le=3600)] = 60.0  # a longer Retry-After fails the call now

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL such as 'http://127.0.0.1:8080/v1'")
        if parts.query or parts.fragment:
            raise ValueError("must not carry a query or fragment; '/chat/completions' is appended to it")
        if parts.username or parts.password:
            raise ValueError("must not carry credentials; name the key's environment variable in api_key_env")
        return value.rstrip("/")

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def api_key(self, environ: Mapping[str, str] = os.environ) -> str | None:
        """The key, read now from the named variable (``None`` when no variable is configured)."""
        if self.api_key_env is None:
            return None
        return environ.get(self.api_key_env)


ProviderConfig = Annotated[ScriptedConfig | OpenAIConfig, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[ScriptedConfig | OpenAIConfig] = TypeAdapter(ProviderConfig)
_KNOWN_KEYS = set(ScriptedConfig.model_fields) | set(OpenAIConfig.model_fields)


def parse_provider_config(
    data: Mapping[str, Any], *, source: str | None = None, prefix: str = "model"
) -> ScriptedConfig | OpenAIConfig:
    """Validate a ``[model]`` table; raise :class:`ProviderConfigError` with key paths under ``prefix``."""
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as exc:
        problems = problems_from(exc, data, known_keys=_KNOWN_KEYS, kinds=("scripted", "openai"),
                                 prefix=prefix)
        if "api_key_env" in data and any(loc.endswith("api_key_env") for loc, _ in problems):
            problems = [(loc, "must be the NAME of an environment variable (letters, digits, '_'), not the key "
                              "itself; the value is not shown") if loc.endswith("api_key_env") else (loc, msg)
                        for loc, msg in problems]
        raise ProviderConfigError(problems, source) from None
