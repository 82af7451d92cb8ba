"""Request builder: params shape, modality, refusals, and the exact size the SDK sends."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest
from PIL import Image

from raybatch.claude.batch_client import AnthropicBatchClient, batch_body
from raybatch.claude.emulator.tokens import IMAGE_TOKEN_CAP, estimate_input_tokens
from raybatch.claude.pagetext import pages_from_params
from raybatch.claude.prompt import SYSTEM_PROMPT
from raybatch.claude.records import PreparedRequest
from raybatch.claude.schema import answer_schema
from raybatch.cost import EXPECTED_OUTPUT_TOKENS_PER_PAGE, cost_usd, prices_for
from raybatch.errors import InvalidRequest
from raybatch.ids import processing_key
from raybatch.models import PageText, ProcessingMode, RenderedPage, TextSource, Usage, ocr_origin
from raybatch.settings import ClaudeSettings, Modality
from raybatch.spend import expected_cost
from raybatch.steps.build_requests import (
    MIN_TEXT_ONLY_CHARS,
    RequestConfig,
    build_request,
    sends_image,
    with_params,
)
from raybatch.steps.pack import ENVELOPE_BYTES, batch_body_size

SHA = "ab" * 32
LONG_TEXT = 'Счёт на оплату № 17 от 01.03.2024\nООО «Ромашка» "quoted" \\ back\tslash — €'


def _image(fmt: str = "JPEG", size: tuple[int, int] = (60, 80)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, "white").save(out, format=fmt)
    return out.getvalue()


JPEG = _image()


def page(
    n: int, text: str = LONG_TEXT, origin: str = "layer", confidence: float = 1.0, **kw: Any
) -> RenderedPage:
    fields: dict[str, Any] = {"image": JPEG, "media_type": "image/jpeg", "width": 60, "height": 80}
    fields.update(kw)
    return RenderedPage(
        page=n, text=PageText(page=n, text=text, origin=origin, confidence=confidence), **fields
    )


def build(pages: list[RenderedPage], modality: Modality = Modality.IMAGES, job_id: int = 12, n: int = 1):
    config = RequestConfig(model="claude-test", max_tokens=4096, modality=modality, min_confidence=0.8)
    return build_request(job_id, n, SHA, pages, config=config)


def test_params_carry_prompt_pages_images_and_schema() -> None:
    request = build([page(9), page(10, text="")])
    params = request.params
    assert (request.custom_id, request.first_page, request.last_page) == ("job_12_batch_1", 9, 10)
    config = RequestConfig(model="claude-test", max_tokens=4096, modality=Modality.IMAGES, min_confidence=0.8)
    assert request.processing_key == processing_key(SHA, 1, config.fingerprint())
    assert params["model"] == "claude-test" and params["max_tokens"] == 4096
    assert params["system"] == [
        {"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}
    ]
    assert params["output_config"] == {"format": {"type": "json_schema", "schema": answer_schema()}}
    content = params["messages"][0]["content"]
    assert [block["type"] for block in content] == ["text", "image", "text", "image", "text"]
    assert content[1]["source"] == {
        "type": "base64", "media_type": "image/jpeg", "data": base64.b64encode(JPEG).decode(),
    }  # fmt: skip
    assert pages_from_params(params) == [(9, LONG_TEXT), (10, "")]


@pytest.mark.parametrize(
    ("modality", "text", "origin", "confidence", "image"),
    [
        (Modality.IMAGES, LONG_TEXT, "layer", 1.0, True),
        (Modality.TEXT, LONG_TEXT, "ocr:rapidocr", 0.1, False),
        (Modality.TEXT, "  \n", "none", 0.0, True),
        (Modality.TEXT, "ab", "layer", 1.0, False),
        (Modality.ADAPTIVE, LONG_TEXT, "layer", 1.0, False),
        (Modality.ADAPTIVE, LONG_TEXT, "ocr:rapidocr", 0.8, False),
        (Modality.ADAPTIVE, LONG_TEXT, "ocr:rapidocr", 0.79, True),
        (Modality.ADAPTIVE, LONG_TEXT, "none", 1.0, True),
        (Modality.ADAPTIVE, "x" * (MIN_TEXT_ONLY_CHARS - 1), "layer", 1.0, True),
        (Modality.ADAPTIVE, "x" * MIN_TEXT_ONLY_CHARS, "layer", 1.0, False),
    ],
)
def test_modality_decides_whether_the_image_goes(
    modality: Modality, text: str, origin: str, confidence: float, image: bool
) -> None:
    page_text = PageText(page=1, text=text, origin=origin, confidence=confidence)
    assert sends_image(page_text, modality, 0.8) is image
    content = build([page(1, text, origin, confidence)], modality).params["messages"][0]["content"]
    assert any(block["type"] == "image" for block in content) is image


@pytest.mark.parametrize(
    ("pages", "match"),
    [
        ([], "1 to 8 pages"),
        ([page(n) for n in range(1, 10)], "1 to 8 pages"),
        ([page(1), page(3)], "consecutive"),
        ([page(0)], "consecutive"),
        ([page(1, width=1569)], "long edge"),
        ([page(1, height=2000)], "long edge"),
        ([page(1, media_type="image/png", image=_image("PNG"))], "not JPEG or WebP"),
        ([page(1, media_type="image/webp")], "not image/webp"),
        ([page(1, image=b"\xff\xd8\xff" + b"\0" * 3_750_000)], "bytes, over"),
    ],
)
def test_refuses_what_it_must_not_send(pages: list[RenderedPage], match: str) -> None:
    with pytest.raises(InvalidRequest, match=match):
        build(pages)


def test_eight_webp_pages_at_the_size_limit_are_fine() -> None:
    webp = _image("WEBP")
    pages = [page(n, media_type="image/webp", image=webp, width=1568, height=1100) for n in range(17, 25)]
    request = build(pages)
    assert (request.first_page, request.last_page) == (17, 24)


def _capture_batch_body(requests: list[dict[str, Any]]) -> bytes:
    """The body the real SDK sends for batches.create, captured by a mock transport."""
    [sent] = _capture(lambda client: client.messages.batches.create(requests=requests))  # type: ignore[arg-type]
    return sent.read()


def _capture(call: Callable[[anthropic.Anthropic], object]) -> list[httpx2.Request]:
    """The requests the real SDK sends for ``call``, captured by a mock transport."""
    sent: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        request.read()
        sent.append(request)
        return httpx2.Response(200, json={
            "id": "msgbatch_1", "type": "message_batch", "processing_status": "in_progress",
            "request_counts": {"processing": 1, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "created_at": "2026-01-01T00:00:00Z", "expires_at": "2026-01-02T00:00:00Z",
            "ended_at": None, "cancel_initiated_at": None, "archived_at": None, "results_url": None,
        })  # fmt: skip

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    with anthropic.Anthropic(api_key="test", base_url="http://claude.test", http_client=http) as client:
        call(client)
    return sent


def test_the_batch_client_sends_the_body_and_headers_the_sdk_would() -> None:
    prepared = [
        build([page(1), page(2, text="")], n=0),
        build([page(3, text="«ёлка» \u2028")], Modality.TEXT, n=1),
    ]
    entries = [{"custom_id": r.custom_id, "params": dict(r.params)} for r in prepared]
    [sdk] = _capture(lambda client: client.messages.batches.create(requests=entries))  # type: ignore[arg-type]
    [ours] = _capture(
        lambda client: AnthropicBatchClient(ClaudeSettings(), client=client, max_retries=0).create(prepared)
    )
    assert ours.content == sdk.content
    assert (ours.method, ours.url) == (sdk.method, sdk.url)
    same = ("content-type", "content-length", "anthropic-version", "x-api-key", "accept")
    assert {h: ours.headers.get(h) for h in same} == {h: sdk.headers.get(h) for h in same}


def test_encoded_size_is_what_the_sdk_sends() -> None:
    prepared = [
        build([page(1), page(2, text="")], n=0),
        build([page(3, text="Invoice \u2028 \U0001f600 «ёлка»")], Modality.TEXT, n=1),
        build([page(1)], job_id=99, n=0),
    ]
    body = _capture_batch_body([{"custom_id": r.custom_id, "params": dict(r.params)} for r in prepared])
    assert len(body) == batch_body_size(prepared)
    assert len(body) == ENVELOPE_BYTES + sum(r.encoded_size for r in prepared) + len(prepared) - 1
    sent = json.loads(body)["requests"]
    assert [entry["custom_id"] for entry in sent] == [r.custom_id for r in prepared]
    assert sent[1]["params"] == prepared[1].params


def test_encoded_size_of_a_single_request_matches_the_sdk() -> None:
    request = build([page(5)])
    body = _capture_batch_body([{"custom_id": request.custom_id, "params": dict(request.params)}])
    assert len(body) == ENVELOPE_BYTES + request.encoded_size


@pytest.mark.parametrize(
    "change",
    [
        {"model": "claude-other"},
        {"max_tokens": 2048},
        {"modality": Modality.TEXT},
        {"min_confidence": 0.5},
        {"ocr_engine": "tesseract-5.6/eng+rus"},
        {"long_edge": 1024},
        {"image_format": "webp"},
        {"image_quality": 90},
        {"emulated": True},
        {"prompt_version": "other"},
    ],
)
def test_everything_that_changes_a_request_changes_its_key(change: dict[str, Any]) -> None:
    from dataclasses import replace

    config = RequestConfig(
        model="claude-test", max_tokens=4096, modality=Modality.IMAGES, min_confidence=0.8,
        ocr_engine="tesseract-5.5/eng+rus",
    )  # fmt: skip
    assert replace(config, **change).key(SHA, 1) != config.key(SHA, 1)
    assert config.key(SHA, 1) == replace(config).key(SHA, 1) != config.key(SHA, 2)


def test_a_page_texts_source_is_its_origin_without_the_engine() -> None:
    assert ocr_origin("tesseract-5.5/osd") == "ocr:tesseract-5.5/osd"
    assert PageText(page=1, text="x", origin=ocr_origin("tesseract-5.5/osd")).source is TextSource.OCR
    assert PageText(page=1, text="x", origin=TextSource.LAYER).source is TextSource.LAYER
    assert PageText(page=1, text="", origin="none").source is TextSource.NONE


def test_a_page_sent_as_text_needs_no_image_and_one_sent_with_its_image_must_have_one() -> None:
    undrawn = {"image": None, "media_type": "", "width": 0, "height": 0}
    request = build([page(1, **undrawn)], modality=Modality.ADAPTIVE)
    assert [block["type"] for block in request.params["messages"][0]["content"]] == ["text", "text"]
    with pytest.raises(InvalidRequest, match="page 1: it goes with its image, and none was drawn"):
        build([page(1, **undrawn)], modality=Modality.IMAGES)


def _undecodable(monkeypatch: pytest.MonkeyPatch) -> None:
    def decoded(request: PreparedRequest) -> dict[str, Any]:
        raise AssertionError(f"{request.custom_id}: params decoded on a path that sends or prices it")

    monkeypatch.setattr(PreparedRequest, "params", property(decoded))


def test_a_batch_body_and_the_spend_cap_use_each_request_as_it_was_encoded_where_it_was_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prepared = [build([page(1), page(2, text="")], n=0), build([page(3)], Modality.TEXT, n=1)]
    counted = [estimate_input_tokens(r.params, IMAGE_TOKEN_CAP) for r in prepared]
    expected = [json.loads(r.params_json) for r in prepared]
    _undecodable(monkeypatch)  # the coordinator's hot path neither decodes nor encodes them again
    sent = json.loads(batch_body(prepared))["requests"]
    assert [entry["params"] for entry in sent] == expected
    assert [r.input_tokens for r in prepared] == counted
    prices = prices_for("claude-sonnet-4-5", None)
    usage = Usage(input_tokens=counted[0], output_tokens=2 * EXPECTED_OUTPUT_TOKENS_PER_PAGE)
    assert expected_cost(prepared[0], ProcessingMode.BATCH, prices) == cost_usd(
        {ProcessingMode.BATCH: usage}, prices
    )


def test_a_request_with_other_params_is_encoded_sized_and_counted_again() -> None:
    request = build([page(1)])
    params = {**request.params, "system": [{"type": "text", "text": "Ключ " * 2000}]}
    longer = with_params(request, params)
    entry = {"custom_id": request.custom_id, "params": params}
    assert longer.encoded_size == len(json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode())
    assert longer.input_tokens == estimate_input_tokens(params, IMAGE_TOKEN_CAP) > request.input_tokens
    assert (longer.custom_id, longer.processing_key, longer.params) == (
        request.custom_id,
        request.processing_key,
        params,
    )
