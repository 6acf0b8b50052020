"""The controller and everything with a lifetime: loading and watching desired.yaml, the
reconcile loop, the executor with per-slot backoff, setup runs, the controller lock.
(Edits of the intent live in ``reconciler.intent``.)

May: call ``core`` to decide and ``adapters`` to act; own asyncio tasks and the clock.
May not: print (surfaces do), or parse cloud output (adapters do).
"""
