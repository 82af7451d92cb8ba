"""A request made by the real request builder goes through both clients and the default model alike."""

from __future__ import annotations

import io

from emulator_support import running, settings_for
from PIL import Image

from raybatch.claude.answer import ChunkAnswer
from raybatch.claude.batch_client import AnthropicBatchClient
from raybatch.claude.sync_client import AnthropicMessageClient
from raybatch.models import PageText, RenderedPage, ResultType
from raybatch.settings import Modality
from raybatch.steps.build_requests import RequestConfig, build_request

TEXTS = [
    "INVOICE No. 17 dated 2026-03-01\nSeller: Acme Trading LLC\nTotal: 1200.00 USD",
    "Payment due in 10 days. Signature: J. Smith",
    "CONTRACT No. 5\nbetween Acme Trading LLC and Buyer Ltd",
]


def _page(number: int, text: str) -> RenderedPage:
    buffer = io.BytesIO()
    Image.new("RGB", (600, 800), "white").save(buffer, format="JPEG")
    return RenderedPage(number, buffer.getvalue(), "image/jpeg", 600, 800, PageText(number, text, "layer"))


def test_built_request_gets_the_same_valid_answer_in_batch_and_sync_mode():
    pages = [_page(n, text) for n, text in enumerate(TEXTS, start=1)]
    config = RequestConfig(
        model="claude-sonnet-5-5", max_tokens=4096, modality=Modality.IMAGES, min_confidence=0.8
    )
    request = build_request(7, 1, "0" * 64, pages, config=config)
    with running(processing_seconds=0, responder=None) as (server, _):
        settings = settings_for(server)
        with AnthropicBatchClient(settings, max_retries=0) as batch_client:
            batch = batch_client.create([request])
            with batch_client.results(batch.id) as stream:
                (from_batch,) = list(stream)
        with AnthropicMessageClient(settings) as sync_client:
            from_sync = sync_client.send_one(request)
    assert from_batch.type is from_sync.type is ResultType.SUCCEEDED
    answer = ChunkAnswer.model_validate_json(from_batch.text or "")
    assert answer == ChunkAnswer.model_validate_json(from_sync.text or "")
    assert [p.page for p in answer.pages] == [1, 2, 3]
    assert from_batch.usage == from_sync.usage
    assert from_batch.usage is not None and from_batch.usage.input_tokens > 3 * 640  # three 600x800 images
