"""The one settings object: built once at an entrypoint, handed down section by section.

A field ``poll_interval`` is set by ``--poll-interval`` where a command has the flag, then
``RAYBATCH_POLL_INTERVAL``, then ``poll_interval`` in ``raybatch.toml`` (``raybatch.settings_sources``
says how names are read). Each section is a frozen pydantic model; ``Settings`` inherits them all, so a
field is declared once.
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from raybatch.errors import ConfigError
from raybatch.models import ProcessingMode
from raybatch.settings_sources import Origin, RaybatchSources, env_name, legacy_names, sources_for

if TYPE_CHECKING:
    from raybatch.cost import ModelPrices

log = logging.getLogger(__name__)

# Anthropic's hard limits for one Message Batch (decimal MB); the packer keeps below them.
ANTHROPIC_BATCH_MAX_MB = 256
ANTHROPIC_BATCH_MAX_REQUESTS = 100_000


DEFAULT_MODEL = "claude-sonnet-5-5"


class Modality(StrEnum):
    """What a page is sent as: always an image, text alone when the text is reliable, or text only."""

    IMAGES = "images"
    ADAPTIVE = "adaptive"
    TEXT = "text"


class OcrEngineName(StrEnum):
    """Which OCR engine reads pages without a usable text layer."""

    AUTO = "auto"
    RAPIDOCR = "rapidocr"
    TESSERACT = "tesseract"
    VISION = "vision"
    NONE = "none"


class SecretUrl(SecretStr):
    """A URL that may carry a password: shown everywhere with its password masked."""

    def _display(self) -> str:
        return mask_url(self.get_secret_value())


_URL_PASSWORD = re.compile(r"(://[^/@:]*:)[^/@]*(@)")
_QUERY_PASSWORD = re.compile(r"([?&](?:password|passwd|pwd)=)[^&]*", re.IGNORECASE)


def mask_url(url: str) -> str:
    """``url`` with any password (``user:password@`` or ``?password=``) replaced by ``***``."""
    return _QUERY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***\2", url))


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class RequestSettings(_Section):
    """What a Claude request is built for and costed at: the model, its answer budget, whether the
    emulator answers, the price table (no credentials)."""

    claude_model: str = Field(DEFAULT_MODEL, description="the Claude model every request names")
    max_tokens: int = Field(
        4096, ge=256, le=64_000, description="the answer budget of one request, in tokens"
    )
    max_tokens_limit: int = Field(
        32_000,
        ge=256,
        le=128_000,
        description="the largest max_tokens an answer cut short is asked again with",
    )
    raybatch_emulator: bool = Field(False, description="answer with the built-in emulator, never Claude")
    claude_prices: str | None = Field(None, description="JSON price table overriding the defaults")
    classes_file: str | None = Field(None, description="the classes file (YAML): types, fields, split")
    split_mode: Literal["llm", "page", "file"] | None = Field(None, description="overrides the file's split")
    classes_text: str | None = Field(None, description="the classes file's text, read at the entrypoint")


class ClaudeSettings(RequestSettings):
    """Claude: credentials, model, batch limits, polling, sync concurrency, retry budget."""

    processing_mode: ProcessingMode = Field(
        ProcessingMode.BATCH, description="how jobs reach Claude: the Batch API (half price) or sync calls"
    )
    anthropic_api_key: SecretStr | None = Field(None, description="the Anthropic API key (secret)")
    anthropic_base_url: str | None = Field(None, description="another address for the Anthropic API")
    batch_size: int = Field(
        30,
        ge=1,
        description="jobs waiting that make a batch due (one a POLL_INTERVAL); a pass sends all that wait",
    )
    batch_max_mb: int = Field(
        200, ge=1, le=ANTHROPIC_BATCH_MAX_MB, description="request MB (10⁶ bytes) a batch"
    )
    batch_max_requests: int = Field(
        10_000, ge=1, le=ANTHROPIC_BATCH_MAX_REQUESTS, description="requests a batch, at most"
    )
    poll_interval: float = Field(10.0, gt=0, description="seconds between polls, the backoff's cap")
    poll_deadline: float = Field(48 * 3600.0, gt=0, description="seconds before a batch wait times out")
    sync_concurrency: int = Field(4, ge=1, le=64, description="synchronous calls in flight, at most")
    max_attempts: int = Field(3, ge=1, le=20, description="tries per chunk across batches")
    outage_budget: float = Field(
        60.0, gt=0, description="seconds a batch create waits out 429/529/5xx before the work is parked"
    )
    park_seconds: float = Field(
        300.0, gt=0, description="how long parked work (an outage, a spend limit) waits before trying again"
    )
    sweep_interval: float = Field(
        30.0, gt=0, description="seconds between the coordinator's sweeps for work nothing holds"
    )
    coordinator_idle_seconds: float = Field(
        600.0, gt=0, description="a coordinator no driver called for this long, holding no work, exits"
    )
    coordinator_lease_seconds: float = Field(
        30.0, ge=1.0, description="a coordinator silent this long loses its lead; its sync calls go again"
    )
    max_cost_usd: float | None = Field(None, gt=0, description="spend cap of one run, in US dollars")
    max_daily_cost_usd: float | None = Field(None, gt=0, description="spend cap of one UTC day, all runs")


# Claude's largest useful image side: larger images are scaled down by the API (PAGE_LONG_EDGE's cap).
CLAUDE_MAX_LONG_EDGE = 1568
MAX_PAGE_PIXELS = 150_000_000  # the default pixel budget of one source page (MAX_PAGE_PIXELS)


class PrepareSettings(_Section):
    """Rendering and request building on the prepare tasks."""

    ocr_workers: int = Field(1, ge=1, description="prepare tasks per CPU (each asks for 1/OCR_WORKERS CPU)")
    prepare_in_flight: int = Field(0, ge=0, description="cap on prepare tasks in flight; 0 = 2 x CPUs")
    page_long_edge: int = Field(
        CLAUDE_MAX_LONG_EDGE,
        ge=256,
        le=CLAUDE_MAX_LONG_EDGE,
        description="pixels of a page image's long edge",
    )
    image_format: str = Field("jpeg", pattern="^(jpeg|webp)$", description="page images as jpeg or webp")
    image_quality: int = Field(80, ge=30, le=100, description="the page images' encoder quality")
    max_page_pixels: int = Field(MAX_PAGE_PIXELS, ge=1_000_000, description="pixel budget per source page")
    page_modality: Modality = Field(Modality.ADAPTIVE, description="what a page is sent as")
    prepare_max_attempts: int = Field(3, ge=1, le=20, description="prepare tries per job, OOM kills included")
    prepare_timeout: float = Field(
        1800.0, gt=0, description="seconds a prepare task may run (from launch) before it is canceled"
    )
    max_pages_per_file: int = Field(
        10_000, ge=1, description="a file with more pages fails its job at registration, before any request"
    )
    register_timeout: float = Field(
        300.0, gt=0, description="seconds reading one file at registration may take before the file fails"
    )


class OcrSettings(_Section):
    """OCR engines: the local engine by default, Google Cloud Vision when configured."""

    ocr_engine: OcrEngineName = Field(OcrEngineName.AUTO, description="OCR for pages without a text layer")
    vision_endpoint: str | None = Field(None, description="Google Cloud Vision's address (host:port)")
    vision_concurrency: int = Field(4, ge=1, le=64, description="Vision calls in flight, at most")
    vision_batch_pages: int = Field(16, ge=1, le=16, description="pages in one Vision call")
    ocr_min_confidence: float = Field(
        0.80, ge=0, le=1, description="OCR at least this confident lets `adaptive` send a page as text alone"
    )
    ocr_languages: str = Field("eng+rus", description="Tesseract models the local engine needs")
    google_application_credentials: str | None = Field(
        None, description="a Google service account file, for Vision"
    )


class StateSettings(_Section):
    """The state database, and how long claimed work stays owned without a renewal."""

    database_url: SecretUrl = Field(
        SecretUrl(""), description="state database URL; empty: RAYBATCH_HOME/state.db"
    )
    lease_seconds: float = Field(60.0, ge=2.0, description="a dead driver's jobs are taken back after this")
    database_outage_budget: float = Field(
        600.0, gt=0, description="seconds a database call waits out an outage before its work is parked"
    )


# The S3 settings' old names (MINIO_ENDPOINT, ...): still read, each with one warning line.
RENAMED_S3_SETTINGS = {
    f"minio_{name}": f"s3_{name}" for name in ("endpoint", "access_key", "secret_key", "secure", "region")
}


class StoreSettings(_Section):
    """Object storage: a local folder or ``s3://bucket/prefix`` on S3 or MinIO. Without S3_ACCESS_KEY
    and S3_SECRET_KEY the AWS credential chain finds the keys (``raybatch.objects.s3auth``)."""

    store: str = Field("", description="output folder or s3://bucket/prefix; empty: RAYBATCH_HOME/store")
    s3_endpoint: str | None = Field(
        None,
        description="host:port of the S3 API; unset: AWS S3",
        json_schema_extra={"legacy_env": ["MINIO_ENDPOINT"]},
    )
    s3_access_key: str | None = Field(
        None,
        description="the S3 access key; unset: the AWS credential chain",
        json_schema_extra={"legacy_env": ["MINIO_ACCESS_KEY"]},
    )
    s3_secret_key: SecretStr | None = Field(
        None, description="the S3 secret key (secret)", json_schema_extra={"legacy_env": ["MINIO_SECRET_KEY"]}
    )
    s3_secure: bool = Field(
        True, description="talk to the S3 server over TLS", json_schema_extra={"legacy_env": ["MINIO_SECURE"]}
    )
    s3_region: str | None = Field(
        None, description="the S3 region", json_schema_extra={"legacy_env": ["MINIO_REGION"]}
    )
    store_outage_budget: float = Field(
        600.0, gt=0, description="seconds a store call waits out an outage before its work is parked"
    )

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        """MINIO_* (the environment, .env, keywords) read as S3_*, each with one warning line."""
        if not isinstance(data, dict) or not RENAMED_S3_SETTINGS.keys() & {str(k).lower() for k in data}:
            return data
        data = dict(data)
        for key in [k for k in data if str(k).lower() in RENAMED_S3_SETTINGS]:
            old, new = str(key).lower(), RENAMED_S3_SETTINGS[str(key).lower()]
            value = data.pop(key)
            if new in data:
                log.warning("%s is ignored: %s is set", old.upper(), new.upper())
            else:
                log.warning("%s is an old name: it is read as %s; rename it", old.upper(), new.upper())
                data[new] = value
        return data


class WriterSettings(_Section):
    """The result-writer pool and its memory budget."""

    result_workers: int = Field(2, ge=1, le=256, description="result writer actors of a run, at most")
    writer_grow_seconds: float = Field(
        2.0, ge=0, description="seconds answered jobs wait with every writer busy before another starts"
    )
    max_concurrent_mb: int = Field(1024, ge=1, description="source MiB (2²⁰ bytes) the writers hold at once")
    result_resource: str = Field("result_mb", description="the custom Ray resource the writers hold")
    write_timeout: float = Field(
        1800.0,
        gt=0,
        description="seconds one job's write may run, then stopped (a call carrying n jobs: n times)",
    )
    drain_seconds: float = Field(
        30.0,
        ge=0,
        description="on SIGTERM or Ctrl-C, seconds the writes under way may take before they go back",
    )


class OutputSettings(_Section):
    """What the writers make besides rows: searchable slices, and the documents table's file size."""

    searchable_pdf: bool = Field(
        default=True, description="scanned pages of a slice carry the OCR's text, invisibly"
    )
    table_file_mb: float = Field(
        default=128.0, gt=0, description="MiB of rows (in memory) a table file rolls at"
    )


class WorkloadSettings(_Section):
    """The workload budget shared by runs and other heavy work on the same machines: what a run
    costs, how long a lease lives, and the range each stage's concurrency moves in."""

    workload_capacity: int = Field(12, ge=0, description="units in the budget; 0 turns the budget off")
    workload_ttl_seconds: float = Field(4200.0, ge=2.0, description="a lease not renewed ends after this")
    workload_refresh_seconds: float = Field(5.0, gt=0, description="how often a run renews and re-reads")
    workload_cost_register: int = Field(1, ge=0, description="units a run holds while it registers files")
    workload_cost_prepare: int = Field(2, ge=0, description="units a run holds for preparation")
    workload_cost_write: int = Field(3, ge=0, description="units a run holds for writing results")
    workload_register_min: int = Field(2, ge=1, description="registration reads in flight, at least")
    workload_register_max: int = Field(10, ge=1, description="registration reads in flight, at most")
    workload_prepare_min: int = Field(1, ge=1, description="prepare tasks in flight, at least")
    workload_prepare_max: int = Field(
        0, ge=0, description="prepare tasks in flight, at most; 0 = PREPARE_IN_FLIGHT or 2 x CPUs"
    )


class ConsoleSettings(_Section):
    """The web console (``raybatch serve``): a shared token that logs in as a reviewer, and the key
    that signs its session cookies (a random one each start when unset)."""

    console_token: SecretStr | None = Field(None, description="a token that logs in to the console")
    console_secret: SecretStr | None = Field(None, description="the key signing the console's sessions")


class ReviewSettings(_Section):
    """Review: the score below which a document waits for a person (a class's own ``review_below``
    wins), and the doubt the built-in emulator shows (the demo's review queue)."""

    review_below: float = Field(
        default=0.7, ge=0.0, le=1.0, description="documents scoring below this wait for review"
    )
    emulator_doubt: str | None = Field(
        default=None,
        description='JSON doubt knobs of the built-in emulator, e.g. {"wrong_class_fraction": 0.1}',
    )


class RaySettings(_Section):
    """How the job reaches Ray."""

    ray_address: str | None = Field(None, description="the Ray cluster to join; unset: a local Ray")
    ray_namespace: str = Field("raybatch", description="the Ray namespace of raybatch's actors")


class Settings(
    BaseSettings,
    ClaudeSettings,
    PrepareSettings,
    OcrSettings,
    StateSettings,
    StoreSettings,
    WriterSettings,
    OutputSettings,
    WorkloadSettings,
    ConsoleSettings,
    ReviewSettings,
    RaySettings,
):
    """Every knob of raybatch, read once from flags, the environment, ``.env`` and ``raybatch.toml``."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        reader = _READER.get() or RaybatchSources(settings_cls.model_fields, None)
        return (init_settings, *sources_for(settings_cls, reader))

    raybatch_home: Path = Field(
        Path("raybatch-data"), description="where the default database and store live"
    )

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, url: SecretUrl) -> SecretUrl:
        # The URL is not repeated: a malformed one may hide its password where masking cannot find it.
        text = url.get_secret_value()
        if text and text.split(":", 1)[0].split("+", 1)[0] not in ("sqlite", "postgresql"):
            raise ValueError("neither sqlite:///PATH nor postgresql+psycopg://USER:PASSWORD@HOST/DB")
        return url

    @model_validator(mode="after")
    def _fill_defaults(self) -> Settings:
        # Defaults that depend on RAYBATCH_HOME: a SQLite file and a local folder beside it.
        home = self.raybatch_home
        if not self.database_url.get_secret_value():
            object.__setattr__(self, "database_url", SecretUrl(f"sqlite:///{home / 'state.db'}"))
        if not self.store:
            object.__setattr__(self, "store", str(home / "store"))
        if self.classes_file and not self.classes_text:  # read once here: workers never read it
            from raybatch.classes.settings import read_classes_setting

            object.__setattr__(self, "classes_text", read_classes_setting(self.classes_file))
        return self

    def section(self, kind: type[SectionT]) -> SectionT:
        """The part of the settings one component needs."""
        return kind.model_validate(self.model_dump(include=set(kind.model_fields)))

    def for_prepare_tasks(self) -> PrepareTaskSettings:
        """What a prepare task is sent: no API key, no database URL, no store secret."""
        return PrepareTaskSettings(
            prepare=self.section(PrepareSettings),
            ocr=self.section(OcrSettings),
            request=self.section(RequestSettings),
        )

    def for_writers(self) -> WriterActorSettings:
        """What a result writer is sent: the database and the store, no API key."""
        return WriterActorSettings(
            state=self.section(StateSettings),
            store=self.section(StoreSettings),
            prepare=self.section(PrepareSettings),
            request=self.section(RequestSettings),
            review=self.section(ReviewSettings),
            outputs=self.section(OutputSettings),
        )

    def for_coordinator(self) -> CoordinatorActorSettings:
        """What the coordinator is sent: Claude, the database, and the store for its answer spool."""
        return CoordinatorActorSettings(
            claude=self.section(ClaudeSettings),
            state=self.section(StateSettings),
            store=self.section(StoreSettings),
        )

    @property
    def uses_emulator(self) -> bool:
        """True when the built-in emulator was asked for (``--emulator``, ``RAYBATCH_EMULATOR=1``, demo)."""
        return self.raybatch_emulator

    def require_claude(self) -> None:
        """Refuse to start without a way to Claude: a key, or the emulator asked for explicitly."""
        model_prices(self)  # an unknown model's price stops here too
        if self.raybatch_emulator or self.anthropic_api_key is not None:
            return
        raise ConfigError(
            "ANTHROPIC_API_KEY is not set: set it to send pages to Claude, or pass --emulator "
            "(RAYBATCH_EMULATOR=1) to answer with the built-in rule-based emulator instead"
        )


SectionT = TypeVar("SectionT", bound=BaseModel)


# What each kind of Ray worker is sent: only the sections it uses (least privilege in the cluster).
class PrepareTaskSettings(_Section):
    """A prepare task's settings: rendering, OCR and the request's model."""

    prepare: PrepareSettings
    ocr: OcrSettings
    request: RequestSettings


class WriterActorSettings(_Section):
    """A result writer's settings: the database, the store, the page budget, the model's name."""

    state: StateSettings
    store: StoreSettings
    prepare: PrepareSettings
    request: RequestSettings
    review: ReviewSettings = ReviewSettings()
    outputs: OutputSettings = Field(default_factory=OutputSettings)


class CoordinatorActorSettings(_Section):
    """The coordinator's settings: Claude (with its key), the database, and the store it spools
    answers to while the database is away (it parses no source file)."""

    claude: ClaudeSettings
    state: StateSettings
    store: StoreSettings


def secret_env_names(environ: Mapping[str, str]) -> list[str]:
    """The names in ``environ`` that hold a secret setting (under any name settings read it by)."""
    secret = {
        name.upper()
        for field, info in Settings.model_fields.items()
        if _is_secret(info.annotation)
        for name in (env_name(field), *legacy_names(field, info))
    }
    return sorted(name for name in environ if name.upper() in secret)


def _is_secret(annotation: Any) -> bool:
    kinds = getattr(annotation, "__args__", None) or (annotation,)  # X | None, or X
    return any(isinstance(kind, type) and issubclass(kind, SecretStr) for kind in kinds)


_READER: contextvars.ContextVar[RaybatchSources | None] = contextvars.ContextVar("_READER", default=None)


def load_settings(*, config_file: Path | str | None = None, **overrides: Any) -> Settings:
    """Build the settings from flags (``overrides``), the environment and the config file; one clear
    error if invalid."""
    return load_settings_with_origins(config_file=config_file, **overrides)[0]


def load_settings_with_origins(
    *, config_file: Path | str | None = None, **overrides: Any
) -> tuple[Settings, dict[str, Origin]]:
    """The settings, and where each value that is not a default came from."""
    given = {k: v for k, v in overrides.items() if v is not None}
    reader = RaybatchSources(Settings.model_fields, Path(config_file) if config_file else None)
    token = _READER.set(reader)
    try:
        settings = Settings(**given)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings: {_problems(exc)}") from None
    finally:
        _READER.reset(token)
    return settings, {**reader.origins, **{key: Origin("flag") for key in given}}


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{_setting_name(err['loc'])}: {err['msg'].removeprefix('Value error, ')}" for err in exc.errors()
    )


def _setting_name(loc: tuple[Any, ...]) -> str:
    field = ".".join(str(p) for p in loc)
    return env_name(field) if field in Settings.model_fields else field.upper() or "SETTINGS"


def model_prices(claude: RequestSettings) -> ModelPrices:
    """The prices of the configured model, ``CLAUDE_PRICES`` applied."""
    from raybatch.cost import prices_for

    return prices_for(claude.claude_model, claude.claude_prices)
