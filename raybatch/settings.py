"""The one settings object: built once at an entrypoint, handed down section by section.

Field names are the environment names (case-insensitive): ``POLL_INTERVAL=5`` sets ``poll_interval``.
Each section is a frozen pydantic model; ``Settings`` inherits them all, so a field is declared once.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from raybatch.errors import ConfigError

if TYPE_CHECKING:
    from raybatch.cost import ModelPrices

# Anthropic's hard limits for one Message Batch; the packer keeps below them.
ANTHROPIC_BATCH_MAX_MB = 256
ANTHROPIC_BATCH_MAX_REQUESTS = 100_000


DEFAULT_MODEL = "claude-sonnet-5-5"


class ProcessingMode(StrEnum):
    """How chunks reach Claude: the Batch API (half price) or synchronous Messages calls."""

    BATCH = "batch"
    SYNC = "sync"


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


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ClaudeSettings(_Section):
    """Claude: credentials, model, batch limits, polling, sync concurrency, retry budget."""

    processing_mode: ProcessingMode = ProcessingMode.BATCH
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    claude_model: str = DEFAULT_MODEL
    max_tokens: int = Field(4096, ge=256, le=64_000)
    batch_size: int = Field(30, ge=1, description="jobs taken per submit pass")
    batch_max_mb: int = Field(200, ge=1, le=ANTHROPIC_BATCH_MAX_MB)
    batch_max_requests: int = Field(10_000, ge=1, le=ANTHROPIC_BATCH_MAX_REQUESTS)
    poll_interval: float = Field(10.0, gt=0, description="seconds between polls, the backoff's cap")
    poll_deadline: float = Field(48 * 3600.0, gt=0, description="seconds before a batch wait times out")
    sync_concurrency: int = Field(4, ge=1, le=64)
    max_attempts: int = Field(3, ge=1, le=20, description="tries per chunk across batches")
    raybatch_emulator: bool = Field(False, description="answer with the built-in emulator, never Claude")
    claude_prices: str | None = Field(None, description="JSON price table overriding the defaults")
    max_cost_usd: float | None = Field(None, gt=0, description="spend cap of one run, in US dollars")
    max_daily_cost_usd: float | None = Field(None, gt=0, description="spend cap of one UTC day, all runs")


class PrepareSettings(_Section):
    """Rendering and request building on the prepare tasks."""

    ocr_workers: int = Field(1, ge=1, description="parallel page preparations per node")
    prepare_in_flight: int = Field(0, ge=0, description="cap on prepare tasks in flight; 0 = 2 x CPUs")
    page_long_edge: int = Field(1568, ge=256, le=1568)
    image_format: str = Field("jpeg", pattern="^(jpeg|webp)$")
    image_quality: int = Field(80, ge=30, le=100)
    max_page_pixels: int = Field(150_000_000, ge=1_000_000, description="pixel budget per source page")
    page_modality: Modality = Modality.ADAPTIVE
    prepare_max_attempts: int = Field(3, ge=1, le=20, description="prepare tries per job, OOM kills included")


class OcrSettings(_Section):
    """OCR engines: the local engine by default, Google Cloud Vision when configured."""

    ocr_engine: OcrEngineName = OcrEngineName.AUTO
    vision_endpoint: str | None = None
    vision_concurrency: int = Field(4, ge=1, le=64)
    vision_batch_pages: int = Field(16, ge=1, le=16)
    ocr_min_confidence: float = Field(0.80, ge=0, le=1)
    ocr_languages: str = Field("eng+rus", description="Tesseract models the local engine needs")
    google_application_credentials: str | None = None


class StateSettings(_Section):
    """The state database, and how long claimed work stays owned without a renewal."""

    database_url: str = ""
    lease_seconds: float = Field(60.0, ge=2.0, description="a dead driver's jobs are taken back after this")


class StoreSettings(_Section):
    """Object storage: a local folder or ``s3://bucket/prefix`` on MinIO/S3."""

    store: str = ""
    minio_endpoint: str | None = None
    minio_access_key: str | None = None
    minio_secret_key: SecretStr | None = None
    minio_secure: bool = True
    minio_region: str | None = None


class WriterSettings(_Section):
    """The result-writer pool and its memory budget."""

    result_workers: int = Field(2, ge=1, le=256)
    max_concurrent_mb: int = Field(1024, ge=1)
    result_resource: str = "result_mb"


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
    RaySettings,
):
    """Every knob of raybatch, read from the environment (and ``.env``) once."""

    model_config = SettingsConfigDict(
        case_sensitive=False, extra="ignore", frozen=True, env_file=".env", env_file_encoding="utf-8"
    )

    raybatch_home: Path = Path("raybatch-data")

    @model_validator(mode="after")
    def _fill_defaults(self) -> Settings:
        # Defaults that depend on RAYBATCH_HOME: a SQLite file and a local folder beside it.
        home = self.raybatch_home
        if not self.database_url:
            object.__setattr__(self, "database_url", f"sqlite:///{home / 'state.db'}")
        if not self.store:
            object.__setattr__(self, "store", str(home / "store"))
        return self

    def section(self, kind: type[SectionT]) -> SectionT:
        """The part of the settings one component needs."""
        return kind.model_validate(self.model_dump(include=set(kind.model_fields)))

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


def load_settings(**overrides: Any) -> Settings:
    """Build the settings from the environment plus explicit overrides; one clear error if invalid."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']).upper() or 'SETTINGS'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"invalid settings: {problems}") from None


def model_prices(claude: ClaudeSettings) -> ModelPrices:
    """The prices of the configured model, ``CLAUDE_PRICES`` applied."""
    from raybatch.cost import prices_for

    return prices_for(claude.claude_model, claude.claude_prices)
