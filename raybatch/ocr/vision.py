"""Google Cloud Vision through the real google-cloud-vision client (REST transport).

DOCUMENT_TEXT_DETECTION, pages packed into ``batch_annotate_images`` requests within Vision's
limits (16 images and 10 MB of JSON a request), a few requests in flight at once. Transient
failures (429, 5xx, timeouts, malformed bodies) are retried here with backoff, never by the SDK;
a page Vision rejects fails its job with the reason. Credentials come the standard way
(GOOGLE_APPLICATION_CREDENTIALS or ADC); a plain ``http://`` endpoint (the emulator) is anonymous.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from raybatch.errors import (
    AuthenticationFailed,
    ConfigError,
    InvalidRequest,
    InvalidSource,
    RateLimited,
    UpstreamUnavailable,
)
from raybatch.models import PageText, ocr_origin
from raybatch.ocr.port import PageImage
from raybatch.ocr.visionwire import rotation_from_boxes
from raybatch.retry import Backoff, retry_call
from raybatch.units import MIB

VISION_MAX_IMAGES = 16  # images per batch_annotate_images request
VISION_MAX_REQUEST_BYTES = 10 * MIB  # JSON request size
VISION_MAX_IMAGE_BYTES = 20 * MIB  # one image file
DEFAULT_BACKOFF = Backoff(initial=1.0, factor=2.0, cap=30.0, jitter=0.2)
_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_PER_IMAGE_OVERHEAD = 256  # JSON around one base64 image
# google.rpc codes in a per-image error that may pass: RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE, DEADLINE.
_TRANSIENT_CODES = {4, 8, 13, 14}


def encoded_size(page: PageImage) -> int:
    """Bytes one page adds to a request's JSON: its base64 image plus the fields around it."""
    return 4 * ((len(page.image) + 2) // 3) + _PER_IMAGE_OVERHEAD


def plan_requests(
    pages: Sequence[PageImage], max_images: int = VISION_MAX_IMAGES, max_bytes: int = VISION_MAX_REQUEST_BYTES
) -> list[list[PageImage]]:
    """Pages packed in order into requests of at most ``max_images`` images and ``max_bytes`` of JSON."""
    requests: list[list[PageImage]] = []
    size = 0
    for page in pages:
        need = encoded_size(page)
        if len(page.image) > VISION_MAX_IMAGE_BYTES or need > max_bytes:
            raise InvalidSource(f"page {page.page}: image of {len(page.image)} bytes exceeds Vision's limits")
        if not requests or len(requests[-1]) >= max_images or size + need > max_bytes:
            requests.append([])
            size = 0
        requests[-1].append(page)
        size += need
    return requests


class GoogleVisionOcr:
    """Document text detection on Cloud Vision (or the emulated endpoint); picklable."""

    def __init__(
        self,
        *,
        endpoint: str | None = None,
        concurrency: int = 4,
        batch_pages: int = VISION_MAX_IMAGES,
        attempts: int = 5,
        backoff: Backoff = DEFAULT_BACKOFF,
        timeout: float = 120.0,
        language_hints: Sequence[str] = ("en", "ru"),
        credentials_file: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.batch_pages = min(batch_pages, VISION_MAX_IMAGES)
        self.attempts = attempts
        self.backoff = backoff
        self.timeout = timeout
        self.language_hints = tuple(language_hints)
        self.credentials_file = credentials_file  # else GOOGLE_APPLICATION_CREDENTIALS / ADC, the SDK's way
        self.sleep = sleep
        self.name = "google-vision-v1/builtin-stable" + _endpoint_tag(endpoint)
        self._client: Any = None

    def read(self, pages: Sequence[PageImage]) -> list[PageText]:
        """Text, confidence and upright rotation for each page, in order."""
        requests = plan_requests(pages, self.batch_pages)
        if requests:
            self.client()  # made once, here, rather than raced for by the pool's threads
        if len(requests) <= 1 or self.concurrency == 1:
            results = [self._read_request(r) for r in requests]
        else:
            with ThreadPoolExecutor(min(self.concurrency, len(requests)), "vision") as pool:
                results = list(pool.map(self._read_request, requests))
        return [text for chunk in results for text in chunk]

    def _read_request(self, pages: list[PageImage]) -> list[PageText]:
        """One request's pages, retrying only those not yet answered."""
        done: dict[int, PageText] = {}

        def attempt() -> None:
            todo = [i for i in range(len(pages)) if i not in done]
            responses = self._annotate([pages[i] for i in todo])
            failure: UpstreamUnavailable | None = None
            for i, response in zip(todo, responses, strict=True):
                try:
                    done[i] = self._page_text(pages[i], response)
                except UpstreamUnavailable as exc:
                    failure = exc
            if failure is not None:
                raise failure

        first, last = pages[0].page, pages[-1].page
        what = f"Vision request for pages {first}-{last}"
        retry_call(attempt, attempts=self.attempts, backoff=self.backoff, sleep=self.sleep, what=what)
        return [done[i] for i in range(len(pages))]

    def _annotate(self, pages: Sequence[PageImage]) -> list[Any]:
        from google.cloud import vision

        feature = vision.Feature(type_=vision.Feature.Type.DOCUMENT_TEXT_DETECTION)
        context = vision.ImageContext(language_hints=list(self.language_hints))
        request = vision.BatchAnnotateImagesRequest(
            requests=[
                vision.AnnotateImageRequest(
                    image=vision.Image(content=p.image), features=[feature], image_context=context
                )
                for p in pages
            ]
        )
        with translate_errors():
            # retry=None: the SDK's own retries would hide failures from our budget and clock.
            reply = self.client().batch_annotate_images(request=request, retry=None, timeout=self.timeout)
        if len(reply.responses) != len(pages):
            raise UpstreamUnavailable(
                f"Vision sent a malformed response: {len(reply.responses)} answers for {len(pages)} images"
            )
        return list(reply.responses)

    def _page_text(self, page: PageImage, response: Any) -> PageText:
        if response.error.code:
            reason = f"page {page.page}: Vision error {response.error.code}: {response.error.message[:200]}"
            if response.error.code in _TRANSIENT_CODES:
                raise UpstreamUnavailable(reason)
            raise InvalidSource(reason)
        annotation = response.full_text_annotation
        words = response.text_annotations
        text = annotation.text or (words[0].description if words else "")
        return PageText(
            page=page.page,
            text=text.strip(),
            origin=ocr_origin(self.name),
            confidence=round(_confidence(annotation, text), 4),
            rotation=_rotation(annotation),
        )

    def client(self) -> Any:
        """The ImageAnnotatorClient, made on first use (REST transport)."""
        if self._client is None:
            self._client = _make_client(self.endpoint, self.credentials_file)
        return self._client

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}


def _endpoint_tag(endpoint: str | None) -> str:
    """Keeps cache entries of other endpoints apart; every emulator (any port) shares one tag."""
    if not endpoint:
        return ""
    if endpoint.startswith("http://"):
        return "@emulator"
    return "@" + endpoint.split("://")[-1].rstrip("/")


def _make_client(endpoint: str | None, credentials_file: str | None) -> Any:
    from google.api_core.client_options import ClientOptions
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import vision

    options = ClientOptions(api_endpoint=endpoint) if endpoint else None
    try:
        return vision.ImageAnnotatorClient(
            transport="rest", client_options=options, credentials=_credentials(endpoint, credentials_file)
        )
    except DefaultCredentialsError as exc:
        raise AuthenticationFailed(
            "no Google credentials: set GOOGLE_APPLICATION_CREDENTIALS "
            "or run gcloud auth application-default login"
        ) from exc


def _credentials(endpoint: str | None, credentials_file: str | None) -> Any:
    """Anonymous for a plain-http emulator; the named key file; else None, so the client finds ADC."""
    import google.auth
    from google.auth.credentials import AnonymousCredentials
    from google.auth.exceptions import DefaultCredentialsError

    if endpoint is not None and endpoint.startswith("http://"):
        return AnonymousCredentials()
    if not credentials_file:
        return None
    try:
        credentials, _ = google.auth.load_credentials_from_file(credentials_file, scopes=[_SCOPE])
    except DefaultCredentialsError as exc:
        reason = f"GOOGLE_APPLICATION_CREDENTIALS: not a usable key file ({type(exc).__name__})"
        raise ConfigError(reason) from exc
    return credentials


def _confidence(annotation: Any, text: str) -> float:
    scores = [p.confidence for p in annotation.pages if p.confidence]
    scores = scores or [b.confidence for p in annotation.pages for b in p.blocks if b.confidence]
    if scores:
        return sum(scores) / len(scores)
    return 1.0 if text.strip() else 0.0


def _rotation(annotation: Any) -> int:
    """Orientation from the vertex order of the words (or blocks), weighted by their letters."""
    boxes = []
    for page in annotation.pages:
        for block in page.blocks:
            words = [w for para in block.paragraphs for w in para.words]
            for item, weight in [(w, len(w.symbols) or 1) for w in words] or [(block, 1)]:
                vertices = [(v.x, v.y) for v in item.bounding_box.vertices]
                boxes.append((vertices, float(weight)))
    return rotation_from_boxes(boxes)


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """google.api_core, requests and protobuf errors → raybatch errors (messages carry no text)."""
    from google.api_core import exceptions as gexc
    from google.protobuf.json_format import ParseError
    from requests import exceptions as rexc

    try:
        yield
    except gexc.TooManyRequests as exc:
        raise RateLimited(f"Vision rate limit (429): {exc.message[:200]}") from exc
    except (gexc.ServerError, gexc.DeadlineExceeded) as exc:
        raise UpstreamUnavailable(f"Vision unavailable ({exc.code}): {exc.message[:200]}") from exc
    except (gexc.Unauthorized, gexc.Forbidden) as exc:
        raise AuthenticationFailed(f"Vision refused the credentials ({exc.code})") from exc
    except gexc.GoogleAPICallError as exc:
        raise InvalidRequest(f"Vision rejected the request ({exc.code}): {exc.message[:200]}") from exc
    except (rexc.ConnectionError, rexc.Timeout, rexc.ChunkedEncodingError) as exc:
        raise UpstreamUnavailable(f"Vision did not answer: {type(exc).__name__}") from exc
    except (ParseError, ValueError) as exc:
        raise UpstreamUnavailable(f"Vision sent a malformed response: {type(exc).__name__}") from exc
