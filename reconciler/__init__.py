"""tpu-reconciler: hold Cloud TPU capacity declaratively.

Layers, innermost first (an inner layer never imports an outer one):

- ``model``    values: the desired file's schema, observed cloud state, names. No I/O.
- ``core``     pure functions: ``plan(desired, observed, memory, now)`` and rendering. No I/O,
               no clock, no await.
- ``adapters`` side effects at the edges: gcloud / REST cloud, SSH, tmux, ntfy, state files.
- ``emulator`` a local Cloud TPU API and Compute Engine for demos and tests (a server, not
               used by the controller).
- ``runtime``  the controller loop, executor, file watching, setup wiring.
- ``intent``   the use-case layer: every action declared once (``intent/usecases.py``), the
               edits and views of desired.yaml, the queries the surfaces answer.
- ``surfaces`` thin entry points built from the declarations: CLI, MCP server, TUI, demo.

``[tool.importlinter]`` in pyproject.toml is the checked contract; docs/architecture.md the map.
"""

__version__ = "0.1.0"
