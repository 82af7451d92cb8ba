"""Where the S3 keys come from: the settings' own keys when given, else the AWS credential chain.

The chain is the one the AWS SDKs follow, in their order: the environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``); the shared credentials file
(``AWS_SHARED_CREDENTIALS_FILE`` or ``~/.aws/credentials``, profile ``AWS_PROFILE`` or ``default``);
web identity (``AWS_WEB_IDENTITY_TOKEN_FILE`` with ``AWS_ROLE_ARN``: IRSA on EKS), or ECS container
credentials; then the EC2 instance metadata service (an instance profile), unless
``AWS_EC2_METADATA_DISABLED=true``. Like every AWS SDK it reads those standard variables itself, in
the process that touches the store: keys it finds never travel in settings or task arguments, and
temporary ones are renewed when they expire.
"""

from __future__ import annotations

import os

import urllib3
from minio.credentials import (
    AWSConfigProvider,
    ChainedProvider,
    Credentials,
    EnvAWSProvider,
    IamAwsProvider,
    Provider,
    StaticProvider,
)
from pydantic import SecretStr

from raybatch.errors import AuthenticationFailed, ConfigError

NO_CREDENTIALS = (
    "no S3 credentials: set S3_ACCESS_KEY and S3_SECRET_KEY, or AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY, or a shared profile (AWS_PROFILE), or run with an instance profile "
    "or web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN)"
)
METADATA_TIMEOUT = urllib3.Timeout(connect=1.0, read=2.0)  # off EC2 the metadata service is not there


def s3_credentials(access_key: str | None, secret_key: SecretStr | None) -> Provider:
    """Static keys when the settings give them (both, or neither), else the AWS credential chain."""
    if access_key is None and secret_key is None:
        return AwsCredentialChain()
    if not access_key or secret_key is None or not secret_key.get_secret_value():
        raise ConfigError("S3_ACCESS_KEY and S3_SECRET_KEY go together: set both, or neither")
    return StaticProvider(access_key, secret_key.get_secret_value())


class AwsCredentialChain(Provider):
    """The AWS credential chain; AuthenticationFailed (permanent) when no link has keys."""

    def __init__(self) -> None:
        links: list[Provider] = [EnvAWSProvider(), AWSConfigProvider()]
        role = _role_provider()
        if role is not None:
            links.append(role)
        self._chain = ChainedProvider(links)

    def retrieve(self) -> Credentials:
        """The first keys found (cached by the chain until they expire)."""
        try:
            return self._chain.retrieve()
        except ValueError:
            raise AuthenticationFailed(NO_CREDENTIALS) from None


def _role_provider() -> Provider | None:
    """Web identity, container or instance-metadata credentials, whichever this process is set up for."""
    environ = os.environ
    http = urllib3.PoolManager(timeout=METADATA_TIMEOUT, retries=False)  # our callers retry outages
    if environ.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        sts = environ.get("AWS_ENDPOINT_URL_STS")  # the SDKs' name for a custom STS endpoint
        return IamAwsProvider(custom_endpoint=sts, http_client=http)
    if environ.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") or environ.get(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI"
    ):
        return IamAwsProvider(http_client=http)
    if environ.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        return None
    endpoint = environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT")
    return _Absent(IamAwsProvider(custom_endpoint=endpoint, http_client=http))


class _Absent(Provider):
    """A link that may simply not be there (no metadata service off EC2): unreachable means no keys."""

    def __init__(self, provider: Provider) -> None:
        self._provider = provider

    def retrieve(self) -> Credentials:
        try:
            return self._provider.retrieve()
        except (urllib3.exceptions.HTTPError, OSError, KeyError) as exc:
            raise ValueError(f"no instance metadata: {type(exc).__name__}") from None
