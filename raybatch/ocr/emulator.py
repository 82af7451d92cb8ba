"""An emulated Cloud Vision endpoint: ``POST /v1/images:annotate`` on loopback, in Vision's REST shape.

The real google-cloud-vision client talks to it (REST transport, ``api_endpoint=emulator.url``,
anonymous credentials). It reads each image with a local engine, answers with Vision's
``fullTextAnnotation`` / ``textAnnotations`` (vertex order carrying the page's orientation), keeps
Vision's limits (16 images, 10 MB a request), and injects faults: latency, 429, 503, malformed
bodies, per-image errors, by count (the next N) or by share (a seeded random fraction), changeable
while it runs.

    with VisionEmulator() as emulator:
        GoogleVisionOcr(endpoint=emulator.url).read(pages)
"""

from __future__ import annotations

import argparse
import base64
import binascii
import io
import json
import random
import threading
import time
from dataclasses import dataclass, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from PIL import Image

from raybatch.errors import RaybatchError
from raybatch.ocr.port import OcrEngine, PageImage
from raybatch.ocr.vision import VISION_MAX_IMAGES, VISION_MAX_REQUEST_BYTES
from raybatch.ocr.visionwire import annotate_response, error_body

ANNOTATE_PATH = "/v1/images:annotate"
_TEXT_FEATURES = {"TEXT_DETECTION", "DOCUMENT_TEXT_DETECTION", 5, 11}


@dataclass
class VisionFaults:
    """What goes wrong: counts apply to the next requests first, then shares at random."""

    latency: float = 0.0  # seconds before every answer
    rate_limited: int = 0  # next N requests answer 429
    unavailable: int = 0  # next N requests answer 503
    malformed: int = 0  # next N requests answer 200 with a body that is not JSON
    image_unavailable: int = 0  # next N images answer a per-image UNAVAILABLE error inside a 200
    rate_limited_share: float = 0.0
    unavailable_share: float = 0.0
    malformed_share: float = 0.0


class HttpReply:
    """A status and a body to send."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body

    @classmethod
    def json(cls, status: int, payload: Any) -> HttpReply:
        """A JSON reply."""
        return cls(status, json.dumps(payload, ensure_ascii=False).encode())


class VisionEmulator:
    """The endpoint; a context manager that serves on a free loopback port."""

    def __init__(
        self, engine: OcrEngine | None = None, *, host: str = "127.0.0.1", port: int = 0, seed: int = 0
    ) -> None:
        if engine is None:
            from raybatch.ocr import local_engine

            engine = local_engine()
        if engine is None:
            raise RuntimeError("the Vision emulator needs a local OCR engine to read images")
        self.engine = engine
        self.faults = VisionFaults()
        self.images_per_request: list[int] = []  # one entry per request answered 200 with results
        self.requests_received = 0
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL for ``client_options={"api_endpoint": url}``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def set_faults(self, **changes: Any) -> None:
        """Change fault knobs while serving, e.g. ``set_faults(unavailable=2, latency=0.1)``."""
        known = {f.name for f in fields(VisionFaults)}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown fault knobs: {sorted(unknown)}")
        with self._lock:
            for key, value in changes.items():
                setattr(self.faults, key, value)

    def start(self) -> VisionEmulator:
        """Serve in a background thread."""
        serve = self._server.serve_forever
        self._thread = threading.Thread(target=serve, name="vision-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> VisionEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def handle(self, path: str, body: bytes) -> HttpReply:
        """One HTTP request → its reply (faults first, then Vision's checks, then the engine)."""
        with self._lock:
            self.requests_received += 1
        if urlsplit(path).path != ANNOTATE_PATH:
            return HttpReply.json(404, error_body(404, f"no such method: {urlsplit(path).path}"))
        fault = self._take_fault()
        if fault is not None:
            return fault
        try:
            requests = json.loads(body).get("requests", [])
        except (ValueError, AttributeError):
            return HttpReply.json(400, error_body(400, "Invalid JSON payload received."))
        if len(body) > VISION_MAX_REQUEST_BYTES:
            limit = f"Request payload size exceeds the limit: {VISION_MAX_REQUEST_BYTES} bytes."
            return HttpReply.json(400, error_body(400, limit))
        if len(requests) > VISION_MAX_IMAGES:
            return HttpReply.json(400, error_body(400, f"At most {VISION_MAX_IMAGES} images per request."))
        responses = [self._annotate(n, r) for n, r in enumerate(requests, start=1)]
        with self._lock:
            self.images_per_request.append(len(requests))
        return HttpReply.json(200, {"responses": responses})

    def _take_fault(self) -> HttpReply | None:
        with self._lock:
            f = self.faults
            latency = f.latency
            kind = None
            for name in ("rate_limited", "unavailable", "malformed"):
                if getattr(f, name) > 0:
                    setattr(f, name, getattr(f, name) - 1)
                    kind = name
                    break
            else:
                for name in ("rate_limited", "unavailable", "malformed"):
                    if self._random.random() < getattr(f, f"{name}_share"):
                        kind = name
                        break
        if latency:
            time.sleep(latency)
        if kind == "rate_limited":
            return HttpReply.json(429, error_body(429, "Quota exceeded for quota metric 'Requests'."))
        if kind == "unavailable":
            return HttpReply.json(503, error_body(503, "The service is currently unavailable."))
        if kind == "malformed":
            return HttpReply(200, b'{"responses": [{"fullTextAnnotation": {"text": ')
        return None

    def _annotate(self, n: int, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self.faults.image_unavailable > 0:
                self.faults.image_unavailable -= 1
                return {"error": {"code": 14, "message": "The service is currently unavailable."}}
        wanted = {f.get("type") for f in request.get("features", [])}
        try:
            raw = base64.b64decode(request.get("image", {}).get("content", ""), validate=True)
            with Image.open(io.BytesIO(raw)) as img:
                width, height = img.size
            text = self.engine.read([PageImage(page=n, image=raw)])[0]
        except (binascii.Error, ValueError, OSError, RaybatchError):
            return {"error": {"code": 3, "message": "Bad image data."}}
        if not wanted & _TEXT_FEATURES:
            return {}
        return annotate_response(text.text, text.rotation, width, height, text.confidence)


def _handler(emulator: VisionEmulator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            reply = emulator.handle(self.path, self.rfile.read(length))
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, format: str, *args: Any) -> None:  # requests are not logged
            return

    return Handler


def main(argv: list[str] | None = None) -> None:
    """``python -m raybatch.ocr.emulator --port 8089``: serve until interrupted."""
    parser = argparse.ArgumentParser(description="Emulated Cloud Vision endpoint on loopback")
    parser.add_argument("--port", type=int, default=8089)
    args = parser.parse_args(argv)
    with VisionEmulator(port=args.port) as emulator:
        print(f"Vision emulator at {emulator.url} (engine {emulator.engine.name})", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
