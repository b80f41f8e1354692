"""``ouroactors events --path P --kind K``: the events of one actor and those below it, of the kinds asked for.

The event log is written by the supervisors' own writer into a data dir no system serves (``events`` reads the log
and works with the system gone); a filter that keeps nothing says so on stderr and lists the kinds the log holds,
so a misspelt kind is not taken for a quiet run."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from ouroactors.cli import main
from ouroactors.supervision.events import EventWriter

LOG = [("app", "a", "started"), ("app", "ab", "started"), ("app/a", "x", "started"), ("app/a", "x", "exited"),
       ("app", "a", "restarting"), ("app", None, "supervisor_started")]


def _events(tmp_path: Any, *options: str) -> Any:
    log = tmp_path / "events.jsonl"
    if not log.exists():
        for supervisor, child, kind in LOG:
            EventWriter(str(log), supervisor, 1, "local:1").write(kind, child, {})
    return CliRunner().invoke(main, ["events", "--data-dir", str(tmp_path), "--json", *options])


def shown(result: Any) -> list[tuple[str, str]]:
    assert result.exit_code == 0, result.output
    return [(e["path"], e["kind"]) for e in map(json.loads, result.stdout.splitlines())]


def test_a_path_keeps_the_actor_and_those_below_it_never_a_sibling_sharing_its_prefix(tmp_path: Any) -> None:
    assert shown(_events(tmp_path, "--path", "app/a")) == [
        ("app/a", "started"), ("app/a/x", "started"), ("app/a/x", "exited"), ("app/a", "restarting")]


def test_kinds_and_paths_combine_and_repeat(tmp_path: Any) -> None:
    assert shown(_events(tmp_path, "--kind", "started", "--path", "app/a/x", "--path", "app/ab")) == [
        ("app/ab", "started"), ("app/a/x", "started")]
    assert shown(_events(tmp_path, "--kind", "exited", "--kind", "restarting")) == [
        ("app/a/x", "exited"), ("app/a", "restarting")]


def test_a_filter_that_keeps_nothing_names_the_kinds_there_are(tmp_path: Any) -> None:
    result = _events(tmp_path, "--kind", "exitted")
    assert shown(result) == []
    assert result.stderr.strip() == ("no event matches --kind exitted; the kinds logged: exited, restarting, started, "
                                     "supervisor_started")
