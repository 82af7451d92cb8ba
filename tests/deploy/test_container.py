"""The Dockerfile, read without Docker: it installs from uv.lock with the Makefile's uv, the Python and
Ray of the cluster image, the default extras, runs as a numeric non-root user, and its entrypoint is
the CLI; .dockerignore lets in what the image is built from and keeps secrets out."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest
from test_ignore_files import SECRET_FILES

from raybatch.cli import main

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, continued lines joined."""
    kept = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    joined = re.sub(r"\\\n", " ", kept)
    found = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


DOCKERFILE = instructions((REPO / "Dockerfile").read_text())


def _final_stage() -> list[tuple[str, str]]:
    starts = [i for i, (word, _) in enumerate(DOCKERFILE) if word == "FROM"]
    return DOCKERFILE[starts[-1] :]


def _runs() -> list[str]:
    return [args for word, args in DOCKERFILE if word == "RUN"]


def test_it_installs_from_the_lock_with_the_makefiles_uv() -> None:
    syncs = [r for r in _runs() if "uv sync" in r]
    assert syncs and all("--frozen" in r for r in syncs)  # exactly uv.lock's versions, never re-resolved
    assert not any(re.search(r"\bpip install\b", r) for r in _runs())
    copies = [args for word, args in DOCKERFILE if word == "COPY"]
    assert any("uv.lock" in c.split() for c in copies)
    uv_image = next(c for c in copies if "astral-sh/uv:" in c)
    make_uv = re.search(r"^UV_VERSION := (\S+)", (REPO / "Makefile").read_text(), re.M)
    assert make_uv and f"astral-sh/uv:{make_uv.group(1)} " in uv_image


def test_it_has_the_default_extras_only() -> None:
    syncs = " ".join(r for r in _runs() if "uv sync" in r)
    assert "--extra dev" not in syncs and "--all-extras" not in syncs
    arg = next(args for word, args in DOCKERFILE if word == "ARG" and args.startswith("EXTRAS"))
    assert arg == 'EXTRAS=""'  # more only when asked for: --build-arg EXTRAS="vision"
    assert all(extra in PROJECT["optional-dependencies"] for extra in ("vision", "rapidocr"))


def test_python_and_ray_are_the_cluster_images() -> None:
    image = re.search(r"rayproject/ray:([\d.]+)-py3(\d+)-", (REPO / "cluster.yaml").read_text())
    assert image
    bases = {args.split()[0] for word, args in DOCKERFILE if word == "FROM"}
    assert bases == {f"python:3.{image.group(2)}-slim-bookworm"}
    assert f"ray[default]=={image.group(1)}" in PROJECT["dependencies"]


def test_it_runs_as_a_numeric_user_that_is_not_root() -> None:
    users = [args for word, args in _final_stage() if word == "USER"]
    assert users, "the image runs as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0  # numeric: Kubernetes can check runAsNonRoot
    assert any(f"--uid {uid}" in r for r in _runs())  # and that user exists


def test_the_entrypoint_is_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    stage = dict(_final_stage())
    entrypoint, command = json.loads(stage["ENTRYPOINT"]), json.loads(stage["CMD"])
    assert entrypoint == ["raybatch"] and PROJECT["scripts"]["raybatch"] == "raybatch.cli:main"
    assert "/opt/raybatch/bin" in stage["ENV"]  # where uv installed the script, first on PATH
    with pytest.raises(SystemExit) as done:
        main(command)  # the default command is one the CLI takes
    assert done.value.code == 0 and "run" in capsys.readouterr().out


def test_the_build_context_lets_in_what_the_image_copies_and_keeps_secrets_out() -> None:
    ignore = _ignore_rules((REPO / ".dockerignore").read_text())
    copied = {
        word
        for word_, args in DOCKERFILE
        if word_ == "COPY" and "--from=" not in args
        for word in shlex.split(args)[:-1]
    }
    assert copied == {"pyproject.toml", "uv.lock", "README.md", "LICENSE", "raybatch"}
    for path in [
        "pyproject.toml",
        "uv.lock",
        "LICENSE",
        "raybatch/cli.py",
        "raybatch/ocr/tessdata/README.md",
    ]:
        assert not _ignored(ignore, path), path
    for path in [*SECRET_FILES, "raybatch/.env", "raybatch/tls/x.key", ".venv/bin/python", ".git/config"]:
        assert _ignored(ignore, path), path
    assert _ignored(ignore, "raybatch/__pycache__/cli.cpython-311.pyc")


def _ignore_rules(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    """(exception?, pattern) per line, as Docker reads .dockerignore (the last matching line wins)."""
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated, pattern = line.startswith("!"), line.lstrip("!").strip("/")
        regex = re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        rules.append((negated, re.compile(regex)))
    return rules


def _ignored(rules: list[tuple[bool, re.Pattern[str]]], path: str) -> bool:
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]  # a matched folder takes its files
    verdict = False
    for negated, pattern in rules:
        if any(pattern.fullmatch(p) for p in prefixes):
            verdict = not negated
    return verdict
