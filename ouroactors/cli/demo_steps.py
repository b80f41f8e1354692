"""The steps of ``ouroactors demo`` (2 to 6), over a running agent tree; see :mod:`.demo` for the story."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.table import Table

from ..authorities.asking import ask_authority
from ..authorities.ledger.messages import GetEntry
from ..core import procs
from ..core.errors import OuroactorsError
from ..core.generation_text import format_generation
from ..runtime.execution.messages import RuntimeStatusRequest
from ..supervision.events import EventReader
from ..system.handle import ActorSystem
from . import demo_agent as setup
from .demo import Narrator, cli, show_cli, wait_for
from .session_text import event_summary

TERMINAL = ("completed", "failed", "cancelled")
STEER = "when you are done, say so in one line"  # sent while the slow command runs, just before the kill


class Demo:
    def __init__(self, n: Narrator, system: ActorSystem, sessions: Any, workspace: Path) -> None:
        self.n, self.system, self.sessions, self.workspace = n, system, sessions, workspace
        self.data_dir = Path(system.data_dir)
        self.sid = f"demo-{system.context.node_epoch}"
        self.cursor = 0
        self.kill = True
        self.recovered = False  # a replacement runtime re-ran the interrupted turn
        self.final = ""  # the session's state once its turn settled

    # -- helpers ----------------------------------------------------------------------------------------

    def follow(self, stop: Any) -> Any:
        """Print the session's committed events after the last one shown, until ``stop(event)`` holds."""
        for event in self.sessions.events(self.sid, after=self.cursor, follow=True, idle_timeout=20):
            self.cursor = event.cursor
            self.n.said(f"  {event.cursor:>3} {event.kind:<16} {event_summary(event.kind, event.data)}")
            if stop(event):
                return event
        view = self.sessions.show(self.sid)
        raise OuroactorsError(f"session {self.sid}: no more events (state {view.state}, reason {view.reason})")

    def state(self, *states: str) -> Any:
        return wait_for(f"session {self.sid} {'/'.join(states)}",
                        lambda: (v := self.sessions.show(self.sid)).state in states and v)

    # -- 2. the workspace ---------------------------------------------------------------------------------

    def prepare(self, kill: bool) -> None:
        n = self.n
        self.kill = kill
        n.step("2. a workspace beside the data dir")
        ws = setup.prepare_workspace(self.workspace)
        self.workspace = ws.path
        n.said(f"workspace {ws.path} with a fresh NOTES.md" + (" committed to git" if ws.git else
               " (git is not installed here: a plain directory, not a repository)"))
        n.why("the workspace authority leases only allowed roots, and the sandbox refuses a workspace inside the "
              "data dir (where the ledger, journal and operator credentials live)")
        self.boundary = setup.choose_sandbox()
        n.said(f"sandbox: {self.boundary.mode} — {self.boundary.why}")
        n.console.print("  see it yourself: ouroactors sandbox check"  # it takes no --data-dir
                        , style="cyan", markup=False, highlight=False)
        self.config: dict[str, Any] = {"workspace": str(ws.path), "sandbox": {"mode": self.boundary.mode}}
        if kill:
            script = setup.kill_script(self.data_dir)
            self.config["model"] = {"kind": "scripted", "script": str(script)}
            n.said(f"model: scripted — the embedded default plus one slow shell call "
                   f"({setup.SLOW_COMMAND!r}), written to {script}")
        else:
            n.said("model: scripted — the embedded default script (no network, no API key)")

    # -- 3. a session through the coordinator ---------------------------------------------------------------

    def session(self) -> None:
        n = self.n
        n.step("3. a session through the coordinator: read, edit, shell")
        closed: set[str] = set()
        for old in self.sessions.list():  # an interrupted earlier run's session would hold the workspace lease
            if old.session_id.startswith("demo-") and old.session_id != self.sid:
                self.sessions.cancel(old.session_id)
                closed.add(old.session_id)
                n.said(f"closed {old.session_id}, left {old.state} by an earlier demo run (it held the workspace)")
        if closed:  # the workspace releases a cancelled session's reservation from its durable record, shortly
            wait_for("the earlier run's workspace lease released", lambda: None if any(
                lease.session_id in closed for lease in ask_authority(self.system, "agent/workspace", "leases")
                if lease.status in ("active", "reserved")) else "released")
        view = self.sessions.new(self.sid, self.config)
        n.said(f"session {view.session_id} created ({view.state}, version {view.state_version}) by "
               f"{view.principal}; sending it one message, marked last (the session completes when its turn "
               "settles); the committed events:")
        self.sessions.send(self.sid, "please tick off 'try the demo' in NOTES.md", last=True)
        self.follow(lambda e: e.kind in ("approval_needed", "turn_settled"))
        n.why("an event is published only after its checkpoint committed to LMDB: a subscriber that reconnects "
              "with --after resumes with no gap and no duplicate, whatever crashes in between")
        n.see("session", "events", self.sid)

    # -- 4. an approval ---------------------------------------------------------------------------------

    def approval(self) -> None:
        n = self.n
        n.step("4. an approval, answered through the operator path")
        pending = self.sessions.approvals(self.sid)
        if not pending:
            n.skipped("the approval", "the session asked for none (did the grants rules change?)")
            return
        approval = pending[0]
        table = Table("approval", "tool", "arguments", "state version", "answerers")
        table.add_row(*(str(cell) for cell in (approval.approval_id, approval.tool, approval.arguments,
                                                 approval.state_version, ", ".join(approval.answerers))))
        n.console.print(table)
        n.said("no rule covers editing NOTES.md (the demo allows Read, grep and the slow command only), so grants "
               "asked; the call waits, nothing was written")
        answered = self.sessions.approve(self.sid, approval.approval_id, "demo: the edit is what I asked for")
        n.said(f"approved by operator:{answered.answered_by} — the credentials in {self.data_dir}/operator.token, "
               "verified by the grants authority against operators.json (a name a caller types proves nothing)")
        n.why("the answer is bound to this call's digest and the state version the operator saw: a stale or "
              "replayed answer is refused and recorded")
        n.see("approvals", "list", "--session", self.sid)
        n.said("the call runs now:")
        if self.kill:
            self.follow(lambda e: e.kind == "tool_call" and e.data.get("call_id") == setup.SLOW_CALL)
        else:
            self.follow(lambda e: e.kind == "turn_settled")

    # -- 5. SIGKILL mid-effect ------------------------------------------------------------------------------

    def runtimes_serving(self) -> list[str]:
        """The paths of the running runtimes that say they serve the demo's session."""
        found = []
        for child in self.system.which_children("agent/execution"):
            if child.status == "running":
                path = f"agent/execution/{child.id}"
                status = self.system.ask(path, RuntimeStatusRequest(), timeout=10.0)
                if getattr(status, "session_id", None) == self.sid:
                    found.append(path)
        return found

    def kill_and_recover(self) -> None:
        n = self.n
        n.step("5. SIGKILL the runtime in the middle of an effect")
        effect_id = f"{self.sid}/t1/{setup.SLOW_CALL}"
        ledger = "agent/ledger"
        wait_for("the slow effect recorded as started",
                 lambda: ask_authority(self.system, ledger, GetEntry(effect_id)).status.value == "started")
        serving = self.runtimes_serving()  # a spare the directory keeps (agent.toml) serves no session: not this one
        if len(serving) != 1:
            n.skipped("the SIGKILL", f"expected one runtime serving {self.sid} under agent/execution, found "
                      f"{len(serving)}")
            return
        path = serving[0]
        steered = self.sessions.steer(self.sid, STEER)
        n.said(f"steered the running turn: {STEER!r} — answered '{steered.detail}' only once the runtime's journal "
               "holds it (`steer_received`); the turn would deliver it before its next model call")
        before = self.sessions.show(self.sid).generation
        mark = self.system.mark()
        killed_at = time.time()
        pid = self.system.kill(path)
        n.said(f"{effect_id} was recorded 'started' in the ledger before it ran; killed {path} (pid {pid}) "
               "while its shell command sleeps")
        entry = wait_for("the effect ambiguous", lambda: (e := ask_authority(self.system, ledger,
                                                                              GetEntry(effect_id))).status.value
                         == "ambiguous" and e)
        parked = self.state("parked", *TERMINAL)
        n.said(f"ledger: {effect_id} is {entry.status.value} ({entry.reason})")
        n.said(f"coordinator: session {parked.state} — {parked.reason}")
        self.supervision(mark)
        n.why("the command may or may not have run: the ledger says 'ambiguous', never 'failed', and recovery "
              "refuses to guess — no reconciler knows how to check a shell command, so it parks with the reason "
              "instead of running it twice or dropping it")
        n.see("ledger", "list", "--session", self.sid)
        n.see("session", "show", self.sid)
        self.settle(effect_id, killed_at, pid)
        resumed = self.sessions.resume(self.sid)
        n.said(f"resumed by the operator: {resumed.detail} (as `{n.command('session', 'resume', self.sid)}`)")
        self.recovered = True
        view = wait_for("a replacement runtime", lambda: (v := self.sessions.show(self.sid)).runtime_id and v)
        n.said(f"a replacement runtime {view.runtime_id[:12]}… (generation {format_generation(view.generation)}, was "
               f"{format_generation(before)}) "
               f"continues after cursor {view.committed_cursor}: it re-runs the interrupted turn from its start, "
               "taking the model's answers the journal recorded instead of asking the model again; an effect the "
               "ledger already holds is reported to the model, never run again; what the turn already published is "
               "not published again (`turn_resumed` below says how much it held back)")

    def reapprove(self) -> None:
        """The replacement re-runs the interrupted turn from its start, so grants is asked about the edit again
        (before the ledger, which will not run it twice): the operator answers again, the same way."""
        n = self.n
        for approval in self.sessions.approvals(self.sid):
            answered = self.sessions.approve(self.sid, approval.approval_id, "demo: same edit, asked again")
            n.said(f"  the re-run turn asked again for {approval.tool} ({approval.approval_id}): approved by "
                   f"operator:{answered.answered_by}; the ledger already holds this effect, so it does not run twice")

    def settle(self, effect_id: str, killed_at: float, runtime_pid: int) -> None:
        n = self.n
        # Before looking, the operator makes sure nothing of the killed runtime's still runs, else its command could
        # write after the look: the execution supervisor ends what carries the runtime's lineage mark (bwrap, or in
        # the `none` mode the command itself, in a session of its own). At most until the command would have ended.
        deadline = killed_at + setup.SLOW_SECONDS + 0.5
        mark = self.system.lineage_mark
        while time.time() < deadline and (mark is None or procs.marked(mark, actor=runtime_pid)):
            time.sleep(0.05)  # polling for the kernel's word, bounded by the command's own length
        log = self.workspace / "demo.log"
        happened = log.is_file() and "done" in log.read_text()
        status = "ok" if happened else "failed"
        finding = ("demo.log says done: the command ran to the end after its runtime died" if happened else
                   "no 'done' in demo.log: the command died with its runtime")
        n.said(f"the operator looks at the workspace: {finding} → settle {status}")
        words = ("ledger", "settle", effect_id, status, "--reason", finding)
        done = cli(*words, data_dir=self.data_dir)
        n.said(f"$ {n.command(*words)}")
        show_cli(n, done)
        if done.returncode != 0:
            raise OuroactorsError(f"ledger settle exited {done.returncode}")

    def supervision(self, mark: int) -> None:
        watched = ("agent/execution", "agent/coordinator", "agent/sessions")
        for event in self.system.events.all()[mark:]:
            if event.path.startswith(watched):
                reason = f" reason={event.reason}" if getattr(event, "reason", None) else ""
                self.n.said(f"  event log: {event.kind:<12} {event.path}{reason}")
        self.n.see("events", live=False)

    # -- the end of the turn, 6. the journal, the end of the session -------------------------------------------

    def finish(self) -> None:
        n = self.n
        if self.kill:
            while self.follow(lambda e: e.kind in ("turn_settled", "approval_needed")).kind == "approval_needed":
                self.reapprove()
        view = self.state("suspended", "parked", *TERMINAL)
        self.final = view.state
        if self.recovered:
            reused = [e for e in EventReader(str(self.data_dir / "events.jsonl")).poll()
                      if e.kind == "model_call_reused" and e.fields.get("session") == self.sid]
            n.said(f"the turn's re-runs (after its approval wait and after the kill) took {len(reused)} model "
                   "answer(s) from the journal (`model_call_reused` in the event log): the model was asked only for "
                   "what it had not answered yet")
            late = [e for e in EventReader(str(self.data_dir / "events.jsonl")).poll()
                    if e.kind == "steer_redelivered" and e.fields.get("session") == self.sid]
            for event in late:
                n.said(f"the steer the killed runtime had acknowledged but not delivered was delivered by the "
                       f"replacement before model call {event.fields.get('at_call')} (`steered` above, "
                       "`steer_redelivered` in the event log): acknowledged means journaled, so it was not lost")
        n.step("the session is finished")
        n.said(f"session {self.sid}: {view.state} after {view.committed_cursor} committed events; NOTES.md now:")
        for line in (self.workspace / "NOTES.md").read_text().splitlines():
            n.said(f"  │ {line}")
        n.see("session", "show", self.sid)

    def journal(self) -> None:
        n = self.n
        n.step("6. the journal: verify the hash chain, replay the session")
        for words in (("journal", "verify", self.sid), ("journal", "replay", self.sid)):
            done = cli(*words, data_dir=self.data_dir)
            n.said(f"$ {n.command(*words)}   (exit {done.returncode})")
            show_cli(n, done)
            if words[1] == "replay" and done.returncode == 1 and self.recovered:
                n.said("  ↳ a finding, shown as it is: replay diverges in the turn the replacement runtime re-ran "
                       "after recovery; the same session without the kill replays clean (ouroactors demo --no-kill)")
            elif done.returncode not in (0, 3):
                raise OuroactorsError(f"{n.command(*words)} exited {done.returncode}")
        n.why("every record is chained to the one before and the ledger keeps the journal hashes it saw: a "
              "changed or dropped record is named, and a tool call the ledger recorded but the journal lost "
              "without a gap record is a silent gap; replay re-runs the loop on the recording and compares digests")

    def close(self, keep: bool) -> None:
        if self.final in TERMINAL or keep:
            return
        self.sessions.cancel(self.sid)  # terminal: the next boot's recovery sweep has nothing to resume
        self.n.said(f"session {self.sid} was left {self.final} although its message was marked last: cancelled, "
                    "so the next boot's recovery sweep has nothing to resume")


__all__ = ["Demo"]
