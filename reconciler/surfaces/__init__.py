"""Thin entry points: the CLI, the MCP server, the TUI and the demo, each built from the
use-case declarations of ``intent/usecases.py``.

May: parse arguments, call ``intent`` (and ``model``, ``errors``, ``exitcodes`` for values),
print (CLI only; the MCP server never writes to stdout). May not: import ``runtime``, ``core``
or ``adapters`` (the ``surfaces`` contract in pyproject.toml; the verbs that start
long-running things — ``cli/_reconcile.py``, ``cli/_ops_service.py``, ``demo.py`` — are its
only exceptions), talk to the cloud directly, change
desired.yaml except through ``intent``, or hold logic another surface would have to repeat.
"""
