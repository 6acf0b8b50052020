"""Operation ids of intent edits: an identical retry gets the first result back.

May: read and atomically rewrite ``operations.json`` in the state directory (in a lab, each
member's own ``operations.<user>.json``). May not: lock
(the caller holds the intent lock around ``lookup`` + ``record``), edit desired.yaml.

A document ``{"schema_version": "tpu-reconciler.operations.v1", "operations": {id: record}}``
where a record holds the edit's fingerprint (kind + arguments), when it ran and its result.
The newest ``KEEP`` records are kept. A corrupt or unknown file fails closed: edits that carry
an operation id are refused until it is fixed, rather than replayed twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from reconciler.adapters.files import PRIVATE_FILE, atomic_write, json_text, read_json
from reconciler.errors import EditRejected, ReconcilerError

SCHEMA: Final = "tpu-reconciler.operations.v1"
KEEP: Final = 2000
OPERATION_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def check_operation_id(value: object) -> str:
    if not isinstance(value, str) or not OPERATION_ID_RE.fullmatch(value):
        raise EditRejected(
            f"invalid operation id {value!r}: use 1-128 letters, digits, '.', '_', ':' or '-', "
            "starting with a letter or digit"
        )
    return value


@dataclass(frozen=True, slots=True)
class OperationLog:
    path: Path
    #: the file's mode; None: private (0600, or the group's in a shared directory). A lab
    #: member's own log is 0640: nobody else writes it.
    mode: int | None = None

    def _load(self) -> dict[str, Any]:
        try:
            doc = read_json(self.path)
        except FileNotFoundError:
            return {}
        except ValueError as e:
            raise ReconcilerError(f"{self.path} is corrupt ({e}); fix or remove it") from None
        if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA:
            raise ReconcilerError(f"{self.path} has an unknown format; fix or remove it")
        ops = doc.get("operations")
        if not isinstance(ops, dict):
            raise ReconcilerError(f"{self.path} has no operations map; fix or remove it")
        return ops

    def lookup(self, operation_id: str, fingerprint: str) -> dict[str, Any] | None:
        """The stored result of an identical earlier edit, or None when the id is new.
        Raises EditRejected when the id was used for a different edit."""
        record = self._load().get(operation_id)
        if record is None:
            return None
        if record.get("fingerprint") != fingerprint:
            raise EditRejected(
                f"operation id {operation_id!r} was already used for a different edit "
                f"({record.get('summary', 'unknown')}); use a new id for a new edit"
            )
        result = record.get("result")
        return result if isinstance(result, dict) else {}

    def record(
        self, operation_id: str, fingerprint: str, summary: str, ts: str, result: dict[str, Any]
    ) -> None:
        ops = self._load()
        ops.pop(operation_id, None)
        ops[operation_id] = {
            "fingerprint": fingerprint,
            "summary": summary,
            "ts": ts,
            "result": result,
        }
        if len(ops) > KEEP:
            ops = dict(list(ops.items())[-KEEP:])
        document = {"schema_version": SCHEMA, "operations": ops}
        atomic_write(self.path, json_text(document), mode=self.mode or PRIVATE_FILE)
