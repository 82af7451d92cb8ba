"""The per-page cache: a reprocessed job never calls the engine again for the same page."""

from __future__ import annotations

from pathlib import Path

from raybatch.models import PageText
from raybatch.ocr.cache import CachedOcr, CarriedPageTexts, InMemoryPageTextCache
from raybatch.ocr.fake import LabelledOcr, labelled_page
from raybatch.settings import StateSettings
from raybatch.state import open_state

SHA = "ab" * 32


def test_a_second_read_of_the_same_pages_comes_from_the_cache() -> None:
    engine, cache = LabelledOcr(), InMemoryPageTextCache()
    pages = [labelled_page(n, f"text {n}", rotation=90) for n in (1, 2, 3)]

    first = CachedOcr(engine, cache, SHA).read(pages)
    again = CachedOcr(engine, cache, SHA).read(pages)

    assert again == first
    assert [t.rotation for t in again] == [90, 90, 90]
    assert (engine.calls, engine.pages_read) == (1, 3)
    assert len(cache) == 3


def test_only_missing_pages_reach_the_engine_and_order_is_kept() -> None:
    engine, cache = LabelledOcr(), InMemoryPageTextCache()
    cache.put_page_text(SHA, engine.name, PageText(2, "cached two", f"ocr:{engine.name}"))
    pages = [labelled_page(n, f"fresh {n}") for n in (1, 2, 3)]

    texts = CachedOcr(engine, cache, SHA).read(pages)

    assert [t.text for t in texts] == ["fresh 1", "cached two", "fresh 3"]
    assert engine.pages_read == 2


def test_the_key_is_source_page_and_engine_version() -> None:
    cache = InMemoryPageTextCache()
    old, new = LabelledOcr("labelled-1"), LabelledOcr("labelled-2")
    page = [labelled_page(1, "words")]

    CachedOcr(old, cache, SHA).read(page)
    CachedOcr(new, cache, SHA).read(page)  # another engine version reads again
    CachedOcr(old, cache, "cd" * 32).read(page)  # so does another source

    assert (old.pages_read, new.pages_read) == (2, 1)


def test_the_state_store_is_a_cache_that_outlives_the_engine(tmp_path: Path) -> None:
    settings = StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}")
    pages = [labelled_page(n, f"Счёт {n}", rotation=270) for n in (1, 2)]
    engine = LabelledOcr()

    first = CachedOcr(engine, open_state(settings), SHA).read(pages)
    again = CachedOcr(engine, open_state(settings), SHA).read(pages)  # a new process, the same file

    assert again == first
    assert [(t.text, t.rotation) for t in again] == [("Счёт 1", 270), ("Счёт 2", 270)]
    assert engine.pages_read == 2


def test_a_carried_cache_goes_into_a_task_and_its_new_reads_come_back(tmp_path: Path) -> None:
    # The driver looks up what is known; the task (no database) reads the rest; the driver stores it.
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    engine = LabelledOcr()
    state.put_page_text(SHA, engine.name, PageText(2, "known two", f"ocr:{engine.name}"))
    state.put_page_text(SHA, "other-1", PageText(1, "another engine's", "ocr:other"))
    carried = CarriedPageTexts(state.cached_page_texts(SHA, [1, 2, 3]))

    texts = CachedOcr(engine, carried, SHA).read([labelled_page(n, f"fresh {n}") for n in (1, 2, 3)])

    assert [t.text for t in texts] == ["fresh 1", "known two", "fresh 3"]
    assert [(c.engine, c.text.page) for c in carried.added] == [(engine.name, 1), (engine.name, 3)]
    for read in carried.added:
        state.put_page_text(SHA, read.engine, read.text)
    stored = state.cached_page_texts(SHA, [1, 2, 3])
    assert {c.text.page for c in stored if c.engine == engine.name} == {1, 2, 3}
