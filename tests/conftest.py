"""Shared fixtures. Services that are missing skip locally and fail under CI (CI=true)."""

from __future__ import annotations

import os

import pytest

# Ray reads these at import and init time; tests never report usage or ask for tokens.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
DEFAULT_TEST_PG = "postgresql+psycopg://raybatch:raybatch@127.0.0.1:5432/raybatch_test"


def missing_service(reason: str) -> None:
    """Skip locally; fail under CI, where every service must be there."""
    if IN_CI:
        pytest.fail(f"required service missing under CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of the real PostgreSQL server the tests use (RAYBATCH_TEST_DATABASE_URL)."""
    url = os.environ.get("RAYBATCH_TEST_DATABASE_URL", DEFAULT_TEST_PG)
    import sqlalchemy as sa

    try:
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # any failure to reach the server
        missing_service(f"PostgreSQL not reachable at {url.split('@')[-1]}: {type(exc).__name__}")
    return url
