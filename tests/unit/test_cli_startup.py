"""The CLI starts without importing the framework: commands are loaded when invoked."""

from __future__ import annotations

import subprocess
import sys

import click

from ouroactors.cli import COMMANDS, main


def test_importing_the_cli_and_the_package_loads_no_heavy_dependency() -> None:
    code = ("import sys, ouroactors, ouroactors.cli; "
            "print(sorted(m for m in ('thespian', 'pydantic', 'rich', 'lmdb', 'httpx', 'trio') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_help_lists_every_command_without_importing_them() -> None:
    code = ("import sys; from click.testing import CliRunner; from ouroactors.cli import main; "
            "r = CliRunner().invoke(main, ['--help']); print(r.exit_code, 'thespian' in sys.modules, "
            "'pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "False", "False"]


def test_the_lazy_table_matches_the_commands_themselves() -> None:
    ctx = click.Context(main)
    for name, (module, short_help) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None, f"{name}: module ouroactors.cli.{module} does not register it"
        assert command.callback is None or command.callback.__module__ == f"ouroactors.cli.{module}"
        assert command.get_short_help_str(limit=1000) == short_help, f"{name}: help text drifted from COMMANDS"
    registered = {name for name in main.commands if name not in COMMANDS}
    assert registered <= {"demo", "check"}, f"commands missing from COMMANDS: {registered - {'demo', 'check'}}"


def test_the_public_api_resolves_lazily_to_the_same_objects() -> None:
    import ouroactors
    from ouroactors.supervision.worker import Worker
    from ouroactors.system.handle import ActorSystem

    assert ouroactors.Worker is Worker and ouroactors.ActorSystem is ActorSystem
    for name in ouroactors.__all__:
        assert getattr(ouroactors, name) is not None


def test_generations_print_in_an_order_people_can_see() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from ouroactors.core.generation_text import format_generation

    assert format_generation(None) == "-"
    assert format_generation((1 << 48) | 55629) == "1.000000000055629"
    word = st.integers(0, (1 << 48) - 1)

    @given(st.integers(0, 1000), word, word)
    def ordered(epoch: int, a: int, b: int) -> None:
        x, y = format_generation(epoch << 48 | a), format_generation(epoch << 48 | b)
        assert (a < b) == (x < y)  # as strings
        assert a >= b or float(x) <= float(y)  # and never backwards read as decimals

    ordered()


def test_errors_print_generations_in_the_same_form_as_the_tables() -> None:
    from ouroactors.core.errors import StaleGeneration, StampRequired

    stale = StaleGeneration("agent/ledger", (1 << 48) | 103446, (1 << 48) | 55629)
    assert "request stamped 1.000000000055629, current is 1.000000000103446" in str(stale)
    assert "its generation is 1.000000000000005" in str(StampRequired("agent/ledger", (1 << 48) | 5))
    assert "stamped nothing" in str(StaleGeneration("agent/ledger", None, None))
