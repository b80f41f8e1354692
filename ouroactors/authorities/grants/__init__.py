"""The grants authority's pure core: which actions a session may take.

Evaluation narrows at each layer and never widens:

1. :mod:`.posture` — durable session state; plan mode refuses ``write`` and ``execute`` (``read``
   and ``network`` stay) before any rule is consulted.
2. :mod:`.rules` — allow / ask / deny patterns on tools, paths, commands and domains; protected
   writes (``.git``, the project's data dir) are refused first; deny > ask > allow, scopes
   node > user > workspace > session only break ties; nothing matched, a truncated or
   unparseable command, or an engine error → ask, never allow.
3. :mod:`.commands` (with its lexer :mod:`.shell`) — splits a shell command into every simple
   command it would run, unwrapping ``bash -c``, ``sudo``, ``env``, ``xargs`` … so a deny cannot
   be slipped past by composition; :mod:`.options` — a deny or ask that names options matches what the
   command's options mean (``rm -rf *`` denies ``rm -fr x``, ``rm --recursive --force x``), an allow only
   what it spells.

These modules import neither thespian nor LMDB; the grants actor records each decision in the
ledger before answering (an allow that cannot be recorded is answered as ask).
"""
