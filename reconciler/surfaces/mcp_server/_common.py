"""What every MCP tool group shares: the annotations, errors as ``ToolError``, the arguments
every edit takes (``operation_id``, ``confirm``, ``wait_seconds``: described here once), and
``edit_tool``, which makes an edit tool's parameters from its edit class.

An edit tool is declared by its edit class (``Hold``, ``Race``, ``SetWorkload``, ...: the
frozen argument classes of ``reconciler.intent.edits*``) and a body::

    @edit_tool(server, store, Hold, EDIT)
    def queue_slot(call: EditCall[Hold]) -> dict[str, Any]:
        \"\"\"Hold a slot ...\"\"\"  (the tool's description)
        return call.apply()

The tool's parameters are the class's fields (those without a default first), then
``operation_id``, the fields with a default, ``confirm`` (with ``confirm=True``), the body's own
keyword parameters after ``call`` and ``wait_seconds``; ``fixed`` sets fields the tool does not
take, ``only`` names the fields it takes when not all. So a renamed or retyped field changes
the tool with it, and mypy checks the body against the class.
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
from reconciler.intent import views
from reconciler.intent.edits import Edit
from reconciler.intent.engine import IntentEditor
from reconciler.intent.tmux import REOPEN_NOTE, close_window

T = TypeVar("T")
E = TypeVar("E", bound=Edit)
P = ParamSpec("P")
R = TypeVar("R", dict[str, Any], Awaitable[dict[str, Any]])

REMINDER: Final = (
    "desired.yaml is edited; the controller acts on it at its next pass "
    "(pass wait_seconds to wait for it, or call list_slots / events later)"
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
) -> Callable[[Callable[Concatenate[EditCall[E], P], R]], Callable[Concatenate[EditCall[E], P], R]]:
    """Register the decorated body as the tool of the same name, its parameters made from
    ``edit``'s fields (see the module's docstring)."""
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
        server.add_tool(tool, name=body.__name__, description=body.__doc__, annotations=annotations)
        return body

    return register


async def close_tmux_window(store: IntentEditor, name: str) -> dict[str, Any]:
    """Close the slot's tmux window(s) now: what closed, and that it comes back while ACTIVE."""
    try:
        closed = await close_window(store, name)
    except ReconcilerError as e:
        raise ToolError(str(e)) from None
    return {"closed": closed, "note": REOPEN_NOTE if closed else "no window was open"}
