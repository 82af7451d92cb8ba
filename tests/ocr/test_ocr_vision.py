"""GoogleVisionOcr through the real google-cloud-vision client against the emulated endpoint."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest

from raybatch.errors import AttemptsExhausted, InvalidSource, RateLimited, UpstreamUnavailable
from raybatch.ocr.emulator import VisionEmulator
from raybatch.ocr.fake import LabelledOcr, labelled_page
from raybatch.ocr.port import PageImage
from raybatch.ocr.vision import GoogleVisionOcr, plan_requests
from raybatch.retry import Backoff


@pytest.fixture
def reader() -> LabelledOcr:
    return LabelledOcr()


@pytest.fixture
def emulator(reader: LabelledOcr) -> Iterator[VisionEmulator]:
    with VisionEmulator(reader) as emulator:
        yield emulator


@pytest.fixture
def slept() -> list[float]:
    return []


def vision(emulator: VisionEmulator, slept: list[float], **kwargs: object) -> GoogleVisionOcr:
    options: dict[str, object] = {"attempts": 3, "backoff": Backoff(initial=1.0, factor=2.0, cap=8.0)}
    return GoogleVisionOcr(endpoint=emulator.url, sleep=slept.append, **{**options, **kwargs})  # type: ignore[arg-type]


def test_reads_text_and_rotation_of_every_page(emulator: VisionEmulator, slept: list[float]) -> None:
    rotations = (0, 90, 180, 270)
    pages = [labelled_page(n, f"Page {n}\nСчёт № {n}", rotation=r) for n, r in enumerate(rotations, 1)]

    texts = vision(emulator, slept).read(pages)

    assert [t.page for t in texts] == [1, 2, 3, 4]
    assert [t.text for t in texts] == [f"Page {n}\nСчёт № {n}" for n in (1, 2, 3, 4)]
    assert [t.rotation for t in texts] == [0, 90, 180, 270]
    assert {t.origin for t in texts} == {"ocr:google-vision-v1/builtin-stable@emulator"}
    assert {t.confidence for t in texts} == {1.0}
    assert slept == []


def test_twenty_pages_go_in_two_requests_within_the_image_limit(
    emulator: VisionEmulator, reader: LabelledOcr, slept: list[float]
) -> None:
    pages = [labelled_page(n, f"page {n}") for n in range(1, 21)]

    texts = vision(emulator, slept).read(pages)

    assert [t.text for t in texts] == [f"page {n}" for n in range(1, 21)]
    assert sorted(emulator.images_per_request) == [4, 16]
    assert reader.pages_read == 20


def test_requests_also_keep_under_the_byte_limit() -> None:
    pages = [PageImage(n, b"x" * 3000) for n in range(1, 6)]

    planned = plan_requests(pages, max_images=16, max_bytes=2 * 4256)

    assert [[p.page for p in r] for r in planned] == [[1, 2], [3, 4], [5]]
    with pytest.raises(InvalidSource, match="page 1"):
        plan_requests(pages, max_bytes=1000)


@pytest.mark.parametrize("knob", ["rate_limited", "unavailable", "malformed"])
def test_a_transient_fault_is_retried_with_backoff(
    emulator: VisionEmulator, slept: list[float], knob: str
) -> None:
    emulator.set_faults(**{knob: 2})

    texts = vision(emulator, slept).read([labelled_page(1, "after the storm")])

    assert texts[0].text == "after the storm"
    assert slept == [1.0, 2.0]
    assert emulator.requests_received == 3


@pytest.mark.parametrize(
    ("knob", "cause", "reason"),
    [
        ("rate_limited", RateLimited, "429"),
        ("unavailable", UpstreamUnavailable, "503"),
        ("malformed", UpstreamUnavailable, "malformed"),
    ],
)
def test_a_fault_that_persists_exhausts_the_budget_with_a_clear_reason(
    emulator: VisionEmulator, slept: list[float], knob: str, cause: type[Exception], reason: str
) -> None:
    emulator.set_faults(**{f"{knob}_share": 1.0})

    with pytest.raises(AttemptsExhausted, match=reason) as failure:
        vision(emulator, slept).read([labelled_page(7, "never read")])

    assert isinstance(failure.value.__cause__, cause)
    assert "pages 7-7" in str(failure.value)
    assert len(slept) == 2


def test_a_per_image_transient_error_retries_only_that_image(
    emulator: VisionEmulator, slept: list[float]
) -> None:
    emulator.set_faults(image_unavailable=1)

    texts = vision(emulator, slept).read([labelled_page(n, f"p{n}") for n in (1, 2, 3)])

    assert [t.text for t in texts] == ["p1", "p2", "p3"]
    assert emulator.images_per_request == [3, 1]
    assert slept == [1.0]


def test_latency_past_the_timeout_is_a_transient_failure(
    emulator: VisionEmulator, slept: list[float]
) -> None:
    emulator.set_faults(latency=0.5)

    with pytest.raises(AttemptsExhausted, match="did not answer"):
        vision(emulator, slept, attempts=2, timeout=0.1).read([labelled_page(1, "slow")])

    emulator.set_faults(latency=0.0)
    assert vision(emulator, slept).read([labelled_page(1, "fast")])[0].text == "fast"


def test_an_image_vision_cannot_read_fails_its_page_without_retrying(
    emulator: VisionEmulator, slept: list[float]
) -> None:
    pages = [labelled_page(1, "fine"), PageImage(2, b"not an image at all")]

    with pytest.raises(InvalidSource, match="page 2: Vision error 3"):
        vision(emulator, slept).read(pages)

    assert slept == []


def test_a_page_without_text_reads_as_empty(emulator: VisionEmulator, slept: list[float]) -> None:
    texts = vision(emulator, slept).read([labelled_page(3, "")])

    assert (texts[0].text, texts[0].confidence, texts[0].rotation) == ("", 0.0, 0)


def test_the_engine_pickles_without_its_client(emulator: VisionEmulator, slept: list[float]) -> None:
    engine = GoogleVisionOcr(endpoint=emulator.url, attempts=1)
    engine.read([labelled_page(1, "before")])

    copy = pickle.loads(pickle.dumps(engine))

    assert copy.read([labelled_page(1, "after")])[0].text == "after"


def test_the_emulator_reads_real_pixels_with_a_local_engine(slept: list[float]) -> None:
    from ocr_pages import ENGLISH, render

    from raybatch.ocr.rapid import RapidOcrEngine

    with VisionEmulator(RapidOcrEngine(threads=1)) as emulator:
        engine = GoogleVisionOcr(endpoint=emulator.url, sleep=slept.append)
        texts = engine.read([render(ENGLISH, rotation=90)])

    assert texts[0].rotation == 90
    assert texts[0].text.splitlines() == ENGLISH
