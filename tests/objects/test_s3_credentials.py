"""S3 credentials against the tests' S3 server: the settings' keys, else the AWS credential chain
(environment, shared profile, instance metadata, web identity); the MINIO_* names still read."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from raybatch.errors import AuthenticationFailed, ConfigError
from raybatch.objects import open_store
from raybatch.settings import StoreSettings, load_settings

AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_ENDPOINT_URL_STS",
)
S3_VARIABLES = [f"{kind}_{name}" for kind in ("S3", "MINIO") for name in ("ENDPOINT", "REGION", "SECURE")]


@pytest.fixture(autouse=True)
def no_aws_identity(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials from this machine: no AWS variables, no shared file, no metadata service."""
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in (*AWS_VARIABLES, *S3_VARIABLES, "S3_ACCESS_KEY", "S3_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("MINIO_ACCESS_KEY", raising=False)
    monkeypatch.delenv("MINIO_SECRET_KEY", raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-such-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _keyless(s3_server, bucket: str) -> StoreSettings:
    """The server's store settings without keys: the chain must find them."""
    return s3_server.store_settings(bucket).model_copy(update={"s3_access_key": None, "s3_secret_key": None})


def _signers(s3_server, settings: StoreSettings) -> set[str | None]:
    """The access keys that signed a put, a get and a list through a store built from ``settings``."""
    start = len(s3_server.signed_by)
    store = open_store(settings)
    store.put("a/b.txt", b"hello")
    assert store.get("a/b.txt") == b"hello"
    assert list(store.list("a/")) == ["a/b.txt"]
    return set(s3_server.signed_by[start:])


def test_the_settings_keys_sign_the_requests(s3_server) -> None:
    assert _signers(s3_server, s3_server.store_settings(s3_server.new_bucket())) == {s3_server.access_key}


def test_keys_from_the_environment(s3_server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENVIRONMENT")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-from-environment")

    assert _signers(s3_server, _keyless(s3_server, s3_server.new_bucket())) == {"AKIAFROMENVIRONMENT"}


def test_keys_from_a_shared_profile(s3_server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[default]\naws_access_key_id = AKIADEFAULTPROFILE\naws_secret_access_key = s1\n\n"
        "[raybatch]\naws_access_key_id = AKIARAYBATCHPROFILE\naws_secret_access_key = s2\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_PROFILE", "raybatch")

    assert _signers(s3_server, _keyless(s3_server, s3_server.new_bucket())) == {"AKIARAYBATCHPROFILE"}


def test_keys_from_the_instance_metadata_service(
    s3_server, monkeypatch: pytest.MonkeyPatch, identity: FakeIdentity
) -> None:
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", identity.url)

    assert _signers(s3_server, _keyless(s3_server, s3_server.new_bucket())) == {"ASIAINSTANCEPROFILE"}
    assert identity.asked == ["PUT /latest/api/token", "GET role", "GET credentials"]


def test_keys_from_web_identity(
    s3_server, monkeypatch: pytest.MonkeyPatch, identity: FakeIdentity, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("eyJ.service-account-token.sig")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/raybatch")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", identity.url)

    assert _signers(s3_server, _keyless(s3_server, s3_server.new_bucket())) == {"ASIAWEBIDENTITY"}
    assert identity.asked == ["POST AssumeRoleWithWebIdentity eyJ.service-account-token.sig"]


def test_the_environment_comes_before_a_profile(
    s3_server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = AKIAPROFILE\naws_secret_access_key = s\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")

    assert _signers(s3_server, _keyless(s3_server, s3_server.new_bucket())) == {"AKIAENVIRONMENT"}


def test_without_any_credentials_the_store_says_what_to_set(s3_server) -> None:
    store = open_store(_keyless(s3_server, s3_server.new_bucket()))
    with pytest.raises(AuthenticationFailed, match=r"S3_ACCESS_KEY and S3_SECRET_KEY.*AWS_PROFILE"):
        store.put("a.txt", b"x")


def test_half_a_pair_of_keys_is_a_config_error(s3_server) -> None:
    settings = s3_server.store_settings(s3_server.new_bucket()).model_copy(update={"s3_secret_key": None})
    with pytest.raises(ConfigError, match="S3_ACCESS_KEY and S3_SECRET_KEY go together"):
        open_store(settings)


def test_the_minio_names_are_read_with_one_warning_each(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from raybatch import settings_sources

    monkeypatch.setattr(settings_sources, "_warned", set())
    monkeypatch.setenv("MINIO_ENDPOINT", "minio.internal:9000")
    monkeypatch.setenv("MINIO_SECURE", "false")
    monkeypatch.setenv("MINIO_SECRET_KEY", "old-secret")
    with caplog.at_level(logging.WARNING, logger="raybatch.settings_sources"):
        settings = load_settings()
    assert (settings.s3_endpoint, settings.s3_secure) == ("minio.internal:9000", False)
    assert settings.s3_secret_key is not None and settings.s3_secret_key.get_secret_value() == "old-secret"
    assert sorted(r.getMessage() for r in caplog.records) == [
        f"the setting MINIO_{name} is deprecated: use RAYBATCH_S3_{name}"
        for name in ("ENDPOINT", "SECRET_KEY", "SECURE")
    ]
    assert "old-secret" not in caplog.text
    caplog.clear()
    settings.section(StoreSettings)  # handing the section down warns no more
    assert not caplog.records


def test_an_s3_name_wins_over_its_old_name(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("MINIO_REGION=eu-old-1\nMINIO_ENDPOINT=from-dotenv:9000\n")
    monkeypatch.setenv("RAYBATCH_S3_REGION", "eu-new-1")
    settings = load_settings()
    assert (settings.s3_region, settings.s3_endpoint) == ("eu-new-1", "from-dotenv:9000")


# --- a fake AWS identity endpoint: the instance metadata service and STS -------------------------
class FakeIdentity:
    """What the instance metadata service and STS answer a node with a role, on loopback."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        identity = self
        role_path = "/latest/meta-data/iam/security-credentials/"

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                identity.asked.append(f"PUT {self.path}")
                self._answer("imds-session-token")

            def do_GET(self) -> None:
                if self.headers.get("X-aws-ec2-metadata-token") != "imds-session-token":
                    return self._answer("", 401)
                if self.path == role_path:
                    identity.asked.append("GET role")
                    return self._answer("raybatch-node")
                identity.asked.append("GET credentials")
                keys = {"Code": "Success", "AccessKeyId": "ASIAINSTANCEPROFILE", "SecretAccessKey": "s"}
                self._answer(json.dumps({**keys, "Token": "t", "Expiration": "2099-01-01T00:00:00Z"}))

            def do_POST(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                identity.asked.append(f"POST {query['Action'][0]} {query['WebIdentityToken'][0]}")
                self._answer(STS_ANSWER)

            def _answer(self, body: str, status: int = 200) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: object) -> None:  # quiet
                pass

        return Handler

    def __enter__(self) -> FakeIdentity:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


STS_ANSWER = """<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAWEBIDENTITY</AccessKeyId>
<SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken>
<Expiration>2099-01-01T00:00:00Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>"""


@pytest.fixture
def identity() -> Iterator[FakeIdentity]:
    with FakeIdentity() as fake:
        yield fake
