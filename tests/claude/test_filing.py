"""Filing: results matched by custom_id in any order, duplicates and strangers set aside."""

from __future__ import annotations

import logging
import random

import pytest

from raybatch.claude.records import RequestResult
from raybatch.claude.triage import FilingAction, classify, file_results
from raybatch.models import ResultType, Usage


def ok(cid: str, text: str = '{"x": 1}') -> RequestResult:
    return RequestResult(cid, ResultType.SUCCEEDED, text=text, usage=Usage(input_tokens=5))


def errored(cid: str, error_type: str | None) -> RequestResult:
    return RequestResult(cid, ResultType.ERRORED, error_type=error_type, error_message="boom")


@pytest.mark.parametrize(
    ("result", "action"),
    [
        (ok("a"), FilingAction.SUCCEED),
        (ok("a", text="  "), FilingAction.RETRY),
        (RequestResult("a", ResultType.SUCCEEDED), FilingAction.RETRY),
        (errored("a", "invalid_request_error"), FilingAction.FAIL),
        (errored("a", "api_error"), FilingAction.RETRY),
        (errored("a", "overloaded_error"), FilingAction.RETRY),
        (errored("a", "rate_limit_error"), FilingAction.RETRY),
        (errored("a", "something_new"), FilingAction.RETRY),
        (errored("a", None), FilingAction.RETRY),
        (RequestResult("a", ResultType.EXPIRED), FilingAction.RETRY),
        (RequestResult("a", ResultType.CANCELED), FilingAction.RETRY),
    ],
)
def test_classify(result: RequestResult, action: FilingAction) -> None:
    filed = classify(result)
    assert filed.action is action and filed.result is result
    assert (filed.reason == "") is (action is FilingAction.SUCCEED)


def test_results_in_any_order_with_duplicates_strangers_and_gaps(caplog: pytest.LogCaptureFixture) -> None:
    expected = [f"job_1_batch_{n}" for n in range(6)]
    results = [
        ok("job_1_batch_0"),
        errored("job_1_batch_1", "invalid_request_error"),
        errored("job_1_batch_2", "overloaded_error"),
        RequestResult("job_1_batch_3", ResultType.EXPIRED),
        ok("job_9_batch_0"),
    ]
    random.Random(7).shuffle(results)
    first_dup = ok("job_1_batch_4", text="first")
    results += [first_dup, RequestResult("job_1_batch_4", ResultType.CANCELED), ok("job_1_batch_0")]
    with caplog.at_level(logging.WARNING, logger="raybatch.claude.triage"):
        report = file_results(results, expected)
    assert set(report.accepted) == set(expected) - {"job_1_batch_5"}
    assert report.with_action(FilingAction.SUCCEED) == [
        cid for cid in report.accepted if cid in ("job_1_batch_0", "job_1_batch_4")
    ]
    assert report.accepted["job_1_batch_4"].result is first_dup
    assert report.with_action(FilingAction.FAIL) == ["job_1_batch_1"]
    assert set(report.with_action(FilingAction.RETRY)) == {"job_1_batch_2", "job_1_batch_3"}
    assert sorted(report.duplicates) == ["job_1_batch_0", "job_1_batch_4"]
    assert report.unknown == ["job_9_batch_0"]
    assert report.missing == ["job_1_batch_5"]
    assert "job_9_batch_0" in caplog.text and "missing" in caplog.text


def test_an_empty_batch_files_nothing() -> None:
    report = file_results([], [])
    assert (report.accepted, report.duplicates, report.unknown, report.missing) == ({}, [], [], [])
