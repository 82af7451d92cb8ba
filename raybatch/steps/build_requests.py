"""Build one chunk's Messages request from its rendered pages, with its exact encoded size.

A page goes as a ``Page N:`` text block (see ``raybatch.claude.pagetext``) and, unless the modality
sends it as text only, its image. The size is what the request adds to a Message Batches create body
as it is sent (``batch_entry``, the encoding the anthropic SDK's ``openapi_dumps`` uses: compact,
UTF-8), so the packer can count bytes without encoding a batch twice.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from raybatch.classes import default_classes
from raybatch.classes.render import AnswerSpec, answer_spec
from raybatch.classes.settings import classes_of
from raybatch.claude.answer import PROMPT_VERSION
from raybatch.claude.emulator.tokens import IMAGE_TOKEN_CAP, estimate_input_tokens
from raybatch.claude.pagetext import page_text_block
from raybatch.claude.prompt import closing_instruction
from raybatch.claude.records import PreparedRequest
from raybatch.errors import InvalidRequest
from raybatch.ids import custom_id, processing_key
from raybatch.models import PageText, RenderedPage, TextSource
from raybatch.settings import CLAUDE_MAX_LONG_EDGE, Modality, PrepareSettings, RequestSettings

MAX_PAGES = 8
MAX_IMAGE_BYTES = 3_750_000  # 5 MB once base64-encoded: the API's per-image limit, read strictly
MIN_TEXT_ONLY_CHARS = 40  # fewer letters and digits than this is not enough to read a page by alone
EPHEMERAL = {"type": "ephemeral"}
_MAGIC = {"image/jpeg": (b"\xff\xd8\xff",), "image/webp": (b"RIFF",)}


@dataclass(frozen=True)
class RequestConfig:
    """Everything besides a source's bytes and the chunk's place that changes its request (and so its
    answer). Two chunks with the same bytes, place and fingerprint get the same answer: it is reused."""

    model: str
    max_tokens: int
    modality: Modality
    min_confidence: float
    ocr_engine: str = "none"  # the engine's name with its version, as the OCR cache keys it
    long_edge: int = CLAUDE_MAX_LONG_EDGE
    image_format: str = "jpeg"
    image_quality: int = 80
    emulated: bool = False  # answered by the built-in emulator: never mistaken for Claude's answer
    prompt_version: str = PROMPT_VERSION
    # the rendered prompt, schema and classes file: all three are in the fingerprint, so the key
    answer: AnswerSpec = field(default_factory=lambda: answer_spec(default_classes()))

    def fingerprint(self) -> str:
        """A canonical text of every field."""
        return _fingerprint(self)

    def key(self, sha256: str, n: int) -> str:
        """The processing key of chunk ``n`` of the source ``sha256`` under this configuration."""
        return processing_key(sha256, n, self.fingerprint())


@functools.lru_cache(maxsize=64)
def _fingerprint(config: RequestConfig) -> str:
    """``RequestConfig.fingerprint``, made once per configuration (a key is asked for each chunk)."""
    return json.dumps(asdict(config), sort_keys=True, default=str, separators=(",", ":"))


def request_config(
    prepare: PrepareSettings, claude: RequestSettings, min_confidence: float, ocr_engine: str
) -> RequestConfig:
    """The request configuration the settings and the OCR engine in use make."""
    return RequestConfig(
        model=claude.claude_model,
        max_tokens=claude.max_tokens,
        modality=prepare.page_modality,
        min_confidence=min_confidence,
        ocr_engine=ocr_engine,
        long_edge=prepare.page_long_edge,
        image_format=prepare.image_format,
        image_quality=prepare.image_quality,
        emulated=claude.raybatch_emulator,
        answer=answer_spec(classes_of(claude)),
    )


def build_request(
    job_id: int, n: int, sha256: str, pages: Sequence[RenderedPage], *, config: RequestConfig
) -> PreparedRequest:
    """Chunk ``n`` of job ``job_id`` as a prepared request; refuses pages it must not send."""
    _check_pages(pages, config.modality, config.min_confidence)
    cid = custom_id(job_id, n)
    content = _content(pages, config.modality, config.min_confidence)
    params: dict[str, Any] = {
        "model": config.model,
        "max_tokens": config.max_tokens,
        "system": [{"type": "text", "text": config.answer.system_prompt, "cache_control": EPHEMERAL}],
        "messages": [{"role": "user", "content": content}],
        "output_config": {"format": {"type": "json_schema", "schema": config.answer.schema}},
    }
    place = (cid, job_id, n, pages[0].page, pages[-1].page, config.key(sha256, n))
    return prepared_request(*place, params)


def prepared_request(
    request_custom_id: str,
    job_id: int,
    n: int,
    first_page: int,
    last_page: int,
    key: str,
    params: Mapping[str, Any],
) -> PreparedRequest:
    """A request with its params encoded as they are sent, its size and its input tokens."""
    encoded = encode_params(params)
    return PreparedRequest(
        custom_id=request_custom_id,
        job_id=job_id,
        n=n,
        first_page=first_page,
        last_page=last_page,
        processing_key=key,
        params_json=encoded,
        encoded_size=len(batch_entry(request_custom_id, encoded).encode()),
        input_tokens=estimate_input_tokens(params, IMAGE_TOKEN_CAP),
    )


def with_params(request: PreparedRequest, params: Mapping[str, Any]) -> PreparedRequest:
    """``request`` with other params (encoded, sized and counted again)."""
    place = (request.custom_id, request.job_id, request.n, request.first_page, request.last_page)
    return prepared_request(*place, request.processing_key, params)


def encode_params(params: Mapping[str, Any]) -> str:
    """Params as a batch body carries them: compact, UTF-8, no NaN."""
    return json.dumps(params, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def batch_entry(request_custom_id: str, params_json: str) -> str:
    """One request of a batch create body, as it is sent (``params_json`` from ``encode_params``)."""
    return f'{{"custom_id":{json.dumps(request_custom_id, ensure_ascii=False)},"params":{params_json}}}'


def sends_image(text: PageText, modality: Modality, min_confidence: float) -> bool:
    """Whether a page goes with its image, or as its text alone."""
    if modality is Modality.IMAGES:
        return True
    if modality is Modality.TEXT:
        return not text.text.strip()
    if sum(ch.isalnum() for ch in text.text) < MIN_TEXT_ONLY_CHARS:
        return True
    confident_ocr = text.source is TextSource.OCR and text.confidence >= min_confidence
    return not (text.source is TextSource.LAYER or confident_ocr)


def _content(pages: Sequence[RenderedPage], modality: Modality, min_confidence: float) -> list[dict]:
    blocks: list[dict[str, Any]] = []
    for page in pages:
        blocks.append(page_text_block(page.page, page.text.text))
        if sends_image(page.text, modality, min_confidence):
            blocks.append(_image_block(page))
    blocks.append({"type": "text", "text": closing_instruction(pages[0].page, pages[-1].page)})
    return blocks


def _image_block(page: RenderedPage) -> dict[str, Any]:
    data = base64.b64encode(page.image or b"").decode("ascii")
    return {"type": "image", "source": {"type": "base64", "media_type": page.media_type, "data": data}}


def _check_pages(pages: Sequence[RenderedPage], modality: Modality, min_confidence: float) -> None:
    if not 1 <= len(pages) <= MAX_PAGES:
        raise InvalidRequest(f"a chunk holds 1 to {MAX_PAGES} pages, got {len(pages)}")
    numbers = [page.page for page in pages]
    if numbers != list(range(numbers[0], numbers[0] + len(numbers))) or numbers[0] < 1:
        raise InvalidRequest(f"chunk pages must be consecutive from 1 up, got {numbers}")
    for page in pages:
        if page.image is not None:
            _check_image(page, page.image)
        elif sends_image(page.text, modality, min_confidence):
            raise InvalidRequest(f"page {page.page}: it goes with its image, and none was drawn")


def _check_image(page: RenderedPage, image: bytes) -> None:
    magic = _MAGIC.get(page.media_type)
    if magic is None:
        raise InvalidRequest(f"page {page.page}: media type {page.media_type!r} is not JPEG or WebP")
    if not image.startswith(magic) or (page.media_type == "image/webp" and image[8:12] != b"WEBP"):
        raise InvalidRequest(f"page {page.page}: image bytes are not {page.media_type}")
    if max(page.width, page.height) > CLAUDE_MAX_LONG_EDGE or min(page.width, page.height) < 1:
        raise InvalidRequest(
            f"page {page.page}: image is {page.width}x{page.height}, "
            f"long edge must be 1..{CLAUDE_MAX_LONG_EDGE} px"
        )
    if len(image) > MAX_IMAGE_BYTES:
        raise InvalidRequest(f"page {page.page}: image is {len(image)} bytes, over {MAX_IMAGE_BYTES}")
