"""Intent: the one way MCP tools, CLI verbs and the TUI change or read desired.yaml; the
use-case layer the surfaces are built from.

    usecases     every action declared once: canonical name, one-line summary, read / edit /
                 destructive, where it appears (CLI command, MCP tool, deprecated aliases)
    catalog      an edit use case joined to its edit class; the edit made from arguments
    store        the file and its state directory, opened the one way (``open_store``)
    engine       IntentEditor.apply(Edit): lock, op-id, validate the whole result, CAS write, audit
    edits        the edits themselves, one frozen argument class each (``Hold``, ``Race``,
                 ``SetWorkload``, ...: edits, edits_race, edits_workload, edits_control),
                 applied to the round-trip tree (pure: no I/O)
    window       the lines an edit works on: the file without the entries it does not name
    roundtrip    ruamel round-trip load/render that keeps the user's text (pure: no I/O)
    operations   operation ids: an identical retry gets the first result back
    views        read-only views: the intent joined with the controller's status snapshot
                 (and chip_views, quota_views, timeline_views, workload_views, group_info,
                 ssh_view: one query each)
    confirm      a delete confirmation: the controller's confirm.json, or a lab member's
                 request in the inbox (``refuse_unless_yours`` first)
    owners, lab_files
                 who a slot belongs to; a lab member's own file in desired.d/ (created once)
    tmux         closing a slot's tmux window, the one direct action of the intent surfaces
    log_target, workload_logs, log_stream, event_text, event_log, history_views
                 the logs, events and capacity-history queries the surfaces share
    status_view  the snapshot ``status``, ``quota`` and ``timeline`` show (the desired file
                 alone when there is none), the watch view's words, the TUI frame's reads
    doctor_init, ssh_reach, tmux_mirror, secret_store, skill_install
                 ``doctor``'s report and ``init``'s new file; what ``ssh`` looks up before it
                 execs; the tmux verbs' mirror; the state dir's secrets; the skill's files

May: read desired.yaml and the controller's snapshot, write desired.yaml (engine; a lab
member's own new file: lab_files.create_own; ``init``'s new file: doctor_init), write a
confirmation request, append to the audit log, read a workload's output over SSH
(``workload_logs``, ``log_stream``), make read-only cloud look-ups (``doctor``'s probes, the OS
Login user, IAP's VM names), write the state dir's secrets, the skill's files and the page
``history --html`` names, list and close tmux windows a person named. May not: act on the cloud
or change anything over SSH (only the controller acts), print. Imported only by the surfaces
(CLI, MCP, TUI).
"""
