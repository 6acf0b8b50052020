"""Thin entry points: the CLI and the MCP server.

May: parse arguments, call ``runtime`` and ``core``, print (CLI only; the MCP server never
writes to stdout). May not: talk to the cloud directly or change desired.yaml except through
``intent.engine``; hold logic another surface would have to repeat.
"""
