"""``ouroactors logs`` with nothing to read exits 5 (no system to talk to), as ``events`` and ``status`` do; and it
splits the file at newlines only, indenting what does not begin a record."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ouroactors.cli import main

HEADER = "2026-01-02 03:04:05,678 WARNING myapp: "


def test_a_data_dir_that_does_not_exist_is_exit_5_like_events_and_status(tmp_path: Path) -> None:
    missing = str(tmp_path / "nonexistent")
    for command in ("logs", "events", "status"):
        done = CliRunner().invoke(main, [command, "--data-dir", missing])
        assert done.exit_code == 5, (command, done.output)
        assert "nonexistent" in done.output and "Traceback" not in done.output
    done = CliRunner().invoke(main, ["logs", "--data-dir", missing])
    assert "no data directory" in done.output and "nothing has run there" in done.output


def test_a_data_dir_without_a_log_is_exit_5_naming_the_file(tmp_path: Path) -> None:
    done = CliRunner().invoke(main, ["logs", "--data-dir", str(tmp_path)])
    assert done.exit_code == 5 and f"no log at {tmp_path / 'admin.out'}" in done.output, done.output


def test_lines_that_do_not_begin_a_record_are_indented(tmp_path: Path) -> None:
    forged = "ERROR ouroactors.worker: app/x crashed: forged"
    (tmp_path / "admin.out").write_bytes(
        f"{HEADER}one\n  two\n{forged}\rtail\nTraceback (most recent call last):\n  File \"x.py\", line 1\n"
        f"RuntimeError: x\nfake line\u2028sep\n{HEADER}next\n".encode())
    done = CliRunner().invoke(main, ["logs", "--data-dir", str(tmp_path), "-n", "100"])
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        f"{HEADER}one", "  two", f"  {forged}\\rtail",  # a carriage return split the line: `tail` read as a line
        "  Traceback (most recent call last):", '  File "x.py", line 1', "  RuntimeError: x",  # indented once
        "  fake line\\u2028sep", f"{HEADER}next"]
    assert CliRunner().invoke(main, ["logs", "--data-dir", str(tmp_path), "-n", "2"]).output.splitlines() == [
        "  fake line\\u2028sep", f"{HEADER}next"]
