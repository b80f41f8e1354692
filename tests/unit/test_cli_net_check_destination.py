"""`ouroactors sandbox net-check DESTINATION`: what a destination may be, and the exit code of one that is not.

Before: a port out of range or an empty destination was answered as a refusal of the proxy (exit 1, the same as a
destination it would refuse), and `[::1]:80` was read as host `[::1]:80` port 443 ("is not a host name")."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from ouroactors.cli import main
from ouroactors.cli.sandbox import split_destination


@pytest.mark.parametrize(("text", "expected"), [
    ("example.com", ("example.com", 443)), ("example.com:8080", ("example.com", 8080)),
    ("[::1]:80", ("::1", 80)), ("[::1]", ("::1", 443)), ("127.0.0.1:1", ("127.0.0.1", 1)),
])
def test_a_destination_is_split_into_host_and_port(text, expected):
    assert split_destination(text) == expected


@pytest.mark.parametrize("text", ["", ":80", "example.com:-1", "example.com:0", "example.com:99999",
                                  "example.com:８０", "[::1", "[::1]x", "example.com:"])
def test_a_destination_that_is_not_one_is_bad_input(text):
    with pytest.raises(click.BadParameter):
        split_destination(text)
    done = CliRunner().invoke(main, ["sandbox", "net-check", text])
    assert done.exit_code == 2, done.output


def test_an_ipv6_destination_is_judged_as_its_address():
    done = CliRunner().invoke(main, ["sandbox", "net-check", "[::1]:80"])
    assert done.exit_code == 1 and "::1" in done.output and "is not a host name" not in done.output, done.output
