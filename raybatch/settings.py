"""The one settings object: built once at an entrypoint, handed down section by section.

Field names are the environment names (case-insensitive): ``POLL_INTERVAL=5`` sets ``poll_interval``.
Each section is a frozen pydantic model; ``Settings`` inherits them all, so a field is declared once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from raybatch.errors import ConfigError
from raybatch.models import ProcessingMode

if TYPE_CHECKING:
    from raybatch.cost import ModelPrices

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

    claude_model: str = DEFAULT_MODEL
    max_tokens: int = Field(4096, ge=256, le=64_000)
    raybatch_emulator: bool = Field(False, description="answer with the built-in emulator, never Claude")
    claude_prices: str | None = Field(None, description="JSON price table overriding the defaults")


class ClaudeSettings(RequestSettings):
    """Claude: credentials, model, batch limits, polling, sync concurrency, retry budget."""

    processing_mode: ProcessingMode = Field(
        ProcessingMode.BATCH, description="how jobs reach Claude: the Batch API (half price) or sync calls"
    )
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    batch_size: int = Field(30, ge=1, description="jobs taken per submit pass")
    batch_max_mb: int = Field(
        200, ge=1, le=ANTHROPIC_BATCH_MAX_MB, description="request MB (10⁶ bytes) a batch"
    )
    batch_max_requests: int = Field(10_000, ge=1, le=ANTHROPIC_BATCH_MAX_REQUESTS)
    poll_interval: float = Field(10.0, gt=0, description="seconds between polls, the backoff's cap")
    poll_deadline: float = Field(48 * 3600.0, gt=0, description="seconds before a batch wait times out")
    sync_concurrency: int = Field(4, ge=1, le=64)
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

    ocr_workers: int = Field(1, ge=1, description="parallel page preparations per node")
    prepare_in_flight: int = Field(0, ge=0, description="cap on prepare tasks in flight; 0 = 2 x CPUs")
    page_long_edge: int = Field(CLAUDE_MAX_LONG_EDGE, ge=256, le=CLAUDE_MAX_LONG_EDGE)
    image_format: str = Field("jpeg", pattern="^(jpeg|webp)$")
    image_quality: int = Field(80, ge=30, le=100)
    max_page_pixels: int = Field(MAX_PAGE_PIXELS, ge=1_000_000, description="pixel budget per source page")
    page_modality: Modality = Field(Modality.ADAPTIVE, description="what a page is sent as")
    prepare_max_attempts: int = Field(3, ge=1, le=20, description="prepare tries per job, OOM kills included")
    prepare_timeout: float = Field(
        1800.0, gt=0, description="seconds a prepare task may run (from launch) before it is canceled"
    )


class OcrSettings(_Section):
    """OCR engines: the local engine by default, Google Cloud Vision when configured."""

    ocr_engine: OcrEngineName = Field(OcrEngineName.AUTO, description="OCR for pages without a text layer")
    vision_endpoint: str | None = None
    vision_concurrency: int = Field(4, ge=1, le=64)
    vision_batch_pages: int = Field(16, ge=1, le=16)
    ocr_min_confidence: float = Field(0.80, ge=0, le=1)
    ocr_languages: str = Field("eng+rus", description="Tesseract models the local engine needs")
    google_application_credentials: str | None = None


class StateSettings(_Section):
    """The state database, and how long claimed work stays owned without a renewal."""

    database_url: SecretUrl = Field(
        SecretUrl(""), description="state database URL; empty: RAYBATCH_HOME/state.db"
    )
    lease_seconds: float = Field(60.0, ge=2.0, description="a dead driver's jobs are taken back after this")
    database_outage_budget: float = Field(
        600.0, gt=0, description="seconds a database call waits out an outage before its work is parked"
    )


class StoreSettings(_Section):
    """Object storage: a local folder or ``s3://bucket/prefix`` on MinIO/S3."""

    store: str = Field("", description="output folder or s3://bucket/prefix; empty: RAYBATCH_HOME/store")
    minio_endpoint: str | None = None
    minio_access_key: str | None = None
    minio_secret_key: SecretStr | None = None
    minio_secure: bool = True
    minio_region: str | None = None
    store_outage_budget: float = Field(
        600.0, gt=0, description="seconds a store call waits out an outage before its work is parked"
    )


class WriterSettings(_Section):
    """The result-writer pool and its memory budget."""

    result_workers: int = Field(2, ge=1, le=256, description="result writer actors of a run, at most")
    writer_grow_seconds: float = Field(
        2.0, ge=0, description="seconds answered jobs wait with every writer busy before another starts"
    )
    max_concurrent_mb: int = Field(1024, ge=1, description="source MiB (2²⁰ bytes) the writers hold at once")
    result_resource: str = "result_mb"
    write_timeout: float = Field(1800.0, gt=0, description="seconds one job's write may run, then stopped")


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


class RaySettings(_Section):
    """How the job reaches Ray."""

    ray_address: str | None = None
    ray_namespace: str = "raybatch"


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
    RaySettings,
):
    """Every knob of raybatch, read from the environment (and ``.env``) once."""

    model_config = SettingsConfigDict(
        case_sensitive=False, extra="ignore", frozen=True, env_file=".env", env_file_encoding="utf-8"
    )

    raybatch_home: Path = Path("raybatch-data")

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
            outputs=self.section(OutputSettings),
        )

    def for_coordinator(self) -> CoordinatorActorSettings:
        """What the coordinator is sent: Claude and the database, no store secret."""
        claude, state = self.section(ClaudeSettings), self.section(StateSettings)
        return CoordinatorActorSettings(claude=claude, state=state)

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
    outputs: OutputSettings = Field(default_factory=OutputSettings)


class CoordinatorActorSettings(_Section):
    """The coordinator's settings: Claude (with its key) and the database."""

    claude: ClaudeSettings
    state: StateSettings


def secret_env_names(environ: Mapping[str, str]) -> list[str]:
    """The names in ``environ`` that hold a secret setting (any case, as settings read them)."""
    secret = {name.upper() for name, field in Settings.model_fields.items() if _is_secret(field.annotation)}
    return sorted(name for name in environ if name.upper() in secret)


def _is_secret(annotation: Any) -> bool:
    kinds = getattr(annotation, "__args__", None) or (annotation,)  # X | None, or X
    return any(isinstance(kind, type) and issubclass(kind, SecretStr) for kind in kinds)


def load_settings(**overrides: Any) -> Settings:
    """Build the settings from the environment plus explicit overrides; one clear error if invalid."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']).upper() or 'SETTINGS'}: "
            f"{err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()
        )
        raise ConfigError(f"invalid settings: {problems}") from None


def model_prices(claude: RequestSettings) -> ModelPrices:
    """The prices of the configured model, ``CLAUDE_PRICES`` applied."""
    from raybatch.cost import prices_for

    return prices_for(claude.claude_model, claude.claude_prices)
