"""Packer: limits held, every request once, order kept by job, and the batch-count bound."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raybatch.claude.records import PreparedRequest
from raybatch.errors import ConfigError, InvalidRequest
from raybatch.steps.pack import (
    ANTHROPIC_MAX_BATCH_BYTES,
    ENVELOPE_BYTES,
    batch_body_size,
    megabytes,
    pack,
)


def req(job_id: int, n: int, size: int) -> PreparedRequest:
    return PreparedRequest(
        custom_id=f"job_{job_id}_batch_{n}", job_id=job_id, n=n, first_page=8 * n + 1,
        last_page=8 * n + 8, processing_key="k", params_json="{}", encoded_size=size, input_tokens=1,
    )  # fmt: skip


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[PreparedRequest], int, int]:
    max_bytes = draw(st.integers(ENVELOPE_BYTES + 1, 3_000))
    room = max_bytes - ENVELOPE_BYTES
    small = st.integers(1, max(1, room // 20))
    edge = st.integers(max(1, room - 3), room)  # requests that only just fit alone
    size = st.one_of(small, st.integers(1, room), edge)
    count = draw(st.integers(0, 60))
    jobs = draw(st.lists(st.integers(1, 6), min_size=count, max_size=count))
    requests = [req(job, n, draw(size)) for n, job in enumerate(jobs)]
    return requests, max_bytes, draw(st.integers(1, 70))


@st.composite
def small_requests(draw: st.DrawFn) -> tuple[list[PreparedRequest], int]:
    """Requests small against the limit, as 3 MB chunks are against 200 MB batches."""
    max_bytes = draw(st.integers(2_000, 6_000))
    sizes = draw(st.lists(st.integers(1, (max_bytes - ENVELOPE_BYTES) // 40), max_size=300))
    return [req(n % 5, n, size) for n, size in enumerate(sizes)], max_bytes


def grouped(requests: list[PreparedRequest]) -> list[PreparedRequest]:
    order = list(dict.fromkeys(r.job_id for r in requests))
    return sorted(requests, key=lambda r: order.index(r.job_id))  # sorted is stable


@settings(max_examples=150, deadline=None)
@given(workloads())
def test_every_request_once_limits_held_order_kept(work: tuple[list[PreparedRequest], int, int]) -> None:
    requests, max_bytes, max_requests = work
    batches = pack(requests, max_bytes=max_bytes, max_requests=max_requests)
    assert [r for batch in batches for r in batch] == grouped(requests)
    for batch in batches:
        assert batch
        assert batch_body_size(batch) <= max_bytes
        assert len(batch) <= max_requests


@settings(max_examples=150, deadline=None)
@given(workloads())
def test_batch_count_bound(work: tuple[list[PreparedRequest], int, int]) -> None:
    requests, max_bytes, max_requests = work
    batches = pack(requests, max_bytes=max_bytes, max_requests=max_requests)
    if not requests:
        assert batches == []
        return
    weights = [r.encoded_size + 1 for r in requests]  # each request plus its comma
    total, heaviest = sum(weights), max(weights)
    capacity = max_bytes - ENVELOPE_BYTES + 1
    bound = len(requests) // max_requests + total // (capacity - heaviest + 1) + 1
    assert len(batches) <= bound
    if max_requests >= len(requests) and (math.ceil(total / capacity) + 1) * heaviest <= capacity:
        assert len(batches) <= math.ceil(total / capacity) + 1


@settings(max_examples=100, deadline=None)
@given(small_requests())
def test_small_requests_stay_within_one_of_the_lower_bound(work: tuple[list[PreparedRequest], int]) -> None:
    requests, max_bytes = work
    batches = pack(requests, max_bytes=max_bytes, max_requests=100_000)
    weights = [r.encoded_size + 1 for r in requests]
    capacity = max_bytes - ENVELOPE_BYTES + 1
    lower = math.ceil(sum(weights) / capacity)  # no packing can do with fewer
    if requests:
        assert (lower + 1) * max(weights) <= capacity  # the regime where the bound is promised
    assert lower <= len(batches) <= lower + 1


@settings(max_examples=100, deadline=None)
@given(workloads())
def test_a_job_that_fits_spans_at_most_two_batches(work: tuple[list[PreparedRequest], int, int]) -> None:
    requests, max_bytes, max_requests = work
    batches = pack(requests, max_bytes=max_bytes, max_requests=max_requests)
    for job in {r.job_id for r in requests}:
        chunks = [r for r in requests if r.job_id == job]
        if batch_body_size(chunks) <= max_bytes and len(chunks) <= max_requests:
            assert sum(any(r.job_id == job for r in batch) for batch in batches) <= 2


def test_small_requests_meet_the_stated_bound_at_production_scale() -> None:
    # 3 MB chunks, 200 MB batches: the count stays within one of ⌈total / limit⌉
    requests = [req(job, n, 3_000_000 + 7 * n) for job in range(40) for n in range(25)]
    limit = megabytes(200)
    batches = pack(requests, max_bytes=limit, max_requests=10_000)
    total = batch_body_size(requests)
    assert len(batches) <= math.ceil(total / limit) + 1
    assert all(batch_body_size(batch) <= limit for batch in batches)


def test_exact_fit_and_one_byte_over() -> None:
    two = [req(1, 0, 100), req(1, 1, 100)]
    exact = ENVELOPE_BYTES + 100 + 1 + 100
    assert pack(two, max_bytes=exact, max_requests=10) == [two]
    assert pack(two, max_bytes=exact - 1, max_requests=10) == [[two[0]], [two[1]]]
    assert pack(two, max_bytes=exact, max_requests=1) == [[two[0]], [two[1]]]


def test_chunks_of_a_job_stay_together_in_first_seen_order() -> None:
    mixed = [req(1, 0, 10), req(2, 0, 10), req(1, 1, 10), req(3, 0, 10), req(2, 1, 10)]
    (batch,) = pack(mixed, max_bytes=10_000, max_requests=100)
    assert [r.custom_id for r in batch] == [
        "job_1_batch_0", "job_1_batch_1", "job_2_batch_0", "job_2_batch_1", "job_3_batch_0",
    ]  # fmt: skip


def test_limits_outside_anthropics_are_config_errors() -> None:
    assert pack([], max_bytes=ANTHROPIC_MAX_BATCH_BYTES, max_requests=100_000) == []
    for max_bytes, max_requests in [
        (ANTHROPIC_MAX_BATCH_BYTES + 1, 10), (ENVELOPE_BYTES, 10), (1000, 0), (1000, 100_001),
    ]:  # fmt: skip
        with pytest.raises(ConfigError):
            pack([req(1, 0, 1)], max_bytes=max_bytes, max_requests=max_requests)
    assert megabytes(256) == ANTHROPIC_MAX_BATCH_BYTES


def test_a_request_too_large_for_any_batch_is_named() -> None:
    with pytest.raises(InvalidRequest, match="job_7_batch_3"):
        pack([req(1, 0, 5), req(7, 3, 1000)], max_bytes=ENVELOPE_BYTES + 999, max_requests=10)


def test_a_repeated_custom_id_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="job_1_batch_0"):
        pack([req(1, 0, 5), req(1, 0, 5)], max_bytes=1000, max_requests=10)
