"""The workspace authority's pure parts: canonical roots, leases and reservations, git worktrees.

* :mod:`.paths` — canonicalise a requested root component by component (symlinks are followed
  *before* ``..`` is applied, loops are detected, the result must be a directory under the allowed
  roots) and the ``/``-boundary overlap rule.
* :mod:`.leases` — the lease table as a pure state machine: ``exclusive`` / ``shared_read`` leases,
  reservations for owners that died while their session was not terminal, one-time release
  capabilities (only their SHA-256 is kept), tombstones, and fencing tokens that only grow.
  Invariant 5: no two live leases overlap unless both are ``shared_read``; a reservation is only
  reclaimed by its own session's recovering owner.
* :mod:`.worktrees` — one git worktree per session for parallel work; cleanup never deletes a dirty
  worktree.

**Node-local.** Everything here describes one node's filesystem and one node's actors: a lease is an
admission primitive between actors on this node, not a distributed lock. Two nodes sharing a network
filesystem do not see each other's leases; the fencing token protects writers on this node only.
"""
