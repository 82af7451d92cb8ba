"""MinioObjectStore beyond the contract: sidecars, buckets, prefixes, and error translation."""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from raybatch.errors import (
    AuthenticationFailed,
    ConfigError,
    InvalidObjectKey,
    ObjectNotFound,
    StorageRejected,
    StorageUnavailable,
)
from raybatch.objects import MinioObjectStore, open_store, parse_s3_uri
from raybatch.retry import Backoff

SECRET = "s3cr3t-DO-NOT-LEAK"


def _raw_names(s3_server, bucket: str) -> list[str]:
    client = s3_server.client()
    return sorted(o.object_name for o in client.list_objects(bucket, recursive=True))


def test_large_metadata_goes_to_a_hidden_sidecar_that_delete_removes(s3_server, make_s3_store) -> None:
    bucket = s3_server.new_bucket()
    store = make_s3_store(bucket, "p")
    store.put("jobs/1/source", b"x", metadata={"source_name": "Договор " * 300})
    store.put("jobs/1/source/child", b"y", metadata={"source_name": "ж" * 2000})

    names = _raw_names(s3_server, bucket)
    assert sum(n.startswith("p/.raybatch-meta/") for n in names) == 2
    assert list(store.list()) == ["jobs/1/source", "jobs/1/source/child"]

    store.delete("jobs/1/source")

    assert [n for n in _raw_names(s3_server, bucket) if "child" not in n] == []
    info = store.head("jobs/1/source/child")
    assert info is not None and info.metadata == {"source_name": "ж" * 2000}


def test_small_metadata_travels_as_ascii_headers(s3_server, make_s3_store) -> None:
    bucket = s3_server.new_bucket()
    make_s3_store(bucket).put("k", b"x", metadata={"source_name": "Счёт 1.pdf"})

    stat = s3_server.client().stat_object(bucket, "k")
    assert stat.metadata["x-amz-meta-source_name"] == "%D0%A1%D1%87%D1%91%D1%82%201.pdf"
    assert _raw_names(s3_server, bucket) == ["k"]


def test_an_object_pointing_outside_the_sidecar_folder_is_refused(s3_server, make_s3_store) -> None:
    bucket = s3_server.new_bucket()
    store = make_s3_store(bucket)
    store.put("secret", b"x")
    client = s3_server.client()
    client.put_object(bucket, "k", io.BytesIO(b"x"), 1, metadata={"raybatch-sidecar": "secret"})

    with pytest.raises(StorageRejected):
        store.head("k")


def test_prefixes_isolate_stores_in_one_bucket(s3_server, make_s3_store) -> None:
    bucket = s3_server.new_bucket()
    first, second = make_s3_store(bucket, "one"), make_s3_store(bucket, "one-more/deeper")
    first.put("k", b"1")
    second.put("k", b"2")

    assert (first.get("k"), second.get("k")) == (b"1", b"2")
    assert list(first.list()) == ["k"] and list(second.list()) == ["k"]
    assert second.uri("k") == f"s3://{bucket}/one-more/deeper/k"


def test_bucket_is_created_when_missing(make_s3_store, s3_server) -> None:
    store = make_s3_store("rb-created-on-first-use")
    store.put("k", b"1")

    assert s3_server.client().bucket_exists("rb-created-on-first-use")
    assert make_s3_store("rb-created-on-first-use").get("k") == b"1"


def test_missing_bucket_without_creation_is_permanent(make_s3_store) -> None:
    store = make_s3_store("rb-never-made", create_bucket=False)

    with pytest.raises(StorageRejected):
        store.put("k", b"1")
    with pytest.raises(StorageRejected):
        store.get("k")


def test_open_store_and_settings_reach_the_server(s3_server) -> None:
    bucket = s3_server.new_bucket()
    store = open_store(s3_server.store_settings(bucket, "runs/a"))

    assert isinstance(store, MinioObjectStore)
    store.put("k", b"via settings")
    assert _raw_names(s3_server, bucket) == ["runs/a/k"]


@pytest.mark.parametrize(
    "uri", ["s3://", "s3://Bad_Bucket/x", "s3://ab/x", "s3://bucket/../x", "s3://bucket/a b", "gs://b/x"]
)
def test_malformed_s3_locations_are_config_errors(uri: str) -> None:
    with pytest.raises(ConfigError):
        parse_s3_uri(uri)


def test_parse_s3_uri() -> None:
    assert parse_s3_uri("s3://bucket") == ("bucket", "")
    assert parse_s3_uri("s3://bucket/") == ("bucket", "")
    assert parse_s3_uri("s3://my.bucket/a/b/") == ("my.bucket", "a/b")


# --- transient and permanent failures, through the real SDK ---------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _store(endpoint: str, sleeps: list[float], **options) -> MinioObjectStore:
    options.setdefault("create_bucket", False)
    return MinioObjectStore(
        "bucket",
        "p",
        endpoint=endpoint,
        access_key="AKIA-TEST",
        secret_key=SECRET,
        secure=False,
        region="us-east-1",
        sleep=sleeps.append,
        **options,
    )


def _assert_no_secret(exc: BaseException, store: MinioObjectStore) -> None:
    assert SECRET not in repr(store)
    chain: BaseException | None = exc
    while chain is not None:
        assert SECRET not in str(chain) and SECRET not in repr(chain)
        chain = chain.__cause__ or chain.__context__


def test_closed_port_is_unavailable_after_bounded_retries() -> None:
    sleeps: list[float] = []
    store = _store(f"127.0.0.1:{_free_port()}", sleeps, attempts=3, backoff=Backoff(0.5, 2.0, 0.8))

    with pytest.raises(StorageUnavailable) as caught:
        store.get("k")

    assert sleeps == [0.5, 0.8]
    assert caught.value.__cause__ is not None
    _assert_no_secret(caught.value, store)


class _Stub:
    """A loopback HTTP server answering each request with the next scripted (status, body, type)."""

    def __init__(self, answers: list[tuple[int, bytes, str]]) -> None:
        self.answers = answers
        self.requests: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                stub.requests.append(f"{self.command} {self.path}")
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                status, body, kind = stub.answers.pop(0) if len(stub.answers) > 1 else stub.answers[0]
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_HEAD = do_DELETE = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def stub() -> Iterator[Callable[..., _Stub]]:
    servers: list[_Stub] = []

    def start(*answers: tuple[int, bytes, str]) -> _Stub:
        servers.append(_Stub(list(answers)))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _xml_error(code: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>m</Message>'
        "<Resource>/bucket/p/k</Resource><RequestId>r</RequestId><HostId>h</HostId></Error>"
    ).encode()


XML = "application/xml"
EMPTY_LISTING = (
    b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bucket</Name>'
    b"<KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>"
)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (503, _xml_error("SlowDown"), XML),
        (500, _xml_error("InternalError"), XML),
        (502, b"<html>bad gateway</html>", "text/html"),
        (429, b"", "text/plain"),
    ],
)
def test_server_errors_are_transient_and_retried_a_bounded_number_of_times(
    stub, status: int, body: bytes, kind: str
) -> None:
    server = stub((status, body, kind))
    sleeps: list[float] = []
    store = _store(server.endpoint, sleeps, attempts=4)

    with pytest.raises(StorageUnavailable) as caught:
        store.get("k")

    assert server.requests == ["GET /bucket/p/k"] * 4  # the SDK's own retries are off
    assert len(sleeps) == 3 and all(0 < s <= 5.0 for s in sleeps)
    _assert_no_secret(caught.value, store)


def test_a_transient_error_then_success_returns_the_object(stub) -> None:
    server = stub((503, _xml_error("SlowDown"), XML), (200, b"payload", "application/pdf"))
    sleeps: list[float] = []

    assert _store(server.endpoint, sleeps).get("k") == b"payload"
    assert len(server.requests) == 2 and len(sleeps) == 1


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [
        (403, "AccessDenied", AuthenticationFailed),
        (403, "SignatureDoesNotMatch", AuthenticationFailed),
        (400, "InvalidArgument", StorageRejected),
        (404, "NoSuchKey", ObjectNotFound),
        (404, "NoSuchBucket", StorageRejected),
    ],
)
def test_permanent_errors_are_not_retried(stub, status: int, code: str, error: type) -> None:
    server = stub((status, _xml_error(code), XML))
    sleeps: list[float] = []
    store = _store(server.endpoint, sleeps)

    with pytest.raises(error) as caught:
        store.get("k")

    assert len(server.requests) == 1 and sleeps == []
    _assert_no_secret(caught.value, store)


def test_transient_failure_while_creating_the_bucket_is_retried(stub) -> None:
    server = stub((503, b"", "text/plain"), (200, b"", XML), (200, EMPTY_LISTING, XML))
    sleeps: list[float] = []
    store = _store(server.endpoint, sleeps, create_bucket=True)

    store.delete("k")  # HEAD bucket fails once, then exists; DELETE object; list sidecars

    assert server.requests[:3] == ["HEAD /bucket", "HEAD /bucket", "DELETE /bucket/p/k"]
    assert len(sleeps) == 1


def test_a_garbled_listing_is_transient(stub) -> None:
    server = stub((200, b"<ListBucketResult><oops", XML))

    with pytest.raises(StorageUnavailable):
        list(_store(server.endpoint, [], attempts=2).list())
    assert len(server.requests) == 2


def test_bad_endpoint_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        MinioObjectStore("bucket", endpoint="http://host:9000/path", secret_key=SECRET)


def test_invalid_keys_never_reach_the_bucket(s3_server, make_s3_store) -> None:
    bucket = s3_server.new_bucket()
    store = make_s3_store(bucket, "p")

    for key in ["../../etc/x", "/abs", "a\\b", "a//b", "x" * 2000, ".raybatch-meta/x"]:
        with pytest.raises(InvalidObjectKey):
            store.put(key, b"x", metadata={"name": "ж" * 2000})

    assert _raw_names(s3_server, bucket) == []
