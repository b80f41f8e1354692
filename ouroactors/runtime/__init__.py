"""The agent runtime: what runs an agent's turns and tools (see ``DESIGN.md``, Execution).

``sandbox`` runs tool commands inside bubblewrap (or, only when asked explicitly, unsandboxed) and reports the
boundary that actually applied to each command.
"""
