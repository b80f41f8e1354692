"""``ouroactors events -n N``: the last N matching events of the log, as ``logs -n`` and ``tail -n`` do."""

from __future__ import annotations

import json

from click.testing import CliRunner

from ouroactors.cli import main


def _log(data_dir, count):
    data_dir.mkdir()
    lines = [{"pid": 100 + i, "generation": i, "incarnation": 1, "kind": "started" if i % 2 else "exited",
              "path": f"app/w{i}", "supervisor": "app", "child": f"w{i}", "time_ns": 10**18 + i, "epoch": 1,
              "node": "127.0.0.1:1"} for i in range(count)]
    (data_dir / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_the_last_n_events_and_the_last_n_that_match(tmp_path):
    _log(tmp_path / "d", 10)
    run = CliRunner().invoke
    shown = run(main, ["events", "--data-dir", str(tmp_path / "d"), "--json", "-n", "3"])
    assert shown.exit_code == 0, shown.output
    assert [json.loads(line)["path"] for line in shown.output.splitlines()] == ["app/w7", "app/w8", "app/w9"]
    started = run(main, ["events", "--data-dir", str(tmp_path / "d"), "--json", "--kind", "started", "--last", "2"])
    assert [json.loads(line)["path"] for line in started.output.splitlines()] == ["app/w7", "app/w9"]
    everything = run(main, ["events", "--data-dir", str(tmp_path / "d"), "--json", "-n", "50"])
    assert len(everything.output.splitlines()) == 10
    assert run(main, ["events", "--data-dir", str(tmp_path / "d"), "-n", "0"]).output == ""
    refused = run(main, ["events", "--data-dir", str(tmp_path / "d"), "-n", "-1"])
    assert refused.exit_code == 2 and "-1 is not in the range x>=0" in refused.output
