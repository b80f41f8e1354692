"""Every generation the CLI prints for a person is ``epoch.micros``, zero-padded (issue 15 §2): the session view
printed ``generation 281474984130217`` where the tree table printed ``1.000000007314089``."""

from __future__ import annotations

from types import SimpleNamespace

from ouroactors.cli.session_views import print_view
from ouroactors.core.generation_text import format_generation


def test_session_show_prints_the_runtime_generation_as_the_tree_table_does(capsys) -> None:
    generation = (1 << 48) + 7_314_089
    view = SimpleNamespace(session_id="s1", state="running", state_version=3, committed_cursor=20,
                           runtime_id="rt-1", generation=generation, reason=None, principal="user:me",
                           rejections=0, waits=[])
    print_view(view)
    out = capsys.readouterr().out
    assert f"rt-1 (generation {format_generation(generation)})" in out, out
    assert format_generation(generation) == "1.000000007314089" and str(generation) not in out
