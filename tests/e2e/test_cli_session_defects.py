"""Defects a user's review found in the session and journal commands, each reproduced on the served agent tree.

* A damaged ``data.mdb`` (a copy of a backup with one page's header overwritten): ``journal verify|replay|show|list``
  and ``session export`` name the damage and exit 1 — no ``lmdb.CorruptedError`` traceback, no ``AssertionError``.
* A ``pins.tool_set`` this code does not provide is refused as a wrong ``pins.workflow`` is: exit 2, one line.
* ``session events --after N`` beyond the committed cursor is refused (exit 2, naming it), with and without
  ``--follow``, and through the directory's read (the Python API's ``follow_direct=False``): read from there, the
  events committed next — which take the cursors in between — were never shown.
* Bad input exits 2 with a clear message: an unknown approval, a workspace the workspace authority refuses (no
  internal request name).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .cli_helpers import Served, agent_tree, cli

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

SCRIPT = {"name": "one write", "turns": [
    {"events": [{"kind": "tool_call", "id": "w1", "name": "write",
                 "arguments": {"path": "out.txt", "content": "hi\n"}}]},
    {"events": [{"kind": "text", "text": "written"}]},
]}
SID = "dmg"  # the session whose journal is damaged (its head key, b"dmg\x01", sorts after its witnesses' keys)


class Node:
    """The served agent tree in ``root`` (data dir ``root/D``), with one session waiting on an approval."""

    def __init__(self, root: Path) -> None:
        self.root, self.data = root, root / "D"
        (root / "ws").mkdir()
        (root / "script.json").write_text(json.dumps(SCRIPT))
        self.served = Served(root, agent_tree(root, root / "ws"), "--data-dir", str(self.data))

    def cli(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return cli(*args, "--data-dir", str(self.data), cwd=self.root, **kwargs)  # type: ignore[arg-type]

    def committed(self, sid: str) -> int:
        shown = self.cli("session", "show", sid, "--json")
        assert shown.returncode == 0, shown.stderr
        return int(json.loads(shown.stdout)["committed_cursor"])


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    made = Node(tmp_path_factory.mktemp("defects"))
    try:
        created = made.cli("session", "new", SID, "--sandbox", "none", "--workspace", str(made.root / "ws"),
                           "--script", str(made.root / "script.json"))
        assert created.returncode == 0, created.stderr
        assert made.cli("session", "send", SID, "write it").returncode == 0
        waited = made.cli("session", "events", SID, "--follow", "--until", "approval_needed", "--idle", "60")
        assert waited.returncode == 0 and "approval_needed" in waited.stdout, waited.stdout + waited.stderr
        yield made
    finally:
        stopped, out = made.served.stop(made.data)
        assert stopped == 0, out


def no_traceback(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    return result.stderr


# -- 1. a damaged data.mdb ------------------------------------------------------------------------------------

PAGE = 4096  # LMDB's page size here (the OS page); each page begins with pgno u64, pad u16, flags u16, lower, upper
P_BRANCH, F_SUBDATA = 0x01, 0x02


def _nodes(raw: bytes, pgno: int) -> Iterator[tuple[int, int, bytes, int, int]]:
    """``(page flags, node flags, key, key offset, data size or child page)`` of each node on page ``pgno``."""
    base = pgno * PAGE
    _, _, flags, lower, _ = struct.unpack_from("<QHHHH", raw, base)
    for i in range((lower - 16) // 2):
        (at,) = struct.unpack_from("<H", raw, base + 16 + 2 * i)
        lo, hi, node_flags, ksize = struct.unpack_from("<HHHH", raw, base + at)
        child = lo | hi << 16 | node_flags << 32  # a branch node's child page; a leaf's data size is lo | hi << 16
        yield flags, node_flags, raw[base + at + 8:base + at + 8 + ksize], base + at + 8, child


def _leaves(raw: bytes, root: int) -> Iterator[tuple[int, bytes, int]]:
    """``(node flags, key, key offset)`` of every leaf node of the tree rooted at page ``root``."""
    stack = [root]
    while stack:
        for flags, node_flags, key, key_at, child in _nodes(raw, stack.pop()):
            if flags & P_BRANCH:
                stack.append(child)
            else:
                yield node_flags, key, key_at


def database_roots(raw: bytes) -> dict[bytes, int]:
    """The root page of each named database: the main database's records (name → MDB_db), from the newer meta."""
    metas = []
    for page in (0, 1):  # the meta: magic, version, address, mapsize, dbs[2] (free, main), last page, txnid
        at = page * PAGE + 16
        main_root = struct.unpack_from("<IHHQQQQQ", raw, at + 24 + 48)[7]
        txnid = struct.unpack_from("<Q", raw, at + 24 + 96 + 8)[0]
        metas.append((txnid, main_root))
    roots = {}
    for node_flags, key, key_at in _leaves(raw, max(metas)[1]):
        if node_flags & F_SUBDATA:
            roots[bytes(key)] = struct.unpack_from("<IHHQQQQQ", raw, key_at + len(key))[7]
    return roots


def damaged_copy(node: Node, name: str, damage: object) -> Path:
    """A new data dir holding the node's backup with ``damage(raw)`` done to its data.mdb."""
    backup = node.root / "backup"
    if not backup.exists():
        made = node.cli("storage", "backup", str(backup))
        assert made.returncode == 0, made.stderr
    target = node.root / name
    (target / "lmdb").mkdir(parents=True, mode=0o700)
    target.chmod(0o700)
    raw = bytearray((backup / "data.mdb").read_bytes())
    damage(raw)  # type: ignore[operator]
    (target / "lmdb" / "data.mdb").write_bytes(bytes(raw))
    (target / "lmdb" / "data.mdb").chmod(0o600)  # as a backup's files are: opened without a warning
    return target


def _wrong_page_type(raw: bytearray) -> None:
    """The journal database's root page claims no type (its flags zeroed): LMDB's "Located page was wrong type"."""
    root = database_roots(bytes(raw))[b"journal"]
    struct.pack_into("<H", raw, root * PAGE + 10, 0)


def _head_key_out_of_order(raw: bytearray) -> None:
    """The journal head's key, b"dmg\\x01", made b"0mg\\x01": listed by a cursor walking the page, never found by a
    search (keys before it on the page sort after it now)."""
    leaves = list(_leaves(bytes(raw), database_roots(bytes(raw))[b"journal_anchor"]))
    keys = [key for _, key, _ in leaves]
    head = keys.index(SID.encode() + b"\x01")
    assert head > 0, keys  # a witness's key before it, where a search for the new key ends
    raw[leaves[head][2]] = ord("0")


def test_a_damaged_data_mdb_is_named_and_exits_1_without_a_traceback(node: Node, tmp_path: Path) -> None:
    copy = damaged_copy(node, "wrong-type", _wrong_page_type)
    where = f"the LMDB environment in {copy / 'lmdb'} is damaged"
    for command in (("journal", "verify", SID), ("journal", "replay", SID), ("journal", "show", SID),
                    ("journal", "export", SID, "-o", str(tmp_path / "j")),
                    ("session", "export", SID, "-o", str(tmp_path / "s.json"))):
        result = cli(*command, "--data-dir", str(copy), cwd=tmp_path)
        said = no_traceback(result)
        assert result.returncode == 1 and where in said and "Located page was wrong type" in said, (command, said)
        assert "restore it from a backup" in said
    assert not (tmp_path / "s.json").exists() and not (tmp_path / "j").exists()  # nothing written

    listed = cli("journal", "list", "--data-dir", str(damaged_copy(node, "head-key", _head_key_out_of_order)),
                 cwd=tmp_path)
    said = no_traceback(listed)  # was: AssertionError at `assert head is not None`
    assert listed.returncode == 1 and "is damaged" in said and "'0mg'" in said, said

    whole = cli("journal", "verify", SID, "--data-dir", str(damaged_copy(node, "whole", lambda raw: None)),
                cwd=tmp_path)
    assert whole.returncode == 0 and "chain ok" in whole.stdout, whole.stderr  # the copy itself is readable


# -- 2. a tool-set pin this code does not provide ------------------------------------------------------------

def test_a_wrong_tool_set_pin_is_refused_as_a_wrong_workflow_pin_is(node: Node) -> None:
    for pin, sid in (("tool_set", "pin1"), ("workflow", "pin2")):
        config = node.root / f"{pin}.toml"
        config.write_text(f'[pins]\n{pin} = "bogus"\n')
        refused = node.cli("session", "new", sid, "--config", str(config))
        said = no_traceback(refused)
        assert refused.returncode == 2, said
        assert said.startswith(f"DirectoryError: session {sid!r}: pins.{pin}: got 'bogus'; allowed: 'default'"), said
        assert node.cli("session", "show", sid).returncode == 2  # nothing created


# -- 3. events after a cursor beyond the committed one -------------------------------------------------------

def test_events_after_a_cursor_beyond_the_committed_one_are_refused_naming_it(node: Node) -> None:
    committed = node.committed(SID)
    for follow in ((), ("--follow", "--idle", "30")):
        ahead = node.cli("session", "events", SID, "--after", str(committed + 1), *follow)
        said = no_traceback(ahead)
        assert ahead.returncode == 2 and "'--after'" in said, said
        assert f"cursor {committed + 1} is beyond its committed cursor {committed}" in said, said
    last = node.cli("session", "events", SID, "--after", str(committed), "--json")
    assert last.returncode == 0 and last.stdout == "", last.stderr  # at the committed cursor: nothing more, no error
    code = ("import sys\n"
            "from ouroactors.runtime.coordinator.errors import CursorAhead\n"
            "from ouroactors.sessions import Sessions\n"
            "from ouroactors.system.client import SystemClient\n"
            f"api = Sessions(SystemClient.attach({str(node.data)!r}), follow_direct=False)\n"
            "try:\n"
            f"    list(api.events({SID!r}, {committed + 3}))\n"
            "except CursorAhead as exc:\n"
            "    print(exc)\n"
            "else:\n"
            "    sys.exit('not refused')\n")
    through = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert through.returncode == 0, through.stderr  # the directory's read refuses it too
    assert f"cursor {committed + 3} is beyond its committed cursor {committed}" in through.stdout


# -- 4. bad input: exit 2, said plainly ------------------------------------------------------------------------

def test_an_unknown_approval_is_bad_input(node: Node) -> None:
    for command in (("show",), ("approve",), ("deny",)):
        refused = node.cli("approvals", *command, "nosuch")
        said = no_traceback(refused)
        assert refused.returncode == 2 and "no approval 'nosuch'" in said, said


def test_a_workspace_the_workspace_authority_refuses_is_named_without_its_request(node: Node) -> None:
    config = node.root / "long.toml"
    config.write_text(f'workspace = "/{"x" * 5000}"\n')
    refused = node.cli("session", "new", "ws1", "--config", str(config))
    said = no_traceback(refused)
    assert refused.returncode == 2 and "session 'ws1': workspace: " in said and "4096 bytes" in said, said
    assert "CheckRoot" not in said and "bad request" not in said, said
    empty = node.root / "empty.toml"
    empty.write_text('workspace = ""\n')
    refused = node.cli("session", "new", "ws2", "--config", str(empty))
    said = no_traceback(refused)
    assert refused.returncode == 2 and "workspace: got ''" in said and "--workspace DIR" in said, said
    assert "CheckRoot" not in said, said

