"""``ouroactors logs``: the last lines of the data dir's ``admin.out``, shown safely, and followed as they come."""

from __future__ import annotations

import os
import time
from pathlib import Path

from click.testing import CliRunner

from ouroactors.cli import logs as logs_module
from ouroactors.cli import main
from ouroactors.cli.logs import last_lines


def _log(tmp_path: Path, lines: list[str]) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "admin.out").write_text("".join(f"{line}\n" for line in lines))
    return data


def test_the_last_lines_are_printed_with_their_control_characters_shown(tmp_path: Path) -> None:
    record = "2026-01-02 03:04:05,678 WARNING myapp: model said"
    data = _log(tmp_path, [f"line {i}" for i in range(100)] + [f"{record} \x1b[2Kok\u202e"])
    done = CliRunner().invoke(main, ["logs", "--data-dir", str(data), "-n", "3"])
    assert done.exit_code == 0, done.output
    # (lines that do not begin a record are indented: test_cli_logs_exit_codes)
    assert done.output.splitlines() == ["  line 98", "  line 99", f"{record} \\x1b[2Kok\\u202e"]
    assert CliRunner().invoke(main, ["logs", "--data-dir", str(data), "-n", "0"]).output == ""


def test_a_long_log_is_read_from_its_end(tmp_path: Path) -> None:
    data = _log(tmp_path, [f"{i:06d} " + "x" * 200 for i in range(5000)])  # ~1 MB: 16 blocks from the end
    lines, end = last_lines(data / "admin.out", 2)
    assert [line.strip()[:6] for line in lines] == ["004998", "004999"] and end == (data / "admin.out").stat().st_size


def test_a_data_dir_without_a_log_is_named(tmp_path: Path) -> None:
    done = CliRunner().invoke(main, ["logs", "--data-dir", str(tmp_path / "nothing")])
    assert done.exit_code == 5 and "no data directory" in done.output and "nothing" in done.output  # as `events`


def test_follow_prints_lines_written_after_it_started(tmp_path: Path, monkeypatch) -> None:
    data = _log(tmp_path, ["before"])
    real_sleep, waits = time.sleep, []

    def wait(seconds: float) -> None:  # follow found no new line: the writer writes now (once), mid-line first
        waits.append(seconds)
        if len(waits) == 1:
            with open(data / "admin.out", "a") as log:
                log.write("after one\nafter ")
        elif len(waits) == 2:
            with open(data / "admin.out", "a") as log:
                log.write("two\n")
        real_sleep(0.01)

    monkeypatch.setattr(logs_module.time, "sleep", wait)
    done = CliRunner().invoke(main, ["logs", "--data-dir", str(data), "-n", "1", "--follow", "--idle", "0.5"])
    assert done.exit_code == 0 and done.output.splitlines() == ["  before", "  after one", "  after two"], done.output
    assert len(waits) >= 3  # it went on looking until --idle passed without a line


def test_a_symlink_or_a_fifo_planted_as_the_log_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not a log: someone else's file\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "admin.out").symlink_to(secret)
    done = CliRunner().invoke(main, ["logs", "--data-dir", str(data)])
    assert done.exit_code == 1 and "a symlink: refused" in done.output and "someone else" not in done.output
    (data / "admin.out").unlink()
    os.mkfifo(data / "admin.out")  # would block a plain open until a writer came
    done = CliRunner().invoke(main, ["logs", "--data-dir", str(data)])
    assert done.exit_code == 1 and "not a regular file of this user: refused" in done.output
