"""tpu-reconciler: hold Cloud TPU capacity declaratively.

Layers, innermost first (an inner layer never imports an outer one):

- ``model``    values: the desired file's schema, observed cloud state, names. No I/O.
- ``core``     pure functions: ``plan(desired, observed, memory, now)`` and rendering. No I/O,
               no clock, no await.
- ``adapters`` side effects at the edges: gcloud / REST cloud, SSH, tmux, ntfy, state files.
- ``emulator`` a local Cloud TPU API for demos and tests (a server, not used by the controller).
- ``runtime``  the controller loop, executor, file watching, intent edits.
- ``surfaces`` thin entry points: CLI and MCP server.
"""

__version__ = "0.1.0"
