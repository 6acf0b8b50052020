"""A local OS Login endpoint that refuses every request (403 PERMISSION_DENIED) and counts
them: gcloud's ``describe-profile`` is pointed at it with
``CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN``."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.support.http_stub import Quiet, serving


@dataclass
class RefusingOsLogin:
    url: str = ""
    hits: list[str] = field(default_factory=list)
    delay: float = 0.0  # seconds before each answer (a slow network)


@contextlib.contextmanager
def refusing_oslogin(message: str = "OS Login is refused here") -> Iterator[RefusingOsLogin]:
    state = RefusingOsLogin()
    error = {"code": 403, "message": message, "status": "PERMISSION_DENIED"}
    body = json.dumps({"error": error}).encode()

    class Handler(Quiet):
        def do_GET(self) -> None:
            state.hits.append(self.path)
            time.sleep(state.delay)
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving(Handler) as port:
        state.url = f"http://127.0.0.1:{port}/"
        yield state
