"""Fault points in a user's own actors, armed from the CLI: a point the actor's module declares
(``faults.register_point``) is known to ``faults arm``, which imports the running actors' modules from the directory
it runs in, as ``run`` does; an undeclared one is warned about as a possible typo, kept, and fires all the same."""

from __future__ import annotations

import pytest

from ouroactors.core.errors import ActorCrashed
from ouroactors.system.client import SystemClient

from .cli_helpers import Served, cli, events, wait_event, write_tree

pytestmark = pytest.mark.multiproc

STORE = '''
from ouroactors import Worker, faults

AFTER_STORE = faults.register_point("myapp.after_store", "the item is kept, its count not answered")


class Store(Worker):
    def on_start(self):
        self.items = []

    def on_message(self, message, sender):
        faults.point("myapp.before_store")  # never declared
        self.items.append(message)
        faults.point(AFTER_STORE)
        return len(self.items)
'''

TREE = '''
[tree]
id = "app"
[[tree.children]]
id = "store"
actor = "myapp.store:Store"
'''


def _myapp(tmp_path):
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "store.py").write_text(STORE)


def _served(tmp_path, tree: str) -> Served:
    """The user's project (its package ``myapp``) served from its directory with ``tree``."""
    _myapp(tmp_path)
    return Served(tmp_path, str(write_tree(tmp_path / "t.toml", tree)))


def test_a_declared_point_of_ones_own_is_known_and_an_undeclared_one_still_fires(tmp_path):
    served = _served(tmp_path, TREE)
    data = tmp_path / ".ouroactors"
    try:
        plan = tmp_path / "plan.toml"
        plan.write_text('[[rules]]\npoint = "myapp.after_store"\naction = "delay"\ndelay_s = 0.001\n\n'
                        '[[rules]]\npoint = "myapp.before_store"\naction = "raise"\n')
        armed = cli("faults", "arm", str(plan), cwd=tmp_path)
        assert armed.returncode == 0 and "armed 2 rule(s)" in armed.stdout, armed.stderr
        warned = " ".join(armed.stderr.split())
        assert "rules[0]" not in warned  # declared in the actor's module: known
        assert "rules[1]: point 'myapp.before_store' matches no registered point" in warned
        assert "kept: it fires wherever code reaches it" in warned and "faults.register_point" in warned
        mark = len(events(data))
        client = SystemClient.attach(data)  # a second terminal's program asking the store
        try:
            with pytest.raises(ActorCrashed, match=r"myapp\.before_store"):
                client.ask("app/store", "x", timeout=10)
        finally:
            client.close()
        assert wait_event(data, "exited", "app/store", mark)["reason"]["kind"] == "crash"
    finally:
        served.stop(data)


def test_faults_points_of_a_tree_file_list_its_actors_points_and_message_paths(tmp_path):
    """``faults points`` listed the framework's points only: a user looking for the name of their own point, or of
    a worker's ``message.<path>``, found neither. With the tree file it imports the tree's actors, as ``check``
    does, and lists both."""
    _myapp(tmp_path)
    write_tree(tmp_path / "t.toml", TREE)
    listed = cli("faults", "points", "t.toml", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert "myapp.after_store" in names and "message.app/store" in names and "storage.before_commit" in names
    assert "myapp.before_store" not in names  # reached, never declared: nothing to list
    bare = cli("faults", "points", cwd=tmp_path)
    assert "myapp.after_store" not in bare.stdout and "message.<actor path>" in bare.stdout
    missing = cli("faults", "points", "nope.toml", cwd=tmp_path)
    assert missing.returncode == 2 and "cannot read tree file" in missing.stderr


POOL_TREE = '''
[tree]
id = "app"
[[tree.children]]
id = "pool"
type = "supervisor"
strategy = "simple_one_for_one"
intensity = 10
[[tree.children.children]]
id = "w"
actor = "myapp.store:Store"
'''


def test_faults_arm_children_reaches_the_workers_a_pool_starts_next(tmp_path):
    served = _served(tmp_path, POOL_TREE)
    data = tmp_path / ".ouroactors"
    try:
        plan = tmp_path / "plan.toml"
        plan.write_text('[[rules]]\npoint = "myapp.before_store"\naction = "raise"\nnth = 1\n')
        armed = cli("faults", "arm", str(plan), "--at", "app/pool", "--children", cwd=tmp_path)
        assert armed.returncode == 0, armed.stderr
        assert "armed 1 rule(s) for the children 1 supervisor(s) start next" in armed.stdout, armed.stdout
        started = cli("start-child", "app/pool", cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        child = "app/pool/w#1"
        client = SystemClient.attach(data)
        try:
            mark = len(events(data))
            with pytest.raises(ActorCrashed, match=r"myapp\.before_store"):  # armed at its first start
                client.ask(child, "x", timeout=10)
            wait_event(data, "started", child, mark)
            assert client.ask(child, "x", timeout=10) == 1  # its restart runs free
        finally:
            client.close()
        disarmed = cli("faults", "disarm", "--at", "app/pool", "--children", cwd=tmp_path)
        assert disarmed.returncode == 0 and "their children's plans forgotten" in disarmed.stdout, disarmed.stderr
        refused = cli("faults", "arm", str(plan), "--at", child, "--children", cwd=tmp_path)
        assert refused.returncode != 0 and "a worker starts no children" in refused.stderr, refused.stderr
    finally:
        served.stop(data)
