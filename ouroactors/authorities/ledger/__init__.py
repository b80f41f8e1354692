"""The write-ahead effect ledger: no durable start, no effect; crashes leave entries ambiguous."""
