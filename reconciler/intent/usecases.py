"""The use cases: every action a person or an assistant can ask for, declared once, with one
canonical name and a one-line summary. The surfaces are *built from* these declarations:

    surfaces/mcp_server   a tool per use case with an MCP name (``mcp``), its annotations from
                          ``kind`` / ``again``; each deprecated alias (``aliases``) registered
                          beside it, its description saying whose alias it is
    surfaces/cli          each use case with ``flags=True`` is a verb whose argparse flags are
                          made from its edit class's fields (``args`` says how each is
                          spelled; an action that is no edit takes its ``args``): the
                          top-level edits by ``_intent``, ``workload set|restart|stop`` and
                          ``confirm`` by their modules, which add what only they do
    surfaces/cli/_skill   the assistant skill's tables: guidance, tools, JSON commands
    surfaces/tui          the key help names the action it runs (``KEYS`` in the TUI)

A use case is an *edit* (``edit`` names the ``Edit.kind`` of its class in ``intent.edits*``:
the engine applies it; the controller acts) or a *query* (reads the file, the controller's
snapshot, the history; never a change). So a new intent verb is its edit class and one entry
here: CLI, MCP and the skill pick it up without another line.

This module is light on purpose (no edit classes, no YAML, no pydantic imported): the CLI reads
the verbs' names from it at start-up to build only the parser a run needs. ``intent.catalog``
joins an edit use case to its class.

May: declare. May not: import anything heavier than the standard library, do I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

Kind = Literal["read", "edit", "destructive"]


@dataclass(frozen=True, slots=True)
class Arg:
    """How the CLI takes one field of an edit class: a required field is a positional argument
    unless ``option`` (then a required ``--flag``); a field with a default is a ``--flag``
    unless ``positional`` (then an optional positional argument, ``[FINGERPRINT]``). An action
    that is no edit takes its ``args`` as its arguments, each an optional string."""

    field: str
    help: str | None = None
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    #: the choices are a vocabulary of the model's, by name (``intent.catalog.VOCABULARIES``:
    #: "modes", "apis", "wants", "restarts", "when_done"), so they are spelled in one place
    vocabulary: str | None = None
    option: bool = False
    positional: bool = False
    #: a ``str | tuple[str, ...]`` field also taken as one or more words by ``--<words>`` (with
    #: ``words_help``), the two flags mutually exclusive: ``--command STR`` or ``--argv A B``
    words: str | None = None
    words_help: str | None = None


@dataclass(frozen=True, slots=True)
class UseCase:
    """One action: its canonical ``name`` (the CLI's word, ``_`` for ``-``), a one-line
    ``summary`` (the CLI's help, the skill's JSON-command line), its ``kind``, where it appears
    (``cli``: the command path; ``mcp``: the tool's name; None: not there) and what it is."""

    name: str
    summary: str
    kind: Kind
    #: ``Edit.kind`` of the edit class it applies (None: a query, or an action that is no edit)
    edit: str | None = None
    cli: str | None = None
    mcp: str | None = None
    #: deprecated MCP names of the same tool, kept for one release (docs/mcp.md lists them)
    aliases: tuple[str, ...] = ()
    #: what needs the user's yes (MCP ``confirm=true``, CLI ``--yes``); "" when nothing does
    confirm: str = ""
    #: repeating it does it again (a new slot, another setup run): not idempotent
    again: bool = False
    #: fields of the edit the use case sets itself (the surfaces do not take them)
    fixed: tuple[tuple[str, object], ...] = ()
    #: the only fields the surfaces take (None: all but ``fixed``)
    only: tuple[str, ...] | None = None
    #: the CLI's flags are made from the declaration (``args``; an edit's from its class's
    #: fields); a top-level edit verb so made is registered by ``cli/_intent`` (False: a
    #: hand-made parser)
    flags: bool = False
    args: tuple[Arg, ...] = ()
    #: when an assistant should use it (the skill's tool table)
    guidance: str = ""
    #: its CLI command prints one JSON document with ``--json``
    json: bool = True

    @property
    def read_only(self) -> bool:
        return self.kind == "read"

    def arg(self, field: str) -> Arg:
        return next((a for a in self.args if a.field == field), Arg(field))


_SLOT: Final = Arg("name", metavar="SLOT")
_NAME: Final = Arg("name", metavar="NAME", help="a slot or a race group")

#: Edits: each applies one ``Edit`` through ``intent.engine``.
EDITS: Final = (
    UseCase(
        "hold",
        "want a slot held (want: held)",
        "edit",
        edit="hold",
        cli="hold",
        mcp="hold",
        aliases=("queue_slot",),
        flags=True,
        args=(_SLOT,),
        guidance="Hold one slot the file already has (want: held).",
    ),
    UseCase(
        "queue_slots",
        "hold several slots, or race them in one group",
        "edit",
        mcp="queue_slots",
        guidance="Hold several; race=true makes them candidates of one race group.",
    ),
    UseCase(
        "release",
        "release a slot: the controller deletes its TPU",
        "destructive",
        edit="release",
        cli="release",
        mcp="release",
        aliases=("cancel_slot",),
        confirm="do not ask for confirmation",
        flags=True,
        args=(_SLOT,),
        guidance="Release a slot: its TPU is deleted. Destructive: confirm=true after a yes.",
    ),
    UseCase(
        "pause",
        "pause a slot (paused: true): nothing is created, deleted or set up for it",
        "edit",
        edit="pause",
        cli="pause",
        mcp="pause",
        flags=True,
        args=(_SLOT, Arg("resume", help="lift the pause instead (paused: false)")),
        guidance="Keep one slot as it is (paused: true): the controller creates, deletes and "
        "sets up nothing for it; resume=true lifts the pause.",
    ),
    UseCase(
        "race",
        "create or replace a race group of candidate slots",
        "destructive",
        edit="race",
        cli="race",
        mcp="race",
        aliases=("set_race_group",),
        confirm="confirm dropping or lowering",
        fixed=(("exact", True),),
        flags=True,
        args=(
            Arg("group", metavar="GROUP"),
            Arg("slots", metavar="SLOT"),
            Arg("count", option=True, help="winners wanted"),
        ),
        guidance="Define a race exactly; dropping candidates or lowering count needs "
        "confirm=true after a yes.",
    ),
    UseCase(
        "add_slot",
        "add a slot to desired.yaml",
        "edit",
        edit="add_slot",
        cli="add-slot",
        mcp="add_slot",
        again=True,
        flags=True,
        args=(
            Arg("zone", option=True),
            Arg("accelerator", option=True, help="e.g. v6e-8, v4-32"),
            Arg("mode", vocabulary="modes"),
            Arg("name", help="default: <mode>-<accel>-<zone code>-<index>"),
            Arg("want", vocabulary="wants"),
            Arg("index", help="index for the generated name"),
            Arg("runtime_version", help="the TPU software version (default: the API's)"),
            Arg("slices", help="multislice: N slices in one QR"),
            Arg(
                "max_run_duration",
                metavar="DURATION",
                help="mode flex-start (required there): how long the TPU runs, at most 7d, e.g. 6h",
            ),
            Arg("renew", help="flex-start only: queue a new run once each run has ended"),
            Arg("api", vocabulary="apis", help="default: the file's (else tpu)"),
        ),
        guidance="A new slot in a zone with an accelerator (named for you unless given).",
    ),
    UseCase(
        "remove_slot",
        "remove a slot: it becomes unmanaged",
        "destructive",
        edit="remove_slot",
        cli="remove-slot",
        mcp="remove_slot",
        confirm="confirm when settings.prune is on",
        flags=True,
        args=(_SLOT,),
        guidance="Take a slot out of the file (it becomes unmanaged, not deleted unless "
        "settings.prune).",
    ),
    UseCase(
        "setup",
        "set a slot's setup flags",
        "edit",
        edit="setup",
        cli="setup",
        flags=True,
        args=(_SLOT, Arg("rerun", help="bump the generation: run setup again")),
    ),
    UseCase(
        "setup_vm",
        "run the setup scripts again on a slot's node",
        "edit",
        edit="setup",
        mcp="setup_vm",
        again=True,
        fixed=(("bootstrap", True), ("rerun", True)),
        only=("name",),
        guidance="Run the setup scripts again on a slot's node (a new setup generation).",
    ),
    UseCase(
        "tailscale_setup",
        "join a slot's node to the tailnet",
        "edit",
        edit="setup",
        mcp="tailscale_setup",
        again=True,
        fixed=(("tailscale", True), ("rerun", True)),
        only=("name",),
        guidance="Join a slot's node to the tailnet.",
    ),
    UseCase(
        "set_poll",
        "change the poll intervals",
        "edit",
        edit="set_poll",
        cli="set-poll",
        mcp="set_poll",
        flags=True,
        args=(
            Arg("interval", help="when steady, e.g. 30s, 2m"),
            Arg("fast_interval", help="while anything moves, e.g. 5s"),
        ),
        guidance="Change how often the controller polls.",
    ),
    UseCase(
        "tmux_sync",
        "mirror every ACTIVE slot in tmux",
        "edit",
        edit="tmux_all",
        mcp="tmux_sync",
        guidance="Mirror every ACTIVE slot in tmux.",
    ),
    UseCase(
        "tmux_open",
        "keep a tmux SSH window open to one slot",
        "edit",
        edit="setup",
        mcp="tmux_open",
        fixed=(("tmux", True),),
        only=("name",),
        guidance="Keep a tmux SSH window open to one slot.",
    ),
    UseCase(
        "workload_set",
        "set workload fields of a slot or race group",
        "edit",
        edit="set_workload",
        cli="workload set",
        mcp="workload_set",
        aliases=("set_workload",),
        confirm="do not ask before ending a running one",
        flags=True,
        args=(
            Arg("name", metavar="NAME", help="a slot (with its own entry) or a race group"),
            Arg(
                "command",
                help="a command run by bash -lc on each worker",
                words="argv",
                words_help="the program and its arguments",
            ),
            Arg("workdir", help="working directory (default: login dir)"),
            Arg("env", metavar="NAME=VALUE", help="plain variable"),
            Arg("secret_env", metavar="NAME=SECRET", help="variable from a secret"),
            Arg("restart", vocabulary="restarts"),
            Arg("stall_after", help="e.g. 30m"),
            Arg("stop_grace", help="e.g. 60s"),
            Arg("when_done", vocabulary="when_done"),
            Arg("keep_attempts", help="attempt directories kept (1..10000)"),
            Arg("idle_after", help="chips idle this long = a hang, e.g. 20m"),
            Arg("idle_below", help="idle duty cycle, percent"),
            Arg("take_tpu", help="stop others' processes holding the chips before a launch"),
            Arg(
                "across",
                choices=("group", "slot"),
                help="race group only: group = one program over every winner",
            ),
            Arg("min_count", help="race group with --across group: start on N"),
        ),
        guidance="Declare or change a workload; changing what runs of a running one needs "
        "confirm=true after a yes.",
    ),
    UseCase(
        "workload_restart",
        "restart the workload: a generation bump (new run id)",
        "destructive",
        edit="restart_workload",
        cli="workload restart",
        mcp="workload_restart",
        aliases=("restart_workload",),
        again=True,
        confirm="do not ask before ending it",
        flags=True,
        args=(_NAME,),
        guidance="Start a workload's run again (also after gave-up). Needs confirm=true "
        "while it runs.",
    ),
    UseCase(
        "workload_stop",
        "stop the workload: remove its block; the controller stops the program",
        "destructive",
        edit="stop_workload",
        cli="workload stop",
        mcp="workload_stop",
        aliases=("stop_workload",),
        confirm="do not ask before ending it",
        flags=True,
        args=(_NAME,),
        guidance="Stop and forget a workload. Needs confirm=true while it runs.",
    ),
    UseCase(
        "suspend",
        "stop the controller acting (it keeps observing, planning and reporting)",
        "edit",
        edit="suspend",
        cli="suspend",
        mcp="suspend",
        flags=True,
        guidance="The user wants the controller to stop acting (it keeps observing).",
    ),
    UseCase(
        "resume",
        "let a suspended controller act again",
        "edit",
        edit="resume",
        cli="resume",
        mcp="resume",
        flags=True,
        guidance="Let a suspended controller act again.",
    ),
)

#: Actions that are no edit of the file: the delete guard's confirmation, closing a window.
ACTIONS: Final = (
    UseCase(
        "confirm",
        "confirm the deletes the delete guard holds (exactly those status shows)",
        "destructive",
        cli="confirm",
        mcp="confirm",
        aliases=("confirm_deletes",),
        confirm="without FINGERPRINT: confirm the deletes shown without asking (as release --yes)",
        flags=True,
        args=(Arg("fingerprint", metavar="FINGERPRINT", positional=True),),
        guidance="Let through the deletes the delete guard holds, exactly the set plan "
        "shows, after the user said yes to that set.",
    ),
    UseCase(
        "tmux_close",
        "close a slot's tmux window now (it comes back while the slot is ACTIVE)",
        "destructive",
        cli="tmux close",
        mcp="tmux_close",
        json=False,
        confirm="always",
        guidance="Close a slot's window now (local). Needs confirm=true after a yes.",
    ),
)

#: Queries: read the file, the controller's snapshot, the history or the logs; never a change.
QUERIES: Final = (
    UseCase(
        "status",
        "what is held now: every slot, desired against observed",
        "read",
        cli="status",
        mcp="status",
        aliases=("list_slots",),
        guidance="First, for any question about what is held, queued, racing or failing.",
    ),
    UseCase(
        "info",
        "one slot in detail: IPs per worker, create time, errors, SSH",
        "read",
        cli="info",
        mcp="info",
        aliases=("slot_info",),
        guidance="One slot in detail: IPs, setup, last error, tmux window, SSH command.",
    ),
    UseCase(
        "ssh",
        "the SSH command for a worker of a slot's node",
        "read",
        cli="ssh",
        mcp="ssh",
        aliases=("ssh_command",),
        json=False,
        guidance="The user wants to log in to a node: give them the command, do not run it.",
    ),
    UseCase(
        "last_plan",
        "the controller's last plan: what it does next and what it holds back",
        "read",
        mcp="last_plan",
        aliases=("plan",),
        guidance="What the controller will do next, and what it holds back (paused, guard, "
        "blocked).",
    ),
    UseCase(
        "plan",
        "observe the cloud once and show what the controller would do (never acts)",
        "read",
        cli="plan",
    ),
    UseCase(
        "events",
        "the controller's event log",
        "read",
        cli="events",
        mcp="events",
        guidance="What happened lately: transitions, actions, errors in the cloud's own words.",
    ),
    UseCase(
        "logs",
        "what a slot's workload printed on each worker",
        "read",
        cli="logs",
        mcp="logs",
        aliases=("workload_logs",),
        json=False,
        guidance="The last lines a workload printed on each worker.",
    ),
    UseCase(
        "workload_status",
        "what a slot's workload is declared as and how it runs",
        "read",
        mcp="workload_status",
        guidance="What a slot's workload is declared as and how it runs (state, attempt).",
    ),
    UseCase(
        "history",
        "capacity history: queue waits, lifetimes, failures",
        "read",
        cli="history",
        mcp="history",
        aliases=("capacity_history",),
        guidance="How long queues took per zone, accelerator and mode; preemptions.",
    ),
    UseCase(
        "recommend",
        "zones ranked by expected time to capacity",
        "read",
        cli="recommend",
        mcp="recommend",
        aliases=("recommend_zones",),
        guidance="Where an accelerator comes up soonest; then add_slot per zone and race "
        "them with race.",
    ),
    UseCase(
        "quota",
        "chip limits, their use and which slots wait on them",
        "read",
        cli="quota",
        mcp="quota",
        aliases=("quotas",),
        guidance="Chip limits, their use and which slots wait on them (a slot reading "
        "'waiting for quota' waits here; do not add slots to get round it).",
    ),
    UseCase(
        "timeline",
        "who holds what, when, and when a waiting slot can start",
        "read",
        cli="timeline",
        mcp="timeline",
        guidance="When will a slot start, and who holds the chips until then: every slot's "
        "held, queued and scheduled spans, and for one waiting on a quota or a cap its earliest "
        "start (an estimate, or 'never' with the reason).",
    ),
    UseCase(
        "tmux_status",
        "the tmux mirror windows, orphans flagged",
        "read",
        cli="tmux status",
        mcp="tmux_status",
        guidance="Which tmux mirror windows exist and which are orphaned.",
    ),
    UseCase(
        "doctor",
        "what is broken and how to fix it",
        "read",
        cli="doctor",
    ),
)

ALL: Final = (*EDITS, *ACTIONS, *QUERIES)


def by_name(name: str) -> UseCase:
    """The use case of canonical name ``name``; KeyError names the known ones."""
    for case in ALL:
        if case.name == name:
            return case
    raise KeyError(f"no use case {name!r} (known: {', '.join(c.name for c in ALL)})")


def cli_verbs() -> Iterator[UseCase]:
    """The edits whose top-level CLI verb is made from the declaration (``flags``)."""
    return (c for c in EDITS if c.flags and c.cli is not None and " " not in c.cli)


def mcp_names() -> dict[str, UseCase]:
    """Every MCP tool name (canonical and deprecated alias) -> its use case."""
    names: dict[str, UseCase] = {}
    for case in ALL:
        if case.mcp is not None:
            for name in (case.mcp, *case.aliases):
                names[name] = case
    return names


def deprecated() -> dict[str, str]:
    """Each deprecated MCP name -> the canonical tool that replaces it."""
    return {a: c.mcp for c in ALL if c.mcp is not None for a in c.aliases}
