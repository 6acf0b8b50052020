"""What every MCP tool group shares: the annotations, errors as ``ToolError``, the arguments
every edit takes (``operation_id``, ``confirm``, ``wait_seconds``: described here once), and
``edit_tool``, which makes an edit tool's parameters from its edit class.

An edit tool is declared by its edit class (``Hold``, ``Race``, ``SetWorkload``, ...: the
frozen argument classes of ``reconciler.intent.edits*``) and a body::

    @edit_tool(server, store, Hold, EDIT)
    def hold(call: EditCall[Hold]) -> dict[str, Any]:
        \"\"\"Hold a slot ...\"\"\"  (the tool's description)
        return call.apply()

The tool's parameters are the class's fields (those without a default first), then
``operation_id``, the fields with a default, ``confirm`` (with ``confirm=True``), the body's own
keyword parameters after ``call`` and ``wait_seconds``; ``fixed`` sets fields the tool does not
take, ``only`` names the fields it takes when not all. So a renamed or retyped field changes
the tool with it, and mypy checks the body against the class.

A tool of a declared use case (``reconciler.intent.usecases``) is made by ``case_tool`` (an
edit: its class, fixed fields, confirm and annotations from the declaration) or ``own_tool``
(a body with its own parameters): its name is the declaration's, and each deprecated alias is
registered beside it.
``declared_tools`` then gives every declared edit that no group wrote a body for the plain
body (apply the edit), so a new edit's declaration alone makes its tool.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Concatenate, Final, Generic, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from reconciler.errors import NeedsConfirmation, ReconcilerError
from reconciler.intent import catalog, usecases, views
from reconciler.intent.edits import Edit
from reconciler.intent.engine import IntentEditor
from reconciler.intent.tmux import REOPEN_NOTE, close_window
from reconciler.intent.usecases import UseCase

T = TypeVar("T")
E = TypeVar("E", bound=Edit)
P = ParamSpec("P")
R = TypeVar("R", dict[str, Any], Awaitable[dict[str, Any]])

REMINDER: Final = (
    "desired.yaml is edited; the controller acts on it at its next pass "
    "(pass wait_seconds to wait for it, or call status / events later)"
)

READ: Final = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
EDIT: Final = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DESTRUCTIVE: Final = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
# Edits that do it again when repeated (a new slot, another setup run, another restart):
# idempotent only through a repeated operation_id, which is optional.
EDIT_AGAIN: Final = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
DESTRUCTIVE_AGAIN: Final = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)

#: A declaration's annotations: by its kind and whether repeating it does it again.
ANNOTATIONS: Final[Mapping[tuple[str, bool], ToolAnnotations]] = {
    ("read", False): READ,
    ("edit", False): EDIT,
    ("edit", True): EDIT_AGAIN,
    ("destructive", False): DESTRUCTIVE,
    ("destructive", True): DESTRUCTIVE_AGAIN,
}


def annotations_of(case: UseCase) -> ToolAnnotations:
    return ANNOTATIONS[(case.kind, case.again)]


def alias_description(alias: str, name: str, description: str) -> str:
    return f"Deprecated alias of `{name}` (kept for one release; call {name}). {description}"


def add_tool(
    server: MCPServer,
    tool: Callable[..., Any],
    name: str,
    description: str | None,
    annotations: ToolAnnotations,
    aliases: Collection[str] = (),
) -> None:
    """Register ``tool`` as ``name`` and as each deprecated alias of it."""
    server.add_tool(tool, name=name, description=description, annotations=annotations)
    for alias in aliases:
        text = alias_description(alias, name, description or "")
        server.add_tool(tool, name=alias, description=text, annotations=annotations)


def _mcp_name(case: UseCase) -> str:
    if case.mcp is None:
        raise ValueError(f"use case {case.name!r} has no MCP tool")
    return case.mcp


def own_tool(server: MCPServer, case: UseCase) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Register the decorated body (its own parameters) as ``case``'s tool and its aliases."""

    def register(body: Callable[..., T]) -> Callable[..., T]:
        add_tool(server, body, _mcp_name(case), body.__doc__, annotations_of(case), case.aliases)
        return body

    return register


# --- the arguments every edit takes, described once -------------------------------------------

OperationId = Annotated[
    str | None,
    Field(
        description="Makes a retry safe: the same id with the same edit returns the first "
        "result (status: exists) and changes nothing; the same id with another edit is "
        "refused. 1-128 of A-Z a-z 0-9 . _ : - ; omitted, the edit gets a fresh id (in the "
        "result) and is not remembered."
    ),
]
Confirm = Annotated[
    bool,
    Field(description="true once the user agreed: needed where an edit may delete or end a thing"),
]
WaitSeconds = Annotated[
    float,
    Field(
        description="Wait up to this many seconds (at most 3600) for the controller's snapshot "
        "to show the edit done; 0 returns at once."
    ),
]


def guard(fn: Callable[[], T], hint: str = "") -> T:
    """``fn()``, its refusals as the tool errors a user reads (``hint`` after a confirmation)."""
    try:
        return fn()
    except NeedsConfirmation as e:
        raise ToolError(f"{e}{hint}") from None
    except ReconcilerError as e:
        raise ToolError(str(e)) from None


def apply_edit(
    store: IntentEditor,
    edit: Edit,
    operation_id: str | None = None,
    wait_seconds: float = 0,
    *,
    confirmed: bool = False,
    hint: str = "",
) -> dict[str, Any]:
    """The one way a tool edits desired.yaml: ``store.apply`` under ``guard``, the result with
    the schema version and the reminder, and the optional wait for the controller."""

    def run() -> dict[str, Any]:
        result = store.apply(edit, source="mcp", operation_id=operation_id, confirmed=confirmed)
        out: dict[str, Any] = {"schema_version": views.SCHEMA, **result.to_dict()}
        out["reminder"] = REMINDER
        if wait_seconds > 0:
            out["wait"] = views.wait_for(store, result, wait_seconds)
        return out

    return guard(run, hint)


@dataclass(frozen=True, slots=True)
class EditCall(Generic[E]):
    """One call of an edit tool: the edit its arguments made, and the arguments every edit
    takes. ``apply`` applies it (``apply_edit``)."""

    store: IntentEditor
    edit: E
    operation_id: str | None = None
    wait_seconds: float = 0
    confirmed: bool = False

    def apply(self, hint: str = "") -> dict[str, Any]:
        return apply_edit(
            self.store,
            self.edit,
            self.operation_id,
            self.wait_seconds,
            confirmed=self.confirmed,
            hint=hint,
        )


def edit_tool(
    server: MCPServer,
    store: IntentEditor,
    edit: type[E],
    annotations: ToolAnnotations,
    *,
    fixed: Mapping[str, object] | None = None,
    only: Collection[str] | None = None,
    confirm: bool = False,
    name: str | None = None,
    aliases: Collection[str] = (),
) -> Callable[[Callable[Concatenate[EditCall[E], P], R]], Callable[Concatenate[EditCall[E], P], R]]:
    """Register the decorated body as the tool ``name`` (default: the body's name) and its
    ``aliases``, its parameters made from ``edit``'s fields (see the module's docstring)."""
    preset: dict[str, object] = dict(fixed or {})
    hints = typing.get_type_hints(edit, include_extras=True)
    fields = [f for f in dataclasses.fields(edit) if f.init]
    unknown = (set(preset) | set(only or ())) - {f.name for f in fields}
    if unknown:
        raise ValueError(f"{edit.__name__} has no field {sorted(unknown)}")
    taken = [f for f in fields if f.name not in preset and (only is None or f.name in only)]

    def param(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> Any:
        kind = inspect.Parameter.KEYWORD_ONLY
        return inspect.Parameter(name, kind, default=default, annotation=annotation)

    def given(f: dataclasses.Field[Any]) -> Any:
        if f.default is not dataclasses.MISSING:
            return param(f.name, hints[f.name], f.default)
        return param(f.name, hints[f.name])

    required = [given(f) for f in taken if f.default is dataclasses.MISSING]
    optional = [given(f) for f in taken if f.default is not dataclasses.MISSING]

    def register(
        body: Callable[Concatenate[EditCall[E], P], R],
    ) -> Callable[Concatenate[EditCall[E], P], R]:
        sig = inspect.signature(body, eval_str=True)
        own: list[inspect.Parameter] = list(sig.parameters.values())[1:]
        params = [
            *required,
            param("operation_id", OperationId, None),
            *optional,
            *([param("confirm", Confirm, False)] if confirm else []),
            *(param(p.name, p.annotation, p.default) for p in own),
            param("wait_seconds", WaitSeconds, 0),
        ]
        names = [f.name for f in taken]

        def call_of(args: dict[str, Any]) -> EditCall[E]:
            value = edit(**preset, **{name: args.pop(name) for name in names})
            return EditCall(
                store,
                value,
                operation_id=args.pop("operation_id"),
                wait_seconds=args.pop("wait_seconds"),
                confirmed=bool(args.pop("confirm", False)),
            )

        run: Callable[..., Any] = body  # called with the arguments the signature below names
        tool: Callable[..., Any]
        if inspect.iscoroutinefunction(body):

            async def tool(**args: Any) -> Any:
                return await run(call_of(args), **args)

        else:

            def tool(**args: Any) -> Any:
                return run(call_of(args), **args)

        return_type = dict[str, Any]
        # What the SDK reads to make the input schema: inspect.signature and the type hints.
        tool.__dict__["__signature__"] = inspect.Signature(params, return_annotation=return_type)
        tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": return_type}
        description = body.__doc__
        add_tool(server, tool, name or body.__name__, description, annotations, aliases)
        return body

    return register


def case_tool(
    server: MCPServer, store: IntentEditor, case: UseCase
) -> Callable[
    [Callable[Concatenate[EditCall[Any], P], R]], Callable[Concatenate[EditCall[Any], P], R]
]:
    """Register the decorated body as the edit use case ``case``'s tool: its class, fixed
    fields, confirm, annotations, name and aliases from the declaration."""
    return edit_tool(
        server,
        store,
        catalog.edit_of(case),
        annotations_of(case),
        fixed=dict(case.fixed),
        only=case.only,
        confirm=bool(case.confirm),
        name=_mcp_name(case),
        aliases=case.aliases,
    )


def declared_tools(server: MCPServer, store: IntentEditor, made: Collection[str]) -> None:
    """Every declared use case with an MCP name that is not among ``made`` (the tools the
    groups registered): an edit gets the plain body, its description the declaration's
    summary; a query or an action without a body is a mistake, refused here."""
    for case in usecases.ALL:
        if case.mcp is None or case.mcp in made:
            continue
        if case.edit is None:
            raise ValueError(f"use case {case.name!r} declares MCP tool {case.mcp} without a body")

        def plain(call: EditCall[Any]) -> dict[str, Any]:
            return call.apply()

        plain.__doc__ = _described(case)
        case_tool(server, store, case)(plain)


def _described(case: UseCase) -> str:
    summary = case.summary[0].upper() + case.summary[1:]
    wait = " wait_seconds: wait until the controller's snapshot shows it done."
    confirm = " Needs confirm=true (ask the user)." if case.confirm else ""
    return f"{summary}.{confirm}{wait}"


async def close_tmux_window(store: IntentEditor, name: str) -> dict[str, Any]:
    """Close the slot's tmux window(s) now: what closed, and that it comes back while ACTIVE."""
    try:
        closed = await close_window(store, name)
    except ReconcilerError as e:
        raise ToolError(str(e)) from None
    return {"closed": closed, "note": REOPEN_NOTE if closed else "no window was open"}
