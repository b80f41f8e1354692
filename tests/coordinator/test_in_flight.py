"""The directory's table of commands in flight (:mod:`ouroactors.runtime.coordinator.in_flight`), pure."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ouroactors.runtime.coordinator.in_flight import (
    FORGET_AFTER_S,
    LOOK_AFTER_S,
    LOOK_MAX_S,
    WAIT_EVERY_S,
    WAIT_LOOKS,
    Coordinator,
    Forwarded,
    InFlight,
    Next,
    decide,
)

OLD, NEW = "addr-old", "addr-new"


def entry(**changes: object) -> Forwarded:
    base = Forwarded("s1", "caller", "request", OLD, 5, sent=0.0, look_at=LOOK_AFTER_S)
    return Forwarded(**{**base.__dict__, **changes})  # type: ignore[arg-type]


# -- the decision table ------------------------------------------------------------------------------------------

def test_the_coordinator_it_went_to_still_runs_so_it_will_take_it():
    assert decide(entry(), Coordinator(True, OLD, 5), now=1.0) is Next.KEEP


def test_another_incarnation_runs_so_the_command_goes_there():
    assert decide(entry(), Coordinator(True, NEW, 6), now=1.0) is Next.FORWARD


def test_a_successor_on_the_same_port_is_told_apart_by_its_generation():
    """An address is a TCP port: a dead coordinator's may come back as its successor's."""
    assert decide(entry(), Coordinator(True, OLD, 6), now=1.0) is Next.FORWARD


def test_no_coordinator_running_waits_then_gives_up():
    assert decide(entry(), Coordinator(False), now=1.0) is Next.WAIT
    assert decide(entry(waits=WAIT_LOOKS - 2), Coordinator(False), now=1.0) is Next.WAIT
    assert decide(entry(waits=WAIT_LOOKS - 1), Coordinator(False), now=1.0) is Next.GIVE_UP


def test_a_dead_letter_whose_address_its_supervisor_still_names_waits():
    """The supervisor has not handled the exit yet: the address is gone whatever it says."""
    assert decide(entry(dead=True), Coordinator(True, OLD, 5), now=1.0) is Next.WAIT
    assert decide(entry(dead=True), Coordinator(True, NEW, 6), now=1.0) is Next.FORWARD


def test_an_untracked_dead_letter_compares_addresses():
    assert decide(entry(generation=None, dead=True), Coordinator(True, OLD, 9), now=1.0) is Next.WAIT
    assert decide(entry(generation=None, dead=True), Coordinator(True, NEW, 9), now=1.0) is Next.FORWARD


def test_a_command_a_living_coordinator_never_takes_is_forgotten_in_the_end():
    assert decide(entry(), Coordinator(True, OLD, 5), now=FORGET_AFTER_S - 1) is Next.KEEP
    assert decide(entry(), Coordinator(True, OLD, 5), now=FORGET_AFTER_S) is Next.FORGET


def test_a_command_taken_by_a_coordinator_that_is_gone_has_an_unknown_outcome():
    """It may have done anything before it ended: never forwarded again, its caller is told."""
    taken = entry(taken=True)
    assert decide(taken, Coordinator(True, OLD, 5), now=1.0) is Next.KEEP  # it still runs: it will answer
    assert decide(taken, Coordinator(True, NEW, 6), now=1.0) is Next.UNKNOWN
    assert decide(taken, Coordinator(True, OLD, 6), now=1.0) is Next.UNKNOWN  # its port, another incarnation
    assert decide(taken, Coordinator(False), now=1.0) is Next.UNKNOWN
    assert decide(taken, Coordinator(True, OLD, 5), now=FORGET_AFTER_S) is Next.FORGET


# -- the table ---------------------------------------------------------------------------------------------------

def test_taken_forgets_only_from_the_coordinator_it_went_to_for_its_session():
    table = InFlight()
    ticket = table.add("s1", "caller", "request", OLD, 5, now=0.0)
    assert ticket > 0
    for answered in (False, True):
        assert table.taken(ticket, "s2", OLD, answered) == f"ticket {ticket} is a command of another session"
        assert table.taken(ticket, "s1", NEW, answered) == f"ticket {ticket} went to another coordinator than the " \
                                                           "sender"
    assert table.entries[ticket] == entry(sent=0.0, look_at=LOOK_AFTER_S)  # a forged Taken changes nothing
    assert table.taken(ticket, "s1", OLD, False) is None and table.entries[ticket].taken  # began: still tracked
    assert table.taken(ticket, "s1", OLD, True) is None and not table.entries  # answered: forgotten
    assert table.taken(ticket, "s1", OLD, True) is None  # again, or a ticket never ours: nothing to forget


def test_looks_are_due_after_the_delay_and_back_off_while_the_coordinator_lives():
    table = InFlight()
    ticket = table.add("s1", "caller", "request", OLD, 5, now=0.0)
    assert table.due(LOOK_AFTER_S - 0.01) == [] and table.next_look() == LOOK_AFTER_S
    pauses, now = [], LOOK_AFTER_S
    for _ in range(8):
        assert [t for t, _ in table.due(now)] == [ticket]
        table.looked(ticket, Next.KEEP, now)
        later = table.entries[ticket].look_at
        pauses.append(later - now)
        now = later
    assert pauses == sorted(pauses) and pauses[0] > LOOK_AFTER_S and pauses[-1] == LOOK_MAX_S


def test_a_wait_counts_and_looks_soon_and_the_rest_drop_the_entry():
    table = InFlight()
    ticket = table.add("s1", "caller", "request", OLD, 5, now=0.0)
    table.looked(ticket, Next.WAIT, 1.0)
    assert table.entries[ticket].waits == 1 and table.entries[ticket].look_at == 1.0 + WAIT_EVERY_S
    for decision in (Next.FORWARD, Next.GIVE_UP, Next.UNKNOWN, Next.FORGET):
        ticket = table.add("s1", "caller", "request", OLD, 5, now=0.0)
        assert table.looked(ticket, decision, 1.0) is not None and ticket not in table.entries


def test_a_dead_letter_is_tracked_again_as_dead_under_a_new_ticket():
    table = InFlight()
    ticket = table.add("s1", "caller", "request", OLD, 5, now=0.0)
    table.came_back(ticket, "s1", "caller", "request", OLD, now=0.01)
    assert ticket not in table.entries and len(table.entries) == 1
    (again,) = table.entries.values()
    assert again.dead and again.generation == 5 and again.look_at == 0.01 + WAIT_EVERY_S
    table.came_back(0, "s2", "caller2", "request2", NEW, now=0.02)  # one the directory did not track
    assert [(e.session_id, e.dead, e.generation) for e in table.entries.values()][-1] == ("s2", True, None)


def test_the_table_is_bounded_and_forgets_the_oldest():
    table = InFlight(limit=3)
    tickets = [table.add("s1", "caller", i, OLD, 5, now=float(i)) for i in range(5)]
    assert list(table.entries) == tickets[2:]


@given(st.lists(st.tuples(st.sampled_from(["add", "taken", "look", "back"]), st.integers(0, 6),
                          st.sampled_from(list(Next))), max_size=60))
def test_tickets_are_unique_and_never_zero_whatever_happens(steps):
    table, seen, now = InFlight(limit=5), set(), 0.0
    for op, n, decision in steps:
        now += 0.1
        if op == "add":
            ticket = table.add("s1", "caller", "r", OLD, 5, now)
            assert ticket not in seen and ticket != 0
            seen.add(ticket)
        elif op == "taken":
            table.taken(n, "s1", OLD, decision is Next.KEEP)
        elif op == "look":
            table.looked(n, decision, now)
        else:
            table.came_back(n, "s1", "caller", "r", OLD, now)
        assert len(table.entries) <= 5 and 0 not in table.entries
        assert all(e.look_at >= e.sent for e in table.entries.values())


def test_a_returned_command_is_a_dead_letter_looked_at_at_once_and_only_its_coordinators_word_counts():
    table = InFlight()
    ticket = table.add("s1", "caller", "request", "coord-a", 3, 0.0)
    assert table.returned(ticket, "s2", "coord-a", 1.0) == f"ticket {ticket} is a command of another session"
    assert table.returned(ticket, "s1", "coord-b", 1.0) == (f"ticket {ticket} went to another coordinator than "
                                                            "the sender")
    assert table.returned(ticket, "s1", "coord-a", 1.0) is None
    entry = table.entries[ticket]
    assert entry.dead and entry.returned and entry.look_at == 1.0 and table.due(1.0) == [(ticket, entry)]
    assert decide(entry, Coordinator(True, "coord-a", 3), 1.0) is Next.WAIT  # its supervisor has not seen the exit
    assert decide(entry, Coordinator(True, "coord-c", 4), 1.0) is Next.FORWARD
    taken = table.add("s1", "caller", "request", "coord-a", 3, 0.0)
    table.taken(taken, "s1", "coord-a", False)
    assert "was taken" in str(table.returned(taken, "s1", "coord-a", 1.0))  # it began: its outcome is unknown
    assert table.returned(999, "s1", "coord-a", 1.0) is None  # not tracked: nothing to do
