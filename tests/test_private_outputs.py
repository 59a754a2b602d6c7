"""Issue 34 item 4: what README's commands write stays out of git, and `privlab release` refuses
to write its private transcript where one `git add .` would commit it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from privlab.mechanisms.release import bundle
from privlab.mechanisms.release import run_release as release_run
from privlab.platform.cli.main import EXIT_INPUT, main
from privlab.platform.core.errors import SpecError

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "experiments" / "births" / "release.toml"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _repo(folder: Path, gitignore: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    if gitignore is not None:
        (folder / ".gitignore").write_text(gitignore)
    return folder


def _ignored(repo: Path, *paths: str) -> set[str]:
    found = subprocess.run(["git", "-C", str(repo), "check-ignore", "--no-index", "--", *paths],
                           capture_output=True, text=True)
    assert found.returncode in (0, 1), found.stderr
    return set(found.stdout.splitlines())


def _readme_outputs() -> tuple[list[str], list[str]]:
    """The folders (``--out``) and files (``--plot``, ``> FILE``) README's commands write, relative to
    the checkout's top; placeholders (``DIR``) and the shortlists (committed on purpose) left out."""
    commands = " ".join(line for block in re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
                        for line in block.splitlines() if not line.lstrip().startswith("#"))
    folders, files = [], []
    for flag, path in re.findall(r"(--out|--plot|--output|>)\s+(\S+)", commands):
        if path.isupper() or path.startswith("experiments/"):
            continue
        (folders if flag == "--out" else files).append(path.rstrip("/"))
    return folders, files


def test_every_output_of_readme_commands_is_ignored(tmp_path: Path) -> None:
    folders, files = _readme_outputs()
    assert {"release", "again", "acs-release", "adult-synthetics"} <= set(folders) and "q.csv" in files
    repo = _repo(tmp_path / "checkout", (ROOT / ".gitignore").read_text())
    for name in ("mlflow.db", "mlflow.db.lock", "mlruns/0/meta.yaml", ".privlab/cluster/state.json", *files):
        assert _ignored(repo, name) == {name}, name
    for folder in folders:
        assert bundle.unignored_transcript_paths(repo / folder) == [], folder
        assert _ignored(repo, f"{folder}/released.csv") == {f"{folder}/released.csv"}, folder
    # the code and the experiments are not
    assert _ignored(repo, "mechanisms/release/bundle.py", "experiments/births/shortlist.toml") == set()


def test_unignored_places_are_named_as_gitignore_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo(tmp_path / "repo")
    assert bundle.unignored_transcript_paths(repo / "a" / "b" / "out") == [
        "/a/b/out/", "/a/b/.out.partial-*/", "/a/b/out.transcript*.bin"]
    (repo / ".gitignore").write_text("/a/b/out/\n")
    assert bundle.unignored_transcript_paths(repo / "a" / "b" / "out") == [
        "/a/b/.out.partial-*/", "/a/b/out.transcript*.bin"]
    (repo / ".gitignore").write_text("/a/b/out/\n.*.partial-*/\n*.transcript*.bin\n")
    assert bundle.unignored_transcript_paths(repo / "a" / "b" / "out") == []
    assert bundle.unignored_transcript_paths(tmp_path / "elsewhere" / "out") == []  # in no work tree
    monkeypatch.setattr(shutil, "which", lambda name: None)  # git not installed: nothing to check
    assert bundle.unignored_transcript_paths(repo / "top") == []


def test_release_refuses_an_unignored_transcript_before_reading_or_spending(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("read before the refusal")

    monkeypatch.setattr(release_run, "load_shortlist", no_read)
    monkeypatch.setattr(release_run, "load_private_data", no_read)
    repo = _repo(tmp_path / "repo")
    out = repo / "release"
    assert main(["release", str(SPEC), "--data", str(tmp_path / "private.csv"), "--out", str(out)]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "inside a git work tree that does not ignore the release's private transcript" in err
    assert "outside the repository" in err and "/release/" in err and "--force" in err
    assert sorted(p.name for p in repo.iterdir()) == [".git"]

    def stop_here(*args: object, **kwargs: object) -> None:
        raise SpecError("past the check")

    monkeypatch.setattr(release_run, "load_shortlist", stop_here)
    assert main(["release", str(SPEC), "--data", str(tmp_path / "private.csv"), "--out", str(out), "--force"]) \
        == EXIT_INPUT
    assert "past the check" in capsys.readouterr().err


def test_release_warns_when_the_bundles_public_files_would_show_in_git(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 46: `--out my-release/` inside the checkout was not refused (the broad
    `**/private/transcript.bin` rule hides the transcript) and its public files showed in `git status`."""
    def stop_here(*args: object, **kwargs: object) -> None:
        raise SpecError("past the checks")

    monkeypatch.setattr(release_run, "load_shortlist", stop_here)
    repo = _repo(tmp_path / "repo", "**/private/transcript.bin\n.*.partial-*/\n*.transcript.bin\n*.transcript-*.bin\n")
    out = repo / "my-release"
    assert main(["release", str(SPEC), "--data", str(tmp_path / "private.csv"), "--out", str(out)]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert f"privlab: warning: --out {str(out)!r} is inside the git work tree {str(repo.resolve())!r}" in err
    assert "git status" in err and "past the checks" in err
    (repo / ".gitignore").write_text((repo / ".gitignore").read_text() + "/my-release/\n")
    assert bundle.public_files_shown_by_git(out) is None
    assert bundle.public_files_shown_by_git(tmp_path / "elsewhere" / "out") is None  # in no work tree


def test_shortlist_never_replaces_a_file_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 46: README's `privlab shortlist` commands replaced the committed shortlists (births:
    102 configurations × 10 attempts became 14 × 1) without a word."""
    committed = tmp_path / "shortlist.toml"
    committed.write_text("# committed\n")
    assert main(["shortlist", "0123abcd", "--out", str(committed), "--tracking-uri",
                 f"sqlite:///{tmp_path / 'missing.db'}"]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "exists" in err and "--force" in err and "nothing was written" in err
    assert committed.read_text() == "# committed\n" and not (tmp_path / "missing.db").exists()
