"""Options for the inner pytest sessions the plugin tests run in a subprocess.

Third-party plugins this project neither ships nor uses (an LLM-observability client's, anyio's, llmock's), when the
machine has them installed, load into every inner session: pytest rewrites the asserts of every module they import
(~350 modules, ~3 s a session where bytecode is not written, ``PYTHONDONTWRITEBYTECODE``). Blocking them by name
changes nothing the inner sessions test (ouroactors' plugin, its marker, its fixtures) and is a no-op where they are
not installed.
"""

from __future__ import annotations

UNRELATED_PLUGINS: tuple[str, ...] = ("-p", "no:langsmith_plugin", "-p", "no:anyio", "-p", "no:llmock")
