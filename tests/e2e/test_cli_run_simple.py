"""``ouroactors run`` on the in-process base carries messages as multiproc does (pickled, each receiver a copy):
a tree whose worker sends what cannot cross a process fails here too, instead of running here and not there."""

from __future__ import annotations

from .cli_helpers import cli, write_tree

WORKER = '''
import threading
from ouroactors import Worker


class SendsALock(Worker):
    def on_start(self):
        self.send(self.myAddress, {"lock": threading.Lock()})  # a lock cannot be pickled: it cannot cross

    def on_message(self, message, sender):
        return None
'''

TREE = """
[system]
base = "simple"

[tree]
id = "app"
intensity = 0

[[tree.children]]
id = "w"
actor = "unsendable:SendsALock"
"""


def test_run_on_the_simple_base_refuses_a_message_that_could_not_cross_a_process(tmp_path):
    (tmp_path / "unsendable.py").write_text(WORKER)
    tree = write_tree(tmp_path / "app.toml", TREE)
    result = cli("run", str(tree), cwd=tmp_path, timeout=30)  # before: served for ever
    err = " ".join(result.stderr.split())
    assert result.returncode == 3, result.stdout + result.stderr
    assert "failed to start" in err and "cannot pickle '_thread.lock' object" in err
    log = tmp_path / ".ouroactors" / "actors.log"  # the in-process base's log, where the hint points
    assert f"the actor's full traceback is in {log.relative_to(tmp_path)}" in err or str(log) in err, err
    assert "self.send(self.myAddress" in log.read_text()
