"""The emulator on a socket: a threaded HTTP/1.1 server around ``EmulatorApp``.

Use it in-process (``with EmulatorServer(config) as server: ... server.base_url``) or as a blocking
service (``serve(host, port, config)``, behind ``raybatch emulator --port P``).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from raybatch.claude.emulator import wire
from raybatch.claude.emulator.api import ANSWERS_PATH, Call, EmulatorApp, Reply, error_reply, json_reply
from raybatch.claude.emulator.config import EmulatorConfig, Faults
from raybatch.units import MIB

log = logging.getLogger(__name__)
_DRAIN_CHUNK = MIB
_POLL_SECONDS = 0.02  # how soon serve_forever notices stop()
_JOIN_SECONDS = 10.0  # longest wait for a connection thread still answering at stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and a body cut short is visible as such
    server: _HttpServer
    timeout = 120  # an idle kept-alive connection is dropped after this many seconds
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("emulator: " + format, *args)

    def _serve(self, method: str) -> None:
        app, request_id = self.server.app, wire.new_id("req")
        url = urlsplit(self.path)
        length = int(self.headers.get("content-length") or 0)
        if method == "GET" and url.path == ANSWERS_PATH:
            return self._send(json_reply(200, app.answers()), request_id)
        routed = app.route(method, url.path)
        if routed is None:
            self._drain(length)
            return self._send(error_reply(404, "not_found_error", None, request_id), request_id)
        endpoint, path_args = routed
        headers = {name.lower(): value for name, value in self.headers.items()}
        refusal = app.refuse(endpoint, headers, request_id)
        if refusal is None and length > app.body_limit(endpoint):
            refusal = error_reply(413, "request_too_large", None, request_id)
        if refusal is not None:
            self._drain(length)
            return self._send(refusal, request_id)
        call = Call(
            endpoint=endpoint,
            path_args=path_args,
            query=dict(parse_qsl(url.query)),
            headers=headers,
            body=self.rfile.read(length),
            base_url=self._base_url(),
            request_id=request_id,
        )
        self._send(app.handle(call), request_id)

    def _base_url(self) -> str:
        public = self.server.app.config.public_url
        host = self.headers.get("host") or _host_port(self.server)
        return (public or f"http://{host}").rstrip("/")

    def _drain(self, length: int) -> None:
        while length > 0:
            chunk = self.rfile.read(min(length, _DRAIN_CHUNK))
            if not chunk:
                break
            length -= len(chunk)

    def _send(self, reply: Reply, request_id: str) -> None:
        latency = self.server.app.config.faults.latency
        if latency > 0:
            self.server.app.config.sleep(latency)
        if reply.drop:  # the work is done, but the client never hears of it
            self.close_connection = True
            return
        self.send_response(reply.status)
        self.send_header("content-type", reply.content_type)
        self.send_header("content-length", str(len(reply.body)))
        self.send_header("request-id", request_id)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if reply.cut_after is None:
            self.wfile.write(reply.body)
            return
        self.wfile.write(reply.body[: reply.cut_after])
        self.wfile.flush()
        self.close_connection = True


class _HttpServer(ThreadingHTTPServer):
    def __init__(self, address: tuple[str, int], app: EmulatorApp) -> None:
        super().__init__(address, _Handler)
        self.app = app
        self._open: set[socket.socket] = set()
        self._connection_threads: list[threading.Thread] = []  # socketserver joins no daemon threads: we do
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="claude-emulator-connection",
            daemon=True,
        )
        with self._open_lock:
            self._connection_threads = [t for t in self._connection_threads if t.is_alive()] + [thread]
        thread.start()

    def join_threads(self, timeout: float) -> None:
        """Wait for the connection threads to end."""
        with self._open_lock:
            threads, self._connection_threads = self._connection_threads, []
        for thread in threads:
            thread.join(timeout)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        with self._open_lock:
            self._open.add(sock)
        return sock, address

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End every open connection, so handler threads waiting on idle keep-alives return."""
        with self._open_lock:
            open_sockets = list(self._open)
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("emulator: connection from %s ended with an error", client_address, exc_info=True)


class EmulatorServer:
    """The Anthropic API emulator on a local port; ``config`` and ``faults`` stay live while it runs."""

    def __init__(
        self, config: EmulatorConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.config = config or EmulatorConfig()
        self.app = EmulatorApp(self.config)
        self._address = (host, port)
        self._http: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def faults(self) -> Faults:
        """The live fault knobs."""
        return self.config.faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        self.config.faults = faults

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the running server: the SDK's ``base_url``."""
        if self._http is None:
            raise RuntimeError("the emulator is not running")
        return f"http://{_host_port(self._http)}"

    def start(self) -> EmulatorServer:
        """Bind and serve in a background thread."""
        if self._http is None:
            self._http = _HttpServer(self._address, self.app)
            self._thread = threading.Thread(
                target=self._http.serve_forever, args=(_POLL_SECONDS,), name="claude-emulator", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end open connections and join every thread."""
        http, thread = self._http, self._thread
        self._http = self._thread = None
        if http is None:
            return
        http.shutdown()
        http.close_connections()
        http.server_close()
        http.join_threads(_JOIN_SECONDS)
        if thread is not None:
            thread.join()

    @property
    def running(self) -> bool:
        """True while the server thread serves."""
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _host_port(http: _HttpServer) -> str:
    host, port = http.server_address[:2]
    return f"{host!s}:{port}" if isinstance(host, str) else f"{host.decode()}:{port}"


def serve(host: str, port: int, config: EmulatorConfig) -> None:
    """Run the emulator until interrupted (SIGINT or SIGTERM, handled from before it says where
    it listens, so a signal sent as soon as it has said so always stops it cleanly)."""
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    server = EmulatorServer(config, host=host, port=port).start()
    try:
        log.info("Anthropic API emulator listening on %s", server.base_url)
        print(f"Anthropic API emulator listening on {server.base_url}", flush=True)
        while not stopping.wait(0.5) and server.running:
            pass
    finally:
        server.stop()
