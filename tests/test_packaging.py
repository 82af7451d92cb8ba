"""pyproject.toml, uv.lock and constraints.txt: every import declared, one set of pinned versions."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
SOURCES = [REPO / name for name in ("raybatch", "tests", "bench", "jobs")]
# The standard library, and the type checker's stubs of it (imported only under TYPE_CHECKING).
STDLIB = sys.stdlib_module_names | {"_typeshed"}
LOCAL = {p.stem for f in SOURCES for p in f.rglob("*.py")} | {p.name for f in SOURCES for p in f.rglob("*/")}


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _imports(folder: Path) -> dict[str, Path]:
    """Top-level modules imported under ``folder`` that are neither the standard library nor local."""
    found: dict[str, Path] = {}
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in STDLIB and top not in LOCAL and top != "raybatch":
                    found.setdefault(top, path)
    return found


def _undeclared(folder: str, declared: set[str]) -> list[str]:
    owners = importlib.metadata.packages_distributions()
    missing = []
    for module, path in sorted(_imports(REPO / folder).items()):
        distributions = {_name(d) for d in owners.get(module, [module])}
        if not distributions & declared:
            missing.append(f"{module} ({path.relative_to(REPO)})")
    return missing


def test_every_module_the_package_imports_is_a_declared_dependency() -> None:
    declared = {
        _name(r) for r in PROJECT["dependencies"] + EXTRAS["rapidocr"] + EXTRAS["vision"] + EXTRAS["notebook"]
    }

    assert _undeclared("raybatch", declared) == []


@pytest.mark.parametrize("folder", ["tests", "bench", "jobs"])
def test_every_module_the_tests_and_tools_import_is_declared(folder: str) -> None:
    declared = {_name(r) for group in [PROJECT["dependencies"], *EXTRAS.values()] for r in group}

    assert _undeclared(folder, declared) == []


def test_the_default_install_leaves_the_optional_engines_to_their_extras() -> None:
    default = {_name(r) for r in PROJECT["dependencies"]}

    own = [re.findall(r"\w+", r.split("[", 1)[1]) for r in EXTRAS["dev"] if r.startswith("raybatch[")]

    assert not default & {"rapidocr", "onnxruntime", "opencv-python", "google-cloud-vision"}
    assert own and {"rapidocr", "vision"} <= set(own[0])  # the tests run both engines


def test_ray_is_pinned_to_the_cluster_images_version() -> None:
    image = re.search(r"rayproject/ray:([\d.]+)-", (REPO / "cluster.yaml").read_text())
    ray = next(r for r in PROJECT["dependencies"] if _name(r) == "ray")

    assert image and ray.endswith(f"=={image.group(1)}")


def test_constraints_pin_what_the_lock_pins() -> None:
    locked = {
        (_name(p["name"]), p["version"])
        for p in tomllib.loads((REPO / "uv.lock").read_text())["package"]
        if "version" in p
    }
    lines = [line.split(";")[0].strip() for line in (REPO / "constraints.txt").read_text().splitlines()]
    pins = {(_name(n), v) for n, v in (line.split("==") for line in lines if line and line[0] != "#")}

    assert pins and pins <= locked
    assert ("ray", "2.60.0") in pins


def test_the_package_says_the_version_pyproject_gives() -> None:
    import raybatch

    assert raybatch.__version__ == PROJECT["version"]


def test_the_licence_is_agpl_as_pymupdfs_and_ships_in_the_package() -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.split("\n", 2)[:2] == [
        "                    GNU AFFERO GENERAL PUBLIC LICENSE",
        "                       Version 3, 19 November 2007",
    ]
    assert "13. Remote Network Interaction; Use with the GNU General Public License." in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) == 661  # the FSF's text, whole
    assert PROJECT["license"] == "AGPL-3.0-or-later"  # PyMuPDF's AGPL-3.0 allows no less
    assert PROJECT["license-files"] == ["LICENSE"]
    build = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]
    assert "setuptools>=77" in build["requires"]  # the first that reads an SPDX licence expression


def test_the_metadata_names_its_source_and_classifiers() -> None:
    classifiers = PROJECT["classifiers"]
    assert not [c for c in classifiers if c.startswith("License ::")]  # the SPDX expression says it
    low = PROJECT["requires-python"].removeprefix(">=")
    assert f"Programming Language :: Python :: {low}" in classifiers
    assert {"Homepage", "Source", "Issues"} <= set(PROJECT["urls"])
    assert all(url.startswith("https://") for url in PROJECT["urls"].values())
