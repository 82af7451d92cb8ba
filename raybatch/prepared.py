"""Prepared requests kept in the object store, so work prepared once (by ``estimate``) is not
prepared again: ``db-<id>/jobs/<job>/prepared/<n>.json``, used only while its processing key still
matches. Kept and read by the driver: prepare tasks never hold the store's keys for this."""

from __future__ import annotations

import json
from typing import Any

from raybatch.claude.records import PreparedRequest
from raybatch.errors import ObjectNotFound
from raybatch.ids import OutputKeys
from raybatch.objects import open_store
from raybatch.objects.port import JSON_TYPE, ObjectStore
from raybatch.outage import patient_store
from raybatch.settings import Settings, StoreSettings
from raybatch.state.port import Flags
from raybatch.steps.build_requests import prepared_request
from raybatch.work.prepared_chunk import PreparedChunk


class PreparedRequests:
    """One database's prepared requests in one object store."""

    def __init__(self, store: ObjectStore, keys: OutputKeys) -> None:
        self._store = store
        self._keys = keys
        self._listed: dict[int, set[str]] = {}

    def save(self, chunk: PreparedChunk) -> None:
        """Keep a prepared chunk (the same key again replaces it)."""
        request = chunk.request
        document = {
            "request": {
                "custom_id": request.custom_id,
                "job_id": request.job_id,
                "n": request.n,
                "first_page": request.first_page,
                "last_page": request.last_page,
                "processing_key": request.processing_key,
                "params": request.params,
                "encoded_size": request.encoded_size,
            },
            "rotations": {str(page): degrees for page, degrees in chunk.rotations.items()},
            "pages_without_text": list(chunk.pages_without_text),
            "ocr_pages": list(chunk.ocr_pages),
            "emulated": chunk.emulated,
        }
        data = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
        key = self._keys.prepared_request(request.job_id, request.n)
        self._store.put(key, data, content_type=JSON_TYPE)

    def load(self, job_id: int, n: int, processing_key: str) -> PreparedChunk | None:
        """The chunk kept for (job, n) when it was prepared under ``processing_key``; None otherwise.
        A job's keys are listed once, so jobs with nothing kept cost one listing."""
        if job_id not in self._listed:
            self._listed[job_id] = set(self._store.list(self._keys.prepared(job_id)))
        key = self._keys.prepared_request(job_id, n)
        if key not in self._listed[job_id]:
            return None
        try:
            document: dict[str, Any] = json.loads(self._store.get(key))
        except (ObjectNotFound, ValueError):
            return None
        if document["request"]["processing_key"] != processing_key:
            return None
        return PreparedChunk(
            request=_request(document["request"]),
            rotations={int(page): int(degrees) for page, degrees in document["rotations"].items()},
            pages_without_text=tuple(document["pages_without_text"]),
            ocr_pages=tuple(document["ocr_pages"]),
            emulated=bool(document["emulated"]),
        )


def _request(saved: dict[str, Any]) -> PreparedRequest:
    place = (saved["custom_id"], saved["job_id"], saved["n"], saved["first_page"], saved["last_page"])
    return prepared_request(*place, saved["processing_key"], saved["params"])


def kept_requests(settings: Settings, state: Flags) -> PreparedRequests:
    """The prepared requests of ``state``'s database in the configured store."""
    store = patient_store(open_store(settings.section(StoreSettings)), settings.store_outage_budget)
    return PreparedRequests(store, OutputKeys(state.database_id()))
