"""Prepared requests kept in the object store, so work prepared once (by ``estimate``) is not
prepared again: ``jobs/<id>/prepared/<n>.json``, used only while its processing key still matches."""

from __future__ import annotations

import json
from typing import Any

from raybatch.actors.prepare import PreparedChunk
from raybatch.claude.records import PreparedRequest
from raybatch.errors import ObjectNotFound
from raybatch.ids import job_prefix
from raybatch.objects.port import ObjectStore


def prepared_key(job_id: int, n: int) -> str:
    """Key of chunk ``n`` of a job, prepared."""
    return f"{job_prefix(job_id)}/prepared/{n}.json"


def save_prepared(store: ObjectStore, chunk: PreparedChunk) -> None:
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
    store.put(prepared_key(request.job_id, request.n), data, content_type="application/json")


def load_prepared(store: ObjectStore, job_id: int, n: int, key: str) -> PreparedChunk | None:
    """The chunk kept for (job, n) when it was prepared under ``key``; None otherwise."""
    try:
        document: dict[str, Any] = json.loads(store.get(prepared_key(job_id, n)))
    except (ObjectNotFound, ValueError):
        return None
    if document["request"]["processing_key"] != key:
        return None
    return PreparedChunk(
        request=PreparedRequest(**document["request"]),
        rotations={int(page): int(degrees) for page, degrees in document["rotations"].items()},
        pages_without_text=tuple(document["pages_without_text"]),
        ocr_pages=tuple(document["ocr_pages"]),
        emulated=bool(document["emulated"]),
    )
