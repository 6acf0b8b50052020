"""``tpu-reconciler secret set|list|delete``: the secrets setup needs (the Tailscale auth key).

``secret set NAME`` prompts without echo on a terminal (getpass) and otherwise reads the value
from stdin (``tpu-reconciler secret set tailscale < key.txt``); it is stored 0600 under the
state directory's ``secrets/`` (0700). There is no ``show``: a secret is never printed, and no
message here contains one. ``secret list`` prints names only (``--json`` for a
``tpu-reconciler.secrets.v1`` document); ``secret delete NAME`` removes one.

May: read stdin / the terminal, write the state dir's secrets, print names and confirmations.
May not: print, log or echo a secret value; import anything heavy.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final

from reconciler.exitcodes import EX_OK, EX_REFUSED
from reconciler.surfaces.cli._say import err

SCHEMA: Final = "tpu-reconciler.secrets.v1"
_HERE: Final = "reconciler.surfaces.cli._secret"


def register(subparsers: Any) -> None:
    group = subparsers.add_parser(
        "secret", help="store, list or delete secrets (e.g. the Tailscale auth key)"
    )
    actions = group.add_subparsers(dest="secret_action", metavar="ACTION", required=True)

    put = actions.add_parser(
        "set",
        help="store a secret (prompted on a terminal, else read from stdin)",
        description="Store a secret 0600 in the state directory. On a terminal the value is "
        "prompted for without echo; otherwise it is read from stdin. It is never printed.",
    )
    put.add_argument("name", metavar="NAME", help="secret name, e.g. tailscale")
    put.set_defaults(handler=f"{_HERE}:set_command")

    names = actions.add_parser("list", help="list stored secret names (never values)")
    names.add_argument("--json", action="store_true", help=f"print a {SCHEMA} document")
    names.set_defaults(handler=f"{_HERE}:list_command")

    delete = actions.add_parser("delete", help="delete a stored secret")
    delete.add_argument("name", metavar="NAME", help="secret name")
    delete.set_defaults(handler=f"{_HERE}:delete_command")


def _store(args: argparse.Namespace) -> Any:
    from reconciler.intent.secret_store import secrets_of

    return secrets_of(args.file, args.state_dir)


def _error(message: str) -> int:
    err(message)
    return EX_REFUSED


def _read_value(name: str) -> str:
    if sys.stdin is not None and sys.stdin.isatty():
        import getpass

        return getpass.getpass(f"{name} (input hidden): ")
    return sys.stdin.read() if sys.stdin is not None else ""


def set_command(args: argparse.Namespace) -> int:
    from reconciler.errors import UnsafeName
    from reconciler.intent.secret_store import clean
    from reconciler.model.workload import check_secret_name

    try:
        name = check_secret_name(args.name)
        value = clean(_read_value(name))
    except (UnsafeName, ValueError) as exc:  # messages never carry the value
        return _error(str(exc))
    except EOFError:
        return _error("no value given")
    store = _store(args)
    try:
        store.set(name, value)
    except OSError as exc:
        return _error(f"cannot store secret {name!r}: {exc.strerror or type(exc).__name__}")
    if not args.quiet:
        print(f"stored secret {name!r} in {store.directory} (0600)")
    return EX_OK


def list_command(args: argparse.Namespace) -> int:
    names = _store(args).names()
    if getattr(args, "json", False):
        print(json.dumps({"schema_version": SCHEMA, "secrets": list(names)}))
    elif names:
        print("\n".join(names))
    elif not args.quiet:
        print("no secrets stored", file=sys.stderr)
    return EX_OK


def delete_command(args: argparse.Namespace) -> int:
    from reconciler.errors import UnsafeName

    store = _store(args)
    try:
        removed = store.delete(args.name)
    except UnsafeName as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"cannot delete secret {args.name!r}: {exc.strerror}")
    if not removed:
        return _error(f"no secret {args.name!r} stored")
    if not args.quiet:
        print(f"deleted secret {args.name!r}")
    return EX_OK
