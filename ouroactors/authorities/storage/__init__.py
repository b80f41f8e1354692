"""The storage authority: the node's LMDB environment and the one commit contract.

* :mod:`.env` opens the environment (one per process, never across fork), checks the schema
  version and records the storage generation consumers fence on.
* :mod:`.commit` is the commit contract every writer uses: each write answers exactly one of
  ``Committed``, ``Rejected(reason)`` or ``Unknown(reason)``.
* :mod:`.actor` is the storage authority itself (first child of the agent tree).
"""
