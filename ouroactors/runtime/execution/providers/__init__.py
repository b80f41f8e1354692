"""Model providers: ``scripted`` (recorded turns, deterministic, the embedded default) and ``openai`` (an
OpenAI-compatible Chat Completions streaming client). Both implement :class:`~..model.ModelProvider`.

``make_provider(config)`` is the one way the runtime gets a provider from a session's ``[model]`` table, so a
bad table or a bad script file fails when the session opens (a typed :class:`ProviderConfigError` naming file and
key path), never halfway through a turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..model import ModelProvider
from ._errors import ProviderConfigError, ScriptFileError
from .config import OpenAIConfig, ProviderConfig, ScriptedConfig, parse_provider_config
from .openai import OpenAIProvider, RetryHook, RetryNotice
from .scripted import DEFAULT_SCRIPT, Script, ScriptedProvider, load_script, parse_script


def make_provider(
    config: ScriptedConfig | OpenAIConfig | Mapping[str, Any],
    *,
    base_dir: str | Path | None = None,
    on_retry: RetryHook | None = None,
) -> ModelProvider:
    """The provider a validated (or raw, then validated here) ``[model]`` table describes.

    ``base_dir`` resolves a relative ``script`` path (the directory of the session's configuration file);
    ``on_retry`` is told about every retried attempt of an ``openai`` call.
    """
    if not isinstance(config, ScriptedConfig | OpenAIConfig):
        config = parse_provider_config(config)
    if isinstance(config, OpenAIConfig):
        return OpenAIProvider(config, on_retry=on_retry)
    if config.script is None:
        return ScriptedProvider(DEFAULT_SCRIPT)
    path = Path(config.script)
    if base_dir is not None and not path.is_absolute():
        path = Path(base_dir) / path
    return ScriptedProvider(load_script(path), source=str(path))


__all__ = [
    "DEFAULT_SCRIPT", "OpenAIConfig", "OpenAIProvider", "ProviderConfig", "ProviderConfigError", "RetryHook",
    "RetryNotice", "Script", "ScriptFileError", "ScriptedConfig", "ScriptedProvider", "load_script",
    "make_provider", "parse_provider_config", "parse_script",
]
