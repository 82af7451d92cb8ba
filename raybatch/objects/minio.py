"""MinIO or S3 as the object store, through the minio SDK: ``s3://bucket/prefix``.

Only this module talks to the SDK (``s3auth`` picks its credentials). Its errors are translated
once (``_translated``): transient ones (5xx, 429, timeouts, dropped connections) into
StorageUnavailable, retried here a bounded number of times with backoff before they reach the
caller; missing keys into ObjectNotFound; the rest into permanent errors. The SDK's own blind
retries are switched off so the budget is ours, and its sleep is injected. Metadata values are
percent-encoded into headers or kept in a sidecar (``s3meta``).
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import ssl
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from xml.etree.ElementTree import ParseError

import certifi
import urllib3
from minio import Minio
from minio.error import InvalidResponseError, S3Error, ServerError
from minio.helpers import DictType, check_bucket_name
from pydantic import SecretStr

from raybatch.errors import (
    AuthenticationFailed,
    ConfigError,
    ObjectNotFound,
    StorageRejected,
    StorageUnavailable,
)
from raybatch.objects import files, s3meta
from raybatch.objects.keys import (
    listed,
    validate_content_type,
    validate_key,
    validate_metadata,
    validate_prefix,
)
from raybatch.objects.port import DEFAULT_CONTENT_TYPE, JSON_TYPE, ObjectInfo, PutObject, put_each
from raybatch.objects.s3auth import s3_credentials
from raybatch.retry import Backoff, retrying
from raybatch.settings import StoreSettings

T = TypeVar("T")

DEFAULT_ENDPOINT = "s3.amazonaws.com"
DEFAULT_BACKOFF = Backoff(initial=0.2, factor=2.0, cap=5.0, jitter=0.2)
_TRANSIENT_CODES = {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "Throttling"}
_AUTH_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"}


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, prefix) from ``s3://bucket/prefix``; ConfigError when malformed."""
    if not uri.lower().startswith("s3://"):
        raise ConfigError("an S3 store is given as s3://bucket/prefix")
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    try:
        check_bucket_name(bucket, strict=True)
        prefix = prefix.strip("/")
        if prefix:
            validate_key(prefix)
    except ValueError as exc:
        raise ConfigError(f"invalid S3 store location: {exc}") from None
    return bucket, prefix


def _status_error(status: int, what: str) -> StorageUnavailable | StorageRejected:
    if status >= 500 or status in (408, 429):
        return StorageUnavailable(f"object store answered HTTP {status} ({what})")
    return StorageRejected(f"object store refused {what}: HTTP {status}")


def _s3_error(exc: S3Error, what: str) -> Exception:
    status = exc.response.status if exc.response is not None else 0
    code = exc.code or ""
    if code in ("NoSuchKey", "NoSuchVersion"):
        return ObjectNotFound(f"no object for {what}")
    if code == "NoSuchBucket":
        return StorageRejected(f"the bucket does not exist ({what})")
    if status >= 500 or status in (408, 429) or code in _TRANSIENT_CODES:
        return StorageUnavailable(f"object store answered {status} {code} ({what})")
    if status in (401, 403) or code in _AUTH_CODES:
        return AuthenticationFailed(f"object store denied {what}: {code or status}")
    return StorageRejected(f"object store refused {what}: {status} {code}")


@contextlib.contextmanager
def _translated(what: str) -> Iterator[None]:
    """Turn minio and urllib3 errors into raybatch errors; messages name no secrets."""
    try:
        yield
    except S3Error as exc:
        raise _s3_error(exc, what) from exc
    except ServerError as exc:
        raise _status_error(exc.status_code, what) from exc
    except InvalidResponseError as exc:
        raise _status_error(getattr(exc, "_code", 0) or 0, what) from exc
    except ParseError as exc:
        raise StorageUnavailable(f"object store sent a garbled answer ({what})") from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise StorageUnavailable(f"object store unreachable ({what}): {type(exc).__name__}") from exc


def _http_client(timeout: float) -> urllib3.PoolManager:
    """A pool without urllib3's own retries; trusts the system store, SSL_CERT_FILE and certifi."""
    context = ssl.create_default_context()
    context.load_verify_locations(certifi.where())
    return urllib3.PoolManager(
        timeout=urllib3.Timeout(connect=min(timeout, 10.0), read=timeout),
        maxsize=10,
        retries=False,
        ssl_context=context,
    )


def _read_all(response: Any) -> bytes:
    try:
        return response.read()
    finally:
        response.close()
        response.release_conn()


def _download(response: Any, destination: Path) -> None:
    try:
        files.write_atomic(destination, response.stream(files.CHUNK_BYTES))
    finally:
        response.close()
        response.release_conn()


class MinioObjectStore:
    """Objects under ``prefix`` in one bucket of a MinIO or S3 server."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint: str = DEFAULT_ENDPOINT,
        access_key: str | None = None,
        secret_key: SecretStr | str | None = None,
        secure: bool = True,
        region: str | None = None,
        create_bucket: bool = True,
        attempts: int = 4,
        backoff: Backoff = DEFAULT_BACKOFF,
        sleep: Callable[[float], None] = time.sleep,
        timeout: float = 60.0,
    ) -> None:
        self.bucket, self.prefix = parse_s3_uri(f"s3://{bucket}/{prefix}")
        if attempts < 1:
            raise ConfigError("attempts must be at least 1")
        self._endpoint = endpoint
        self._access_key = access_key
        self._secret_key = SecretStr(secret_key) if isinstance(secret_key, str) else secret_key
        self._secure = secure
        self._region = region
        self._create_bucket = create_bucket
        self._attempts = attempts
        self._backoff = backoff
        self._sleep = sleep
        self._timeout = timeout
        self._minio: Minio | None = self._new_client()  # no I/O yet: checks the endpoint early
        self._bucket_ready = not create_bucket

    @classmethod
    def from_settings(cls, settings: StoreSettings, **options: Any) -> MinioObjectStore:
        """The store that ``settings.store`` (an s3:// URI) and the S3_* settings describe."""
        bucket, prefix = parse_s3_uri(settings.store)
        return cls(
            bucket,
            prefix,
            endpoint=settings.s3_endpoint or DEFAULT_ENDPOINT,
            access_key=settings.s3_access_key,
            secret_key=settings.s3_secret_key,
            secure=settings.s3_secure,
            region=settings.s3_region,
            **options,
        )

    def __repr__(self) -> str:
        return f"MinioObjectStore({self.uri_prefix!r}, endpoint={self._endpoint!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_minio"] = None  # rebuilt lazily wherever the copy lands
        state["_bucket_ready"] = not self._create_bucket
        return state

    @property
    def uri_prefix(self) -> str:
        """``s3://bucket/prefix`` of this store."""
        return f"s3://{self.bucket}/{self.prefix}"

    def put(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Store ``data`` under ``key``, replacing any object there."""
        name, content_type, headers = self._prepare(key, content_type, metadata)
        data = bytes(data)
        self._run(
            f"put {key}",
            lambda c: c.put_object(
                self.bucket, name, io.BytesIO(data), len(data), content_type=content_type, metadata=headers
            ),
        )

    def put_many(self, objects: Sequence[PutObject]) -> None:
        """Store each object in turn, all validated first (the set is not atomic)."""
        put_each(self, objects)

    def put_file(
        self,
        key: str,
        source: str | os.PathLike[str],
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Upload a local file under ``key``, streamed (multipart when large)."""
        name, content_type, headers = self._prepare(key, content_type, metadata)
        with open(source, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size

            def upload(client: Minio) -> None:
                handle.seek(0)
                client.put_object(
                    self.bucket, name, handle, size, content_type=content_type, metadata=headers
                )

            self._run(f"put {key}", upload)

    def get(self, key: str) -> bytes:
        """The object's bytes; raises ObjectNotFound."""
        name = self._name(validate_key(key))
        return self._run(f"get {key}", lambda c: _read_all(c.get_object(self.bucket, name)))

    def get_file(self, key: str, destination: str | os.PathLike[str]) -> None:
        """Stream the object into a local file, replaced atomically; raises ObjectNotFound."""
        name = self._name(validate_key(key))
        self._run(f"get {key}", lambda c: _download(c.get_object(self.bucket, name), Path(destination)))

    def head(self, key: str) -> ObjectInfo | None:
        """Size, content type and metadata of the object, or None when there is none."""
        stat = self._stat(validate_key(key))
        if stat is None:
            return None
        headers = dict(stat.metadata or {})
        marker = s3meta.sidecar_marker(headers)
        if marker is None:
            metadata = s3meta.from_headers(headers)
        else:
            metadata = s3meta.parse_sidecar(self._sidecar(key, marker))
        content_type = stat.content_type or DEFAULT_CONTENT_TYPE
        return ObjectInfo(key=key, size=stat.size or 0, content_type=content_type, metadata=metadata)

    def exists(self, key: str) -> bool:
        """True when an object is stored under ``key``."""
        return self._stat(validate_key(key)) is not None

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys starting with ``prefix``, sorted."""
        full = self._name(validate_prefix(prefix))
        names = self._run(
            f"list {prefix}",
            lambda c: [o.object_name for o in c.list_objects(self.bucket, prefix=full, recursive=True)],
        )
        start = len(self._name(""))
        keys = (name[start:] for name in names if name and not name.endswith("/"))
        return iter(listed(keys, prefix))

    def delete(self, key: str) -> None:
        """Remove the object and its metadata sidecars; a missing object is not an error."""
        validate_key(key)
        self._run(f"delete {key}", lambda c: c.remove_object(self.bucket, self._name(key)))
        folder = self._name(s3meta.sidecar_folder(key))
        sidecars = self._run(
            f"delete {key}",
            lambda c: [o.object_name for o in c.list_objects(self.bucket, prefix=folder) if not o.is_dir],
        )

        def remove_sidecars(client: Minio) -> None:
            for name in sidecars:
                client.remove_object(self.bucket, name)

        self._run(f"delete {key}", remove_sidecars)

    def source_objects(self, name_prefix: str) -> builtins.list[tuple[str, int]]:
        """(object name, size) of every object whose name starts with ``name_prefix``, sorted.

        Names here are the user's own, outside our key scheme: only sources are read this way.
        """

        def names(client: Minio) -> builtins.list[tuple[str, int]]:
            found = client.list_objects(self.bucket, prefix=name_prefix, recursive=True)
            return [(o.object_name, o.size or 0) for o in found if o.object_name and not o.is_dir]

        return sorted(self._run(f"list sources under {name_prefix!r}", names))

    def read_source_object(self, name: str) -> bytes:
        """The bytes of a source object by its raw name (see ``source_objects``)."""
        return self._run(f"read source {name!r}", lambda c: _read_all(c.get_object(self.bucket, name)))

    def uri(self, key: str) -> str:
        """``s3://bucket/prefix/key``."""
        return f"s3://{self.bucket}/{self._name(validate_key(key))}"

    def _name(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _prepare(
        self, key: str, content_type: str, metadata: Mapping[str, str] | None
    ) -> tuple[str, str, DictType]:
        """Validate a write; when the metadata is too large for headers, write its sidecar first."""
        name = self._name(validate_key(key))
        content_type = validate_content_type(content_type)
        clean = validate_metadata(metadata)
        encoded = s3meta.to_headers(clean)
        if encoded is None:
            encoded = {s3meta.SIDECAR_MARKER: self._put_sidecar(key, clean)}
        headers: DictType = dict(encoded)
        return name, content_type, headers

    def _put_sidecar(self, key: str, metadata: Mapping[str, str]) -> str:
        """Write the metadata sidecar of ``key``; return its key (relative to the prefix)."""
        body = s3meta.sidecar_body(metadata)
        sidecar = s3meta.sidecar_key(key, body)
        self._run(
            f"put {key}",
            lambda c: c.put_object(
                self.bucket, self._name(sidecar), io.BytesIO(body), len(body), content_type=JSON_TYPE
            ),
        )
        return sidecar

    def _stat(self, key: str) -> Any:
        try:
            return self._run(f"head {key}", lambda c: c.stat_object(self.bucket, self._name(key)))
        except ObjectNotFound:
            return None

    def _sidecar(self, key: str, sidecar: str) -> bytes:
        try:
            return self._run(
                f"head {key}", lambda c: _read_all(c.get_object(self.bucket, self._name(sidecar)))
            )
        except ObjectNotFound:
            raise StorageRejected(f"the metadata sidecar of {key} is missing") from None

    def _run(self, what: str, call: Callable[[Minio], T]) -> T:
        """``call`` with the client; transient failures retried with backoff, at most ``attempts`` tries."""

        def once() -> T:
            with _translated(what):
                return call(self._client())

        return retrying(
            once,
            backoff=self._backoff,
            attempts=self._attempts,
            retry_on=StorageUnavailable,
            sleep=self._sleep,
        )

    def _client(self) -> Minio:
        if self._minio is None:
            self._minio = self._new_client()
        if not self._bucket_ready:
            self._ensure_bucket(self._minio)
            self._bucket_ready = True
        return self._minio

    def _new_client(self) -> Minio:
        """A client signing with the given keys, or with what the AWS credential chain finds."""
        try:
            return Minio(
                self._endpoint,
                credentials=s3_credentials(self._access_key, self._secret_key),
                secure=self._secure,
                region=self._region,
                http_client=_http_client(self._timeout),
            )
        except ValueError as exc:  # the SDK's messages name the endpoint, never the secret
            raise ConfigError(f"invalid object store endpoint or credentials: {exc}") from None

    def _ensure_bucket(self, client: Minio) -> None:
        if client.bucket_exists(self.bucket):
            return
        try:
            client.make_bucket(self.bucket, location=self._region)
        except S3Error as exc:
            if exc.code != "BucketAlreadyOwnedByYou":  # another of our workers made it first
                raise
