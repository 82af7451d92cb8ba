"""Settings files and credentials never travel: ``ray job submit --working-dir .`` leaves them out
(``.rayignore``) and git does not take them (``.gitignore``)."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

from needs import needs

REPO = Path(__file__).resolve().parents[1]
SECRET_FILES = [
    ".env",
    ".env.local",
    "prod.env",
    ".envrc",
    "jobs/.env",
    ".netrc",
    "credentials",
    "gcp-credentials.json",
    "my-service-account.json",
    "tls/server.pem",
    "tls/server.key",
]
KEPT_FILES = ["raybatch/settings.py", "jobs/process.py", "README.md", "cluster.yaml"]


def test_job_uploads_leave_secret_files_out(tmp_path: Path) -> None:
    from ray._private.runtime_env.packaging import create_package

    work = tmp_path / "work"
    for name in [*SECRET_FILES, *KEPT_FILES]:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("ANTHROPIC_API_KEY=sk-not-a-real-key\n")
    shutil.copy(REPO / ".rayignore", work / ".rayignore")
    package = tmp_path / "package.zip"
    # .gitignore off: the upload must hold without it (RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1).
    create_package(str(work), package, include_gitignore=False)
    uploaded = set(zipfile.ZipFile(package).namelist())
    assert set(KEPT_FILES) <= uploaded
    assert not uploaded & set(SECRET_FILES)


@needs(shutil.which("git") is not None, "git is not installed")
def test_git_ignores_secret_files(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    shutil.copy(REPO / ".gitignore", tmp_path / ".gitignore")
    check = ["git", "-C", str(tmp_path), "check-ignore", "--no-index", "--stdin"]
    done = subprocess.run(check, input="\n".join(SECRET_FILES + KEPT_FILES), capture_output=True, text=True)
    assert sorted(done.stdout.split()) == sorted(SECRET_FILES)


def test_a_runs_local_store_and_sqlite_file_inside_the_working_directory_never_travel(tmp_path: Path) -> None:
    from ray._private.runtime_env.packaging import create_package

    from raybatch.settings import load_settings
    from raybatch.uploads import keep_out_of_uploads, local_paths

    work = tmp_path / "work"
    (work / "jobs").mkdir(parents=True)
    (work / "jobs" / "process.py").write_text("print()\n")
    shutil.copy(REPO / ".rayignore", work / ".rayignore")
    settings = load_settings(store=str(work / "outputs"), database_url=f"sqlite:///{work / 'state' / 'runs'}")
    added = keep_out_of_uploads(local_paths(settings), work)
    assert keep_out_of_uploads(local_paths(settings), work) == [], "said once"
    for name in ["outputs/db-1/jobs/1/documents/0.txt", "state/runs", "state/runs-wal", "state/x.db"]:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("page text\n")
    package = tmp_path / "package.zip"
    create_package(str(work), package, include_gitignore=False)
    uploaded = set(zipfile.ZipFile(package).namelist())
    assert added == ["/outputs/", "/state/runs*"]
    assert "jobs/process.py" in uploaded
    assert not {name for name in uploaded if name.startswith(("outputs/", "state/"))}
