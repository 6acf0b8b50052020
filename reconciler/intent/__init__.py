"""Intent: the one way MCP tools, CLI verbs and the TUI change or read desired.yaml.

    engine       IntentEditor.apply(Edit): lock, op-id, validate the whole result, CAS write, audit
    edits        the edits themselves, one frozen argument class each (``Hold``, ``Race``,
                 ``SetWorkload``, ...: edits, edits_race, edits_workload, edits_control),
                 applied to the round-trip tree (pure: no I/O)
    window       the lines an edit works on: the file without the entries it does not name
    roundtrip    ruamel round-trip load/render that keeps the user's text (pure: no I/O)
    operations   operation ids: an identical retry gets the first result back
    views        read-only views: the intent joined with the controller's status snapshot
    tmux         closing a slot's tmux window, the one direct action of the intent surfaces

May: read desired.yaml and the controller's snapshot, write desired.yaml (engine only), append to
the audit log. May not: act on the cloud or SSH (only the controller acts), print. Imported only
by the surfaces (CLI, MCP, TUI).
"""
