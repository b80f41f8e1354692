"""Session configuration: valid tables load; every bad one is a SpecError naming key path, value and choices."""

from __future__ import annotations

import pytest

from ouroactors.core.errors import SpecError
from ouroactors.runtime.execution.config import (
    SessionConfig,
    load_session_config,
    parse_session_config,
)
from ouroactors.runtime.execution.providers.config import OpenAIConfig as OpenAIModel
from ouroactors.runtime.execution.providers.config import ScriptedConfig as ScriptedModel

GOOD = """
workspace = "/srv/repo"
[model]
kind = "openai"
base_url = "http://127.0.0.1:8000/v1"
model = "gpt-4o-mini"
api_key_env = "OPENAI_API_KEY"
[tools]
enabled = ["read", "shell"]
[sandbox]
mode = "none"
[limits]
max_turns = 3
turn_deadline_s = 12.5
[pins]
prompt = "p7"
"""


def test_defaults_are_the_scripted_provider_in_bwrap():
    config = parse_session_config("")
    assert isinstance(config.model, ScriptedModel) and config.sandbox.mode == "bwrap"
    assert config.tools.enabled == ("read", "write", "edit", "list", "shell", "http")


def test_full_table_loads(tmp_path):
    path = tmp_path / "session.toml"
    path.write_text(GOOD)
    config = load_session_config(path)
    assert isinstance(config.model, OpenAIModel) and config.model.api_key_env == "OPENAI_API_KEY"
    assert config.limits.max_turns == 3 and config.pins.prompt == "p7" and config.tools.enabled == ("read", "shell")
    assert config.digest() == parse_session_config(GOOD).digest() != SessionConfig().digest()


def _problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        parse_session_config(text, "s.toml")
    assert "s.toml" in str(info.value)
    return info.value.problems


@pytest.mark.parametrize(("text", "where", "needles"), [
    ('[sandbox]\nmode = "chroot"', "sandbox.mode", ["'chroot'", "'bwrap'", "'none'"]),
    ('[model]\nkind = "anthropic"', "model.kind", ["'anthropic'", "'scripted'", "'openai'"]),
    ('[tools]\nenabled = ["read", "rm"]', "tools.enabled[1]", ["'rm'", "'shell'"]),
    ('[limits]\nmax_turns = 0', "limits.max_turns", ["got 0", "greater than or equal to 1"]),
    ('[limits]\nmax_trns = 3', "limits.max_trns", ["did you mean 'max_turns'"]),
    ('[model]\nkind = "openai"\nmodel = "m"', "model.base_url", ["is required"]),
    ('[model]\nkind = "openai"\nbase_url = "ftp://x"\nmodel = "m"', "model.base_url", ["'ftp://x'"]),
    ('workspce = "/x"', "workspce", ["did you mean 'workspace'"]),
    # the journal budget now applies (it was ignored): a value that would never cut, or cut everything, is refused
    ('[limits]\njournal_budget_bytes = 1024', "limits.journal_budget_bytes", ["1024", "greater than or equal"]),
    ('[limits]\njournal_budget_bytes = -1', "limits.journal_budget_bytes", ["-1"]),
    ('[limits]\njournal_budget_bytes = 1e300', "limits.journal_budget_bytes", ["1e+300"]),
    ('[limits]\njournal_budget_bytes = inf', "limits.journal_budget_bytes", ["inf"]),
    ('[limits]\njournal_budget_bytes = 99999999999999999', "limits.journal_budget_bytes", ["less than or equal"]),
    ('[limits]\njournal_budget_bytes = "64MB"', "limits.journal_budget_bytes", ["'64MB'"]),
])
def test_bad_values_name_path_value_and_choices(text, where, needles):
    problems = _problems(text)
    matching = [msg for loc, msg in problems if loc == where]
    assert matching, problems
    for needle in needles:
        assert needle in matching[0], matching[0]


def test_a_key_in_the_config_is_refused_and_never_echoed():
    secret = "sk-live-1234567890abcdef"
    problems = _problems(f'[model]\nkind = "openai"\nbase_url = "http://h/v1"\nmodel = "m"\napi_key = "{secret}"')
    assert any(loc == "model.api_key" and "environment variable" in msg for loc, msg in problems)
    problems = _problems(f'[model]\nkind = "openai"\nbase_url = "http://h/v1"\nmodel = "m"\napi_key_env = "{secret}"')
    assert any(loc == "model.api_key_env" for loc, _ in problems)
    assert all(secret not in msg for _, msg in problems)


def test_malformed_toml_and_unreadable_file(tmp_path):
    assert "malformed TOML" in _problems("[model\n")[0][1]
    with pytest.raises(SpecError, match="cannot read"):
        load_session_config(tmp_path / "absent.toml")


def test_a_bad_session_config_says_it_is_a_session_configuration_across_processes():
    import pickle

    from ouroactors.core.errors import SpecError
    from ouroactors.runtime.execution.config import parse_session_config

    with pytest.raises(SpecError) as caught:
        parse_session_config({"model": {"kind": "opneai"}}, "session s1")
    assert str(caught.value).startswith("invalid session configuration:\n  session s1: model.kind")
    assert caught.value.problems == [("model.kind", "got 'opneai'; allowed kinds: 'scripted', 'openai'")]
    with pytest.raises(SpecError) as missing:
        parse_session_config({"model": {"base_url": "http://127.0.0.1:1/v1"}}, "session s1")
    assert missing.value.problems == [("model.kind", "is required; allowed kinds: 'scripted', 'openai'")]
    again = pickle.loads(pickle.dumps(caught.value))
    assert str(again) == str(caught.value) and again.problems == caught.value.problems
