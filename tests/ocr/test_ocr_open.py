"""open_ocr: which engine the settings give, and the local engine's offline model loading."""

from __future__ import annotations

from pathlib import Path

import pytest

import raybatch.ocr
from raybatch.errors import ConfigError
from raybatch.ocr import local_engine, open_ocr, rapid
from raybatch.ocr.port import PageImage
from raybatch.ocr.rapid import RapidOcrEngine
from raybatch.ocr.tesseract import TesseractOcrEngine, tesseract_available
from raybatch.ocr.vision import GoogleVisionOcr
from raybatch.settings import OcrEngineName, OcrSettings

HAS_TESSERACT = tesseract_available("eng+rus")


def test_auto_is_vision_when_an_endpoint_or_credentials_are_set() -> None:
    by_endpoint = open_ocr(OcrSettings(vision_endpoint="http://127.0.0.1:9", vision_concurrency=2))
    by_credentials = open_ocr(OcrSettings(google_application_credentials="/secrets/key.json"))

    assert isinstance(by_endpoint, GoogleVisionOcr) and by_endpoint.concurrency == 2
    assert by_endpoint.name.endswith("@emulator")
    assert isinstance(by_credentials, GoogleVisionOcr)
    assert by_credentials.name == "google-vision-v1/builtin-stable"


def test_auto_without_google_is_the_best_local_engine() -> None:
    engine = open_ocr(OcrSettings())

    assert isinstance(engine, TesseractOcrEngine if HAS_TESSERACT else RapidOcrEngine)


def test_a_broken_credentials_file_is_a_clear_config_error(tmp_path: Path) -> None:
    key = tmp_path / "key.json"
    key.write_text('{"type": "service_account"}')
    engine = open_ocr(OcrSettings(google_application_credentials=str(key)))

    with pytest.raises(ConfigError, match="GOOGLE_APPLICATION_CREDENTIALS"):
        engine.read([PageImage(1, b"png")])  # type: ignore[union-attr]


def test_explicit_choices() -> None:
    assert open_ocr(OcrSettings(ocr_engine="none")) is None
    assert isinstance(open_ocr(OcrSettings(ocr_engine="rapidocr")), RapidOcrEngine)
    assert isinstance(open_ocr(OcrSettings(ocr_engine="vision")), GoogleVisionOcr)


def test_tesseract_without_its_languages_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="tesseract-ocr"):
        open_ocr(OcrSettings(ocr_engine="tesseract", ocr_languages="eng+xx_not_installed"))


def test_local_engine_falls_back_to_rapidocr_when_tesseract_lacks_a_language() -> None:
    assert isinstance(local_engine("eng+xx_not_installed"), RapidOcrEngine)


def test_rapidocr_loads_the_models_of_its_wheel_and_never_downloads() -> None:
    loaded = rapid._engine(1)

    paths = [Path(str(getattr(loaded.cfg, part).model_path)) for part in ("Det", "Rec", "Cls")]
    assert [p.parent for p in paths] == [rapid.model_dir()] * 3
    assert all(p.is_file() for p in paths)


def test_missing_bundled_models_are_a_clear_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(rapid, "model_dir", lambda: tmp_path)

    with pytest.raises(ConfigError, match="no model is ever downloaded"):
        rapid._engine(7)


def _uninstall(monkeypatch: pytest.MonkeyPatch, engine: OcrEngineName) -> None:
    """Make an optional engine look absent, as without its extra."""
    extra = raybatch.ocr.EXTRAS[engine][1]
    monkeypatch.setitem(raybatch.ocr.EXTRAS, engine, ("raybatch_absent_module.sub", extra))


@pytest.mark.parametrize(("engine", "extra"), [("rapidocr", "rapidocr"), ("vision", "vision")])
def test_an_engine_asked_for_without_its_extra_is_a_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, engine: str, extra: str
) -> None:
    _uninstall(monkeypatch, OcrEngineName(engine))

    with pytest.raises(ConfigError, match=rf"OCR_ENGINE={engine}: .*pip install 'raybatch\[{extra}\]'"):
        open_ocr(OcrSettings(ocr_engine=engine))


def test_auto_with_vision_configured_but_not_installed_reads_locally_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _uninstall(monkeypatch, OcrEngineName.VISION)

    engine = open_ocr(OcrSettings(google_application_credentials="/secrets/key.json"))

    assert not isinstance(engine, GoogleVisionOcr) and engine is not None
    assert "raybatch[vision]" in caplog.text


def test_no_local_engine_at_all_is_none_and_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _uninstall(monkeypatch, OcrEngineName.RAPIDOCR)

    assert local_engine("eng+xx_not_installed") is None
    assert "raybatch[rapidocr]" in caplog.text
