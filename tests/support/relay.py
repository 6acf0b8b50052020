"""A small TCP relay for workers that cannot be dialled (run as a script; no imports of ours).

    relay.py hop HOST PORT
        connect to HOST:PORT and join it to stdin/stdout (what ``nc HOST PORT`` does)
    relay.py via GATE_HOST GATE_PORT HOST PORT
        connect to a gate, ask it for HOST:PORT (one line), then join it to stdin/stdout:
        a proxy command (``ssh_proxy: {command: [..., "%h", "%p"]}``)
    relay.py gate LISTEN_HOST NSPID [HOST PORT]
        listen on LISTEN_HOST (a free port, printed as "ready PORT"); for each connection run
        ``nsenter -t NSPID -n <python> relay.py hop HOST PORT`` on it, HOST PORT read from the
        connection's first line unless given: the one way into the network namespace of NSPID
        (a relay in front of a private network, or a bastion's public address)

Every connection and every refusal is one line on stderr (``gate`` also appends the target of
each connection to ``$RELAY_LOG`` when set), so tests can count what went through.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading


def join(sock: socket.socket) -> None:
    """Copy stdin to ``sock`` and ``sock`` to stdout until the far side closes."""

    def upstream() -> None:
        try:
            while data := os.read(0, 65536):
                sock.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)

    threading.Thread(target=upstream, daemon=True).start()
    try:
        while data := sock.recv(65536):
            os.write(1, data)
    except OSError:
        pass


def connect(host: str, port: int) -> socket.socket:
    try:
        return socket.create_connection((host, port), timeout=10)
    except OSError as e:
        sys.stderr.write(f"relay: cannot reach {host}:{port}: {e.strerror or e}\n")
        sys.exit(1)


def hop(host: str, port: str) -> None:
    sock = connect(host, int(port))
    sock.settimeout(None)
    join(sock)


def via(gate_host: str, gate_port: str, host: str, port: str) -> None:
    sock = connect(gate_host, int(gate_port))
    sock.settimeout(None)
    sock.sendall(f"{host} {port}\n".encode())
    join(sock)


def _first_line(conn: socket.socket) -> tuple[str, str] | None:
    line = b""
    while not line.endswith(b"\n") and len(line) < 256:
        chunk = conn.recv(1)
        if not chunk:
            return None
        line += chunk
    words = line.decode().split()
    return (words[0], words[1]) if len(words) == 2 else None


def gate(listen: str, nspid: str, fixed: list[str]) -> None:
    server = socket.socket()
    server.bind((listen, 0))
    server.listen(64)
    print(f"ready {server.getsockname()[1]}", flush=True)
    script = os.path.abspath(__file__)
    record = os.environ.get("RELAY_LOG")

    def serve(conn: socket.socket) -> None:
        with conn:
            target = (fixed[0], fixed[1]) if fixed else _first_line(conn)
            if target is None:
                return
            if record:
                with open(record, "a") as f:
                    f.write(f"{target[0]} {target[1]}\n")
            argv = ["nsenter", "-t", nspid, "-n", sys.executable, script, "hop", *target]
            subprocess.run(argv, stdin=conn.fileno(), stdout=conn.fileno(), check=False)

    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def main(argv: list[str]) -> None:
    verb, *args = argv
    if verb == "hop":
        hop(*args)
    elif verb == "via":
        via(*args)
    elif verb == "gate":
        gate(args[0], args[1], args[2:])
    else:
        sys.exit(f"relay: unknown verb {verb!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
