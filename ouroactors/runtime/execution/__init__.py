"""The execution authority: one live runtime per session (see ``DESIGN.md``, Execution).

Modules (one concept each):

* ``model`` — the types every model provider yields and every consumer reads (the contract between providers,
  the turn loop, the journal and replay);
* ``providers/`` — ``scripted`` (recorded turns from a file, deterministic, the embedded default) and ``openai``
  (an OpenAI-compatible Chat Completions streaming client on httpx + trio);
* ``tools/`` — read, write, edit, list, shell (in the sandbox), http; each declares its effect class, fingerprint
  fields and reconciler;
* ``journal`` — the per-session hash-chained, append-only evidence; ``replay`` re-derives it through the loop;
* ``loop`` — the turn loop (pure decisions) and ``runtime`` — the thin actor shell around it.
"""
