"""Pure decisions: ``plan(desired, observed, memory, now) -> Plan`` and text rendering.

May: compute on values from ``reconciler.model``. May not: do I/O, read the clock (``now`` is
an argument), await, log, or import ``adapters`` / ``runtime`` / ``surfaces``.
"""
