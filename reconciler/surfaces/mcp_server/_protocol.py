"""The MCP server's answers to calls it cannot serve: in one line, or as the JSON-RPC error.

The SDK (mcp 2.3) is lenient where an assistant needs to be told: a tool's arguments are a
pydantic model that *ignores* names it does not know (a typo in ``operation_id`` silently loses
the repeat protection), a wrong or missing argument comes back as pydantic's multi-line text
with a URL, and its stdio transport hands a line that is not a JSON-RPC message to a dispatcher
that only logs it, so the client waits forever for an answer. Here:

- ``Server.call_tool`` (the SDK's public hook every ``tools/call`` goes through) refuses an
  unknown tool or argument by name with a did-you-mean, names every missing required argument,
  and turns pydantic's validation error into one sentence per argument
  (``model.messages.schema_problem``, the loader's own words);
- ``Server.run_stdio_async`` runs the SDK's own stdio transport (which keeps stray output off
  the wire) behind ``answer_malformed``: each line the transport could not read as a JSON-RPC
  message is answered with the JSON-RPC error — ``-32700`` parse error (not JSON: garbage,
  binary), ``-32602`` invalid params (a request whose ``params`` is not an object), ``-32600``
  invalid request (anything else) — with the request's id when it has a usable one, else null.

May: read the SDK's messages and answer them. May not: touch desired.yaml, print (the wire is
stdout; logs go to stderr).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

from reconciler.model.messages import did_you_mean, schema_problem

log = logging.getLogger("reconciler.mcp")

_BRANCHES: Final = ("JSONRPCRequest", "JSONRPCNotification", "JSONRPCResponse", "JSONRPCError")


# --- tools/call ---------------------------------------------------------------------------------


def argument_problems(tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str:
    """What is wrong with the argument *names* of a call (empty when nothing): unknown ones,
    each with the closest known name, then the missing required ones."""
    known = list(schema.get("properties") or {})
    problems = []
    for name in arguments:
        if name not in known:
            near = did_you_mean(str(name), known)
            hint = f" (did you mean {near!r}?)" if near else ""
            problems.append(f"unknown argument {name!r}{hint}")
    missing = [r for r in schema.get("required") or () if r not in arguments]
    if missing:
        listed = ", ".join(repr(m) for m in missing)
        problems.append(f"missing required argument{'s' if len(missing) > 1 else ''} {listed}")
    if not problems:
        return ""
    return f"{tool}: " + "; ".join(problems) + f"; it takes {', '.join(known) or 'nothing'}"


def validation_text(tool: str, error: ValidationError) -> str:
    """A pydantic error about a tool's arguments as one line, in the loader's words."""
    parts = []
    for err in error.errors():
        label = ".".join(str(p) for p in err.get("loc") or ()) or "arguments"
        parts.append(schema_problem(err, label))
    return f"{tool}: " + "; ".join(parts)


class Server(MCPServer):
    """``MCPServer`` that refuses what it cannot serve in words (see the module's docstring)."""

    _schemas: dict[str, Mapping[str, Any]] | None = None

    def tool_names(self) -> set[str]:
        """The tools registered so far (without the async round of ``list_tools``)."""
        return {t.name for t in self._tool_manager.list_tools()}

    async def _schema_of(self, name: str) -> Mapping[str, Any] | None:
        if self._schemas is None:
            self._schemas = {t.name: t.input_schema for t in await self.list_tools()}
        return self._schemas.get(name)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> Any:  # the SDK's own signature; every tools/call comes through here
        schema = await self._schema_of(name)
        if schema is None:
            near = did_you_mean(name, list(self._schemas or ()))
            hint = f" (did you mean {near!r}?)" if near else ""
            raise ToolError(f"unknown tool {name!r}{hint}")
        problem = argument_problems(name, schema, arguments)
        if problem:
            raise ToolError(problem)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(validation_text(name, exc.__cause__)) from None
            raise

    async def run_stdio_async(self) -> None:
        async with stdio_server() as (read, write), answer_malformed(read, write) as checked:
            # The SDK's own stdio loop (``MCPServer.run_stdio_async``) with the filtered read
            # stream; it has no public way to pass streams in.
            lowlevel = self._lowlevel_server
            await lowlevel.run(checked, write, lowlevel.create_initialization_options())


# --- malformed JSON-RPC ---------------------------------------------------------------------------


def _request_id(value: Any) -> str | int | None:
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return value


def error_for(problem: Exception) -> JSONRPCError:
    """The JSON-RPC error answering a line the transport could not read as a message."""
    errors: Sequence[Mapping[str, Any]] = (
        problem.errors() if isinstance(problem, ValidationError) else ()
    )
    if not errors or any(e.get("type") == "json_invalid" for e in errors):
        return _error(None, PARSE_ERROR, "Parse error: not a JSON-RPC message in JSON")
    message = next(
        (e["input"] for e in errors if len(e.get("loc") or ()) == 2 and e["loc"][0] in _BRANCHES
         and isinstance(e.get("input"), Mapping) and e["loc"][1] in ("result", "error")),
        None,
    )  # fmt: skip
    if not isinstance(message, Mapping):
        return _error(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    ident = _request_id(message.get("id"))
    params_wrong = any(tuple(e.get("loc") or ())[1:2] == ("params",) for e in errors)
    if (
        ident is not None
        and isinstance(message.get("method"), str)
        and message.get("jsonrpc") == "2.0"
        and params_wrong
    ):
        return _error(ident, INVALID_PARAMS, "Invalid params: params must be an object")
    return _error(
        ident,
        INVALID_REQUEST,
        'Invalid Request: expected jsonrpc "2.0", a method and an id (a string or number)',
    )


def _error(ident: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=code, message=message))


@asynccontextmanager
async def answer_malformed(read: Any, write: Any) -> AsyncIterator[Any]:
    """A read stream that yields what ``read`` does but its exceptions (the lines that were
    no JSON-RPC message), each answered on ``write`` with ``error_for`` instead."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def pump() -> None:
        async with send:
            async for item in read:
                if isinstance(item, Exception):
                    reply = error_for(item)
                    log.info("answered a malformed message: %s", reply.error.message)
                    await write.send(SessionMessage(reply))
                    continue
                await send.send(item)

    async with anyio.create_task_group() as group:
        group.start_soon(pump)
        try:
            yield receive
        finally:
            group.cancel_scope.cancel()
