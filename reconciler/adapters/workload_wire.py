"""The workload wrapper's wire format: what goes to it, what comes back, pure.

What reaches the remote command line is validated here (``check_attempt``, ``attempt_dir``,
``worker_dir``: slot by ``names.check_name``, run id, attempt) and quoted by ``command_line``;
the launch spec travels on stdin as NUL-terminated records (``encode_spec``), framed with its
length and SHA-256 (``frame``) so that a spec cut off in transit starts nothing. Back come one
``probe`` line per worker (``parse_probe``) and the ``logs`` stream of ``@ <attempt> <n>``
frames (``_Frames``). ``adapters/workload.py`` sends and reads these over pooled SSH.

May: nothing but compute. May not: open connections, read secrets (their values are passed
in), or let a user string reach a shell unquoted.
"""

from __future__ import annotations

import hashlib
import math
import posixpath
import re
import shlex
from collections.abc import Mapping
from typing import Final

from reconciler.errors import UnsafeName
from reconciler.model.names import check_name
from reconciler.model.workload import (
    RESERVED_ENV_PREFIX,
    LaunchRequest,
    LogLine,
    WorkerProbe,
    check_env_name,
    check_run_id,
)

_MAX_ATTEMPT: Final = 1_000_000
_PROBE_STATES: Final = frozenset({"alive", "exited", "missing"})
_HOST_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:_-]{0,252}$")


# --- values that reach the remote command line ------------------------------------------------


def check_attempt(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_ATTEMPT:
        raise UnsafeName(f"invalid attempt {value!r}: expected a positive integer")
    return value


def _no_nul(what: str, value: str) -> str:
    if not isinstance(value, str) or "\0" in value:
        raise UnsafeName(f"invalid {what}: must be a string without NUL bytes")
    return value


def worker_dir(base: str, worker: int, slot: str) -> str:
    """``<base>/w<worker>/<slot>``: everything of one slot on one worker."""
    return posixpath.join(base, f"w{int(worker)}", check_name(slot))


def attempt_dir(base: str, worker: int, slot: str, run_id: str, attempt: int) -> str:
    """``<base>/w<worker>/<slot>/<run_id>/<attempt>``, every part validated."""
    check_name(slot)
    check_run_id(run_id)
    check_attempt(attempt)
    return _attempt_path(base, worker, slot, run_id, attempt)


def _attempt_path(base: str, worker: int, slot: str, run_id: str, attempt: int) -> str:
    """``attempt_dir`` for names the caller validated already (once per call, not per worker)."""
    return f"{base}/w{int(worker)}/{slot}/{run_id}/{int(attempt)}"


def encode_spec(req: LaunchRequest, secret_values: Mapping[str, bytes]) -> bytes:
    """The wrapper's stdin: NUL-terminated ``workdir=``, ``env=NAME=VALUE``, ``slices=N`` and
    ``hosts=A,B,...`` (when set), ``grace=MS``, ``keep=N``, then ``shell=CMD`` or one ``arg=``
    per argv element, framed (``frame``).
    Refuses what the wrapper could not carry (NUL bytes)."""
    records = _env_records(req, secret_values)
    if req.slices > 1:  # the wrapper sets each worker's slice from it (multislice)
        records.append(f"slices={int(req.slices)}".encode())
    if req.hosts:  # the wrapper sets TPU_WORKER_ID and TPU_WORKER_HOSTNAMES from it
        records.append(b"hosts=" + ",".join(check_host(h) for h in req.hosts).encode())
    records += _attempt_records(req)
    records += _command_records(req.command)
    return frame(b"".join(r + b"\0" for r in records))


def encode_hook_spec(
    req: LaunchRequest, secret_values: Mapping[str, bytes], ours: Mapping[str, str]
) -> bytes:
    """The wrapper ``hook`` verb's stdin (a ``before_end``): ``req``'s workdir, environment
    and command (the before_end's), and ``ours`` as ``TPU_RECONCILER_<NAME>`` variables."""
    records = _env_records(req, secret_values)
    for name, value in ours.items():
        if not name.isupper() or not name.replace("_", "").isalnum():
            raise UnsafeName(f"invalid variable name {name!r}")
        records.append(f"env={RESERVED_ENV_PREFIX}{name}=".encode() + _no_nul(name, value).encode())
    records += _command_records(req.command)
    return frame(b"".join(r + b"\0" for r in records))


def _env_records(req: LaunchRequest, secret_values: Mapping[str, bytes]) -> list[bytes]:
    """``workdir=`` and the ``env=`` records of a spec (plain values, the run's end, secrets)."""
    records: list[bytes] = []
    if req.workdir:
        records.append(b"workdir=" + _no_nul("workdir", req.workdir).encode())
    for name, value in req.env.items():
        value = _no_nul(f"value of {check_env_name(name)}", value)
        records.append(f"env={name}=".encode() + value.encode())
    if req.termination_time:  # the wrapper's own variable: no check_env_name
        end = _no_nul("termination time", req.termination_time)
        records.append(f"env={RESERVED_ENV_PREFIX}TERMINATION_TIME={end}".encode())
    for name, secret in secret_values.items():
        if b"\0" in secret:
            raise UnsafeName(f"the secret for {name} contains a NUL byte")
        records.append(f"env={check_env_name(name)}=".encode() + secret)
    return records


def _command_records(command: str | tuple[str, ...]) -> list[bytes]:
    """``shell=CMD`` (run by ``bash -lc``), or one ``arg=`` per argv element."""
    if isinstance(command, str):
        if not command.strip():
            raise UnsafeName("empty workload command")
        return [b"shell=" + _no_nul("command", command).encode()]
    if not command:
        raise UnsafeName("empty workload argv")
    return [b"arg=" + _no_nul("argument", a).encode() for a in command]


def check_host(address: str) -> str:
    """An address for ``TPU_WORKER_HOSTNAMES``: an IP or a host name, nothing a list or a
    record could be split at."""
    if not _HOST_RE.fullmatch(address):
        raise UnsafeName(f"invalid worker address {address!r}")
    return address


def _attempt_records(req: LaunchRequest) -> list[bytes]:
    """``grace=MS`` (SIGTERM to SIGKILL for what the program leaves behind) and ``keep=N``
    (attempt directories kept on the worker)."""
    grace_ms = math.ceil(min(max(float(req.grace), 0.0), 86400.0) * 1000)
    keep = min(max(int(req.keep_attempts), 1), 100_000)
    return [f"grace={grace_ms}".encode(), f"keep={keep}".encode()]


def frame(body: bytes) -> bytes:
    """``body`` and its last line ``end=<bytes> <sha256>``: the wrapper refuses a spec whose
    frame is missing or does not match, so a spec cut off in transit starts nothing."""
    return body + f"end={len(body)} {hashlib.sha256(body).hexdigest()}\n".encode()


def parse_probe(index: int, output: str) -> WorkerProbe:
    """One wrapper ``probe`` line (``state=alive pid=12 started=... code=- output=...``)."""
    fields = dict(f.partition("=")[::2] for f in output.split())
    state = fields.get("state")
    if state not in _PROBE_STATES:
        return WorkerProbe(index, "unknown", error=f"unreadable probe answer {output[:200]!r}")

    def number(key: str) -> float | None:
        try:
            value = float(fields.get(key, "-"))
        except ValueError:
            return None
        return value if math.isfinite(value) else None

    pid, code = number("pid"), number("code")
    return WorkerProbe(
        index,
        "alive" if state == "alive" else "exited" if state == "exited" else "missing",
        exit_code=int(code) if code is not None and state == "exited" else None,
        pid=int(pid) if pid is not None else None,
        started_at=number("started"),
        last_output_at=number("output"),
        adopt=_adopt(fields.get("adopt")) if state == "missing" else None,
        left=parse_left(fields.get("left", "")) if state == "exited" else (),
    )


def parse_left(value: str) -> tuple[int, ...]:
    """The wrapper's ``left=PID,...`` (``-PGID`` for a process group still there): the ids,
    positive; anything else in the list is dropped."""
    out = []
    for word in value.split(","):
        word = word.strip().lstrip("-")
        if word.isdigit() and 0 < int(word) < 1 << 31:
            out.append(int(word))
    return tuple(dict.fromkeys(out))


def parse_stop(answer: str) -> tuple[int, ...]:
    """The processes a ``stop`` answer (``stopped`` or ``stopped left=PID,...``) says survived
    the kill deadline; () when none did."""
    words = answer.split()
    lefts = [w.removeprefix("left=") for w in words[1:] if w.startswith("left=")]
    return parse_left(lefts[0]) if words[:1] == ["stopped"] and lefts else ()


def _adopt(value: str | None) -> str | None:
    """``<run_id>/<attempt>`` the wrapper names for adoption, or None when it is not one."""
    run_id, _, attempt = (value or "").partition("/")
    try:
        check_run_id(run_id)
        check_attempt(int(attempt))
    except (UnsafeName, ValueError):
        return None
    return f"{run_id}/{int(attempt)}"


class _Frames:
    """The wrapper's ``logs`` stream: ``@ <attempt> <n>`` headers, each followed by n bytes of
    that attempt's output; lines are cut at newlines, a partial line waits for its end (or for
    the attempt to change, or the stream to end)."""

    def __init__(self, worker: int) -> None:
        self.worker = worker
        self.attempt = 0
        self._partial = b""

    def header(self, line: bytes) -> tuple[int, int] | None:
        """(attempt, bytes to read), or None for a heartbeat; ValueError when malformed."""
        at, attempt, size = line.decode("ascii").split()
        if at != "@":
            raise ValueError(f"bad frame {line[:80]!r}")
        if attempt == ".":
            return None
        return int(attempt), int(size)

    def feed(self, attempt: int, data: bytes) -> list[LogLine]:
        out = self.flush() if attempt != self.attempt else []
        self.attempt = attempt
        buffer = self._partial + data
        *lines, self._partial = buffer.split(b"\n")
        return out + [self._line(raw) for raw in lines]

    def flush(self) -> list[LogLine]:
        if not self._partial:
            return []
        partial, self._partial = self._partial, b""
        return [self._line(partial)]

    def _line(self, raw: bytes) -> LogLine:
        text = raw.decode("utf-8", "replace").rstrip("\r").rsplit("\r", 1)[-1]
        return LogLine(self.worker, self.attempt, text)


def command_line(wrapper: str, verb: str, *args: str | int) -> str:
    """``bash <wrapper> <verb> <args>...``, every word shell-quoted."""
    words = ["bash", wrapper, verb, *(str(a) for a in args)]
    return " ".join(shlex.quote(w) for w in words)
