"""The README's tree, Python and pytest examples, taken from the README itself, run as printed in a fresh
project (issue 15 §1: a new user copies them into ``myapp`` and expects them to do what they say).

The project is not installed and nothing sets ``PYTHONPATH``: the tree file's directory and pytest's rootdir
must be enough to import ``myapp``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .cli_helpers import cli

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
PYTEST = Path(sys.executable).with_name("pytest")  # plain `pytest`, which does not put the cwd on sys.path


def _block(language: str, needle: str) -> str:
    found = [b for b in re.findall(rf"```{language}\n(.*?)```", README, flags=re.S) if needle in b]
    assert len(found) == 1, f"the README shows one {language} block with {needle!r}"
    return found[0]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``myapp`` as the README describes it: the Store of the Python example, a Session for the TOML tree."""
    root = tmp_path / "proj"
    (root / "myapp").mkdir(parents=True)
    (root / "myapp" / "__init__.py").write_text("")
    python = _block("python", "class Store(Worker)")
    store = python[: python.index("tree = supervisor(")]  # the imports and the class, as a module
    (root / "myapp" / "store.py").write_text(store)
    (root / "myapp" / "session.py").write_text(
        "from ouroactors import Worker\n\nclass Session(Worker):\n    def on_message(self, message, sender):\n"
        "        return message\n")
    (root / "app.toml").write_text(_block("toml", 'actor = "myapp.store:Store"'))
    (root / "example.py").write_text(python)
    return root


def test_the_readme_tree_checks_from_its_project_without_an_install(project: Path) -> None:
    result = cli("check", "app.toml", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "root 'app', 3 children" in result.stdout


def test_the_readme_python_example_runs_as_printed(project: Path) -> None:
    # its system's data dir is a fresh temporary directory, kept after the run (the user may read its event log):
    # under this test's own directory, not the machine's /tmp
    env = {**os.environ, "TMPDIR": str(project)}
    result = subprocess.run([sys.executable, "example.py"], cwd=project, capture_output=True, text=True,
                            timeout=120, env=env)
    assert [p.name for p in project.glob("ouroactors-*")], "the example's data dir was not made under TMPDIR"
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.skipif(not PYTEST.exists(), reason="no pytest script beside the interpreter")
def test_the_readme_plugin_example_passes_under_plain_pytest(project: Path) -> None:
    tests = project / "tests"
    tests.mkdir()
    (tests / "test_store.py").write_text(_block("python", "def test_store_survives_a_kill"))
    result = subprocess.run([str(PYTEST), "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests"], cwd=project,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "4 passed" in result.stdout, result.stdout[-2000:]


def test_the_readme_session_config_and_script_are_what_the_runtime_takes(tmp_path: Path) -> None:
    # the README showed no session configuration at all: `--config FILE` was in `--help` only, its format in a
    # module docstring; these are taken from the README and validated as `session new` and the provider do
    from ouroactors.runtime.execution.config import parse_session_config
    from ouroactors.runtime.execution.providers.config import OpenAIConfig
    from ouroactors.runtime.execution.providers.scripted import load_script

    config = parse_session_config(_block("toml", 'kind = "openai"'), "README")
    assert isinstance(config.model, OpenAIConfig) and config.model.api_key_env == "OPENAI_API_KEY"
    assert config.sandbox.mode == "bwrap" and config.limits.max_model_calls == 25
    script = tmp_path / "turns.toml"
    script.write_text(_block("toml", "[[turns]]"))
    turns = load_script(script).turns
    assert len(turns) == 2 and turns[0].events[1].kind == "tool_call"
    scripted = parse_session_config(f'[model]\nkind = "scripted"\nscript = "{script}"\n', "README")
    assert scripted.model.kind == "scripted"
