"""Side effects at the edges: the cloud (gcloud, REST), SSH, tmux, ntfy, files.

May: run subprocesses (argument lists only), open sockets, touch files under the state dir.
Must: validate every name before it reaches a subprocess, translate foreign exceptions into
``reconciler.errors`` at the edge, never print. May not: decide what to do (that is ``core``)
or import ``runtime`` / ``surfaces``.
"""
