"""The Lambda Runtime API one execution environment's bootstrap talks to.

A ``provided.*`` bootstrap asks ``GET /2018-06-01/runtime/invocation/next``
for its next event (the call blocks until there is one) and answers with
``POST .../invocation/<request id>/response`` or ``.../error``; a bootstrap
that cannot initialise posts ``/runtime/init/error``. On AWS (and in
LocalStack's containers) the init process serves this; here the executor
serves it on 127.0.0.1, one server per environment, and the bootstrap finds it
through ``AWS_LAMBDA_RUNTIME_API``.
"""

import dataclasses
import logging
import queue
import re
import threading
from concurrent.futures import Future
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = logging.getLogger(__name__)

PREFIX = "/2018-06-01/runtime"
_RESULT_PATH = re.compile(rf"^{PREFIX}/invocation/(?P<id>[^/]+)/(?P<kind>response|error)$")


@dataclasses.dataclass
class Event:
    """One invocation handed to the bootstrap."""

    request_id: str
    payload: bytes
    function_arn: str
    deadline_ms: int
    trace_id: str | None = None


@dataclasses.dataclass
class Outcome:
    """What the bootstrap posted for an event."""

    payload: bytes
    is_error: bool


class RuntimeAPI:
    """Serves the Runtime API of one execution environment on 127.0.0.1."""

    def __init__(self, name: str):
        self.name = name
        self.ready = threading.Event()  # the bootstrap asked for its first event
        self.init_error: bytes | None = None
        self._events: queue.Queue[Event | None] = queue.Queue()
        self._outcomes: dict[str, Future[Outcome]] = {}
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's name
                LOG.debug("runtime api %s: " + format, api.name, *args)

            def _body(self) -> bytes:
                # aws-lambda-go streams its answer: chunked, no length.
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    parts = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return b"".join(parts)
                        parts.append(self.rfile.read(size))
                        self.rfile.readline()  # the CRLF after the chunk
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _reply(self, status: HTTPStatus, body: bytes = b"", headers: dict[str, str] | None = None):
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if body:
                    self.wfile.write(body)

            def do_GET(self):
                if self.path != f"{PREFIX}/invocation/next":
                    return self._reply(HTTPStatus.NOT_FOUND)
                api.ready.set()
                event = api._events.get()
                if event is None:  # the environment is stopping
                    self.close_connection = True
                    return self._reply(HTTPStatus.GONE)
                headers = {
                    "Content-Type": "application/json",
                    "Lambda-Runtime-Aws-Request-Id": event.request_id,
                    "Lambda-Runtime-Deadline-Ms": str(event.deadline_ms),
                    "Lambda-Runtime-Invoked-Function-Arn": event.function_arn,
                }
                if event.trace_id:
                    headers["Lambda-Runtime-Trace-Id"] = event.trace_id
                self._reply(HTTPStatus.OK, event.payload, headers)

            def do_POST(self):
                body = self._body()
                if self.path == f"{PREFIX}/init/error":
                    api.init_error = body or b"{}"
                    return self._reply(HTTPStatus.ACCEPTED, b'{"status":"OK"}')
                m = _RESULT_PATH.match(self.path)
                if not m:
                    return self._reply(HTTPStatus.NOT_FOUND)
                with api._lock:
                    fut = api._outcomes.pop(m["id"], None)
                if fut is None:
                    return self._reply(
                        HTTPStatus.BAD_REQUEST,
                        b'{"errorType":"InvalidRequestID","errorMessage":"unknown or already answered request id"}',
                    )
                fut.set_result(Outcome(payload=body, is_error=m["kind"] == "error"))
                self._reply(HTTPStatus.ACCEPTED, b'{"status":"OK"}')

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"runtime-api-{name}", daemon=True
        )

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    def start(self) -> None:
        self._thread.start()

    def submit(self, event: Event) -> Future[Outcome]:
        """Queues event for the bootstrap; the future resolves with its answer."""
        fut: Future[Outcome] = Future()
        with self._lock:
            self._outcomes[event.request_id] = fut
        self._events.put(event)
        return fut

    def forget(self, request_id: str) -> None:
        with self._lock:
            self._outcomes.pop(request_id, None)

    def stop(self) -> None:
        self._events.put(None)  # releases a bootstrap waiting for its next event
        self._server.shutdown()
        self._server.server_close()
