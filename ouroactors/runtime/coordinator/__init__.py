"""The coordinator's functional core and durable store (identity, publication, recovery, waits).

Pure modules — :mod:`.workflow` (states and the transition table), :mod:`.publication` (commit
before publish), :mod:`.resume` (checking resume events), :mod:`.recovery` (adopt / replace / park),
:mod:`.timers` (the schedule) — and the store (:mod:`.store`, :mod:`.record`) on the node's LMDB
environment. The coordinator actor is a thin shell on top of these.
"""
