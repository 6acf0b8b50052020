"""Values: the desired-state schema, observed cloud state, names and units.

May: define immutable values and validate them. May not: read files, the clock, the
environment, or import anything outside ``reconciler.model`` and ``reconciler.errors``.
"""
