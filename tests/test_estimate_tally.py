"""The estimate's tally without Ray: what is counted, what is extrapolated, pages sent as text."""

from __future__ import annotations

from raybatch.claude.records import PreparedRequest
from raybatch.estimate import Tally
from raybatch.steps.build_requests import prepared_request


def _request(n: int, pages: int, images: int) -> PreparedRequest:
    content = [{"type": "image"}] * images + [{"type": "text", "text": "x"}]
    params = {"messages": [{"role": "user", "content": content}]}
    return prepared_request(f"job_1_batch_{n}", 1, n, 8 * n + 1, 8 * n + pages, "k", params)


def test_every_request_counted_means_nothing_extrapolated() -> None:
    tally = Tally()
    for n in range(3):
        tally.add(_request(n, 8, 2), lambda r: 1000)
    assert (tally.requests, tally.counted, tally.pages, tally.text_pages) == (3, 3, 24, 18)
    assert tally.input_tokens == 3000


def test_a_sample_is_extrapolated_by_pages() -> None:
    tally = Tally(every=2)
    counted: list[str] = []
    for n in range(4):
        tally.add(_request(n, 8 if n < 3 else 4, 0), lambda r: counted.append(r.custom_id) or 800)
    assert counted == ["job_1_batch_0", "job_1_batch_2"]  # one in two
    assert (tally.counted, tally.counted_pages, tally.pages) == (2, 16, 28)
    assert tally.input_tokens == round(1600 * 28 / 16)
    assert [r.params for r in tally.sizes] == [{}] * 4  # only sizes kept, not payloads
