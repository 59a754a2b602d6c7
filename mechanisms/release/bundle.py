"""The release bundle: an atomically written folder of public files plus a private transcript.

Layout of ``DIR`` (written by :func:`privlab.mechanisms.release.run_release.run_release`)::

    released.csv            the accepted release candidate, decoded to the raw schema
    released.parquet        the same table as parquet
    acceptance.json         each criterion's DP value, threshold, ε, mechanism, bounds,
    acceptance.md           sensitivity and noise scale (like Hod & Canetti's Table 2)
    config.toml             the selected configuration and the spec's budget split
    ledger.json             the privacy ledger: one private-selection event, and the accepted
                            flow's own split of ε₁
    privacy-statement.md    the ε and the argument, in plain language
    README.md               the datasheet for data users (Section 4.13)
    transcript-seal.txt     the head of the transcript's hash chain (what ``privlab verify`` checks)
    SHA256SUMS              ``sha256sum -c`` lines for every public file above
    private/transcript.bin  every random draw of the run; as sensitive as the private data

:func:`atomic_directory` stages everything in a hidden temporary folder next to ``DIR`` and
renames it into place only when every file is written and flushed, so ``DIR`` either holds a
whole bundle or does not exist. Every public file is a deterministic function of the DP outputs
and the public inputs (no clock, host or path inside), so a replay of the transcript writes
byte-identical public files.

Privacy:
    The public files hold only DP outputs (the accepted candidate, the criteria's noisy values
    and decisions), public inputs (schema, spec, shortlist, thresholds, budgets) and ``n``,
    which the scheme treats as public (Hod & Canetti 2024, Section 4.4.2). No hash of the
    private data is published: a hash would let anyone confirm a guess of the whole dataset.
    ``private/`` must stay where the private data is.

References:
    Hod & Canetti (2024), Sections 4.11-4.13 and Table 2.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privlab.mechanisms.tabular.bundle_files import CHECKSUMS, json_text, partial_prefix, write_text
from privlab.platform.core.errors import SpecError

#: The public files of a bundle, in the order SHA256SUMS lists them.
PUBLIC_FILES = (
    "released.csv",
    "released.parquet",
    "acceptance.json",
    "acceptance.md",
    "config.toml",
    "ledger.json",
    "privacy-statement.md",
    "README.md",
    "transcript-seal.txt",
)
PRIVATE_DIR = "private"
TRANSCRIPT = "private/transcript.bin"
#: Every file a release writes besides ``private/`` (which a published copy leaves out), as
#: :func:`bundle_entries` names them.
RELEASE_FILES = (*PUBLIC_FILES, CHECKSUMS)
#: What a release bundle may also hold: the transcript in ``private/``, or ``private/`` emptied.
PRIVATE_ENTRIES = (TRANSCRIPT, f"{PRIVATE_DIR}/")


def _work_tree_of(out: Path) -> tuple[str, Path, Path] | None:
    """(git, the work tree's root, ``out`` relative to it) when ``out`` lies in a git work tree;
    None when git is absent, ``out`` is outside any work tree, or git cannot tell."""
    git = shutil.which("git")
    if git is None:
        return None
    out = Path(out).absolute()
    folder = out.parent
    while not folder.exists():
        folder = folder.parent
    try:
        top = subprocess.run([git, "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=60)
        if top.returncode != 0 or not top.stdout.strip():
            return None
        root = Path(top.stdout.strip()).resolve()
        return git, root, (folder.resolve() / out.relative_to(folder)).relative_to(root)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def unignored_transcript_paths(out: Path) -> list[str]:
    """Where a release into ``out`` would write its transcript inside a git work tree that does
    not ignore it, as the ``.gitignore`` lines that would (empty: nothing exposed, git is not
    installed, or ``out`` is in no work tree).

    The transcript, as sensitive as the private data, is written to three places a ``git add .``
    would pick up: ``out/private/transcript.bin``; the staging folder's copy while the release
    runs (``.<name>.partial-*``, which a killed release leaves behind); and
    ``<name>.transcript.bin`` beside ``out`` when writing the bundle fails after the seal
    (:func:`keep_transcript`). Each is asked of ``git check-ignore``.
    """
    tree = _work_tree_of(out)
    if tree is None:
        return []  # git absent, or not a work tree (or git cannot tell): nothing to check
    git, root, relative = tree
    out = Path(out).absolute()
    parent = "/" if relative.parent == Path(".") else f"/{relative.parent.as_posix()}/"
    places = {  # .gitignore line → a path it must cover
        f"/{relative.as_posix()}/": (relative / TRANSCRIPT).as_posix(),
        f"{parent}{partial_prefix(out)}*/": (relative.parent / f"{partial_prefix(out)}0" / TRANSCRIPT).as_posix(),
        f"{parent}{out.name}.transcript*.bin": (relative.parent / f"{out.name}.transcript.bin").as_posix(),
    }
    try:
        checked = subprocess.run([git, "-C", str(root), "check-ignore", "--", *places.values()],
                                 capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    if checked.returncode not in (0, 1):  # 128: git could not check (a path outside the tree)
        return []
    ignored = set(checked.stdout.splitlines())
    return [line for line, path in places.items() if path not in ignored]


def public_files_shown_by_git(out: Path) -> Path | None:
    """The git work tree ``out`` lies in when git would show its public files (``git status``
    lists them, ``git add .`` commits them); None otherwise (outside any work tree, ignored
    there, or git absent). The transcript has its own check (:func:`unignored_transcript_paths`);
    a broad ignore rule such as ``**/private/transcript.bin`` hides it, not the bundle."""
    tree = _work_tree_of(out)
    if tree is None:
        return None
    git, root, relative = tree
    try:
        checked = subprocess.run([git, "-C", str(root), "check-ignore", "-q", "--", (relative / PUBLIC_FILES[0]).as_posix()],
                                 capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return root if checked.returncode == 1 else None  # 0: ignored; 128: git could not tell


def check_transcript_ignored(out: Path) -> None:
    """Refuse a release whose transcript git would not ignore (:func:`unignored_transcript_paths`).

    Raises:
        SpecError: Some place the transcript is written is in a git work tree and not ignored;
            the message says how to fix it.
    """
    lines = unignored_transcript_paths(out)
    if lines:
        raise SpecError(
            f"--out {str(out)!r} is inside a git work tree that does not ignore the release's private "
            f"transcript (private/transcript.bin, as sensitive as the data: one `git add .` would commit it). "
            f"Choose an --out outside the repository, or add to its .gitignore: {'  '.join(lines)}  "
            "(or give --force to write it there anyway). Nothing was read or spent.")


def keep_transcript(staging: Path, out: Path) -> Path | None:
    """Move a staged transcript next to ``out`` (a rename: it needs no free space); its new path.

    Named ``<out>.transcript.bin`` (or with a numeric suffix if that exists), mode 0o600: it is as
    sensitive as the private data.
    """
    source = staging / TRANSCRIPT
    if not source.is_file():
        return None
    target = out.parent / f"{out.name}.transcript.bin"
    suffix = 1
    while target.exists():
        suffix += 1
        target = out.parent / f"{out.name}.transcript-{suffix}.bin"
    os.rename(source, target)
    target.chmod(0o600)
    return target


def kept_transcripts(out: Path) -> list[tuple[Path, Path]]:
    """The sealed transcripts :func:`keep_transcript` left next to ``out`` — of any bundle in that
    folder — each with the bundle folder it belongs to: ``(transcript, bundle)``.

    A release interrupted or failing while it wrote its bundle keeps its sealed transcript there
    (the budget is spent; ``--replay`` regenerates the bundle). Like :func:`stale_partials`, they
    are found for the command line to name, never deleted.
    """
    parent = Path(out).parent
    try:
        found = sorted(p for p in parent.iterdir() if p.is_file() and not p.is_symlink())
    except OSError:  # a missing or unreadable folder: the release itself will say what is wrong
        return []
    kept = []
    for path in found:
        match = _KEPT_NAME.fullmatch(path.name)
        if match is not None:
            kept.append((path, parent / match.group(1)))
    return kept


_KEPT_NAME = re.compile(r"(.+)\.transcript(?:-[0-9]+)?\.bin")


def holds_transcript(staging: Path) -> bool:
    """Whether a staging folder holds a (possibly partial) transcript."""
    try:
        return (Path(staging) / TRANSCRIPT).is_file()
    except OSError:  # unreadable: assume the worst
        return True


# --- writing files ----------------------------------------------------------------------------


SEAL_FILE = "transcript-seal.txt"


def seal_text(seal: str) -> str:
    """``transcript-seal.txt``: the transcript's hash-chain head (see :mod:`privlab.platform.dp.transcript`)."""
    return ("# SHA-256 hash-chain head (privlab transcript format v2) of this release's private transcript.\n"
            "# `privlab verify BUNDLE --data PRIVATE --transcript T --spec SPEC` checks a transcript against it,\n"
            "# replays it and compares every public file. It reveals nothing about the data (salted commitment).\n"
            f"{seal}\n")


def published_seal(folder: Path) -> str:
    """The seal a bundle publishes.

    Raises:
        SpecError: the bundle has no (or a malformed) ``transcript-seal.txt``.
    """
    path = Path(folder) / SEAL_FILE
    if not path.is_file():
        raise SpecError(f"{str(folder)!r} has no {SEAL_FILE}; it is not a sealed release bundle")
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    if len(lines) != 1 or len(lines[0]) != 64 or any(c not in "0123456789abcdef" for c in lines[0]):
        raise SpecError(f"{path}: malformed seal; expected one line of 64 hex digits")
    return lines[0]


# --- documents ---------------------------------------------------------------------------------


def _g(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞"
        return f"{value:.6g}"
    return str(value)


def acceptance_document(results: Sequence[Mapping[str, Any]], *, epsilon_acceptance: float) -> dict[str, Any]:
    """``acceptance.json``: the DP results of the accepted candidate (no exact values)."""
    rows = []
    for r in results:
        if r.get("true_value") is not None:
            raise SpecError(f"criterion {r['name']!r} carries an exact value; release bundles hold DP values only")
        rows.append({k: v for k, v in r.items() if k != "true_value"})
    return {"accepted": all(r["passed"] for r in rows), "epsilon_acceptance": epsilon_acceptance, "criteria": rows}


def acceptance_markdown(document: Mapping[str, Any]) -> str:
    """``acceptance.md``: a table like Hod & Canetti's Table 2."""
    lines = [
        "# Acceptance criteria of the released dataset",
        "",
        "Each criterion compares the released dataset with the original one. Its error was released",
        "with differential privacy (the noisy value below); the dataset was accepted because every noisy",
        "value is below its threshold. Exact (non-private) errors are not published. Where a criterion's",
        "sensitivity depends on the candidate (conditional means, relative marginal errors), the table shows",
        "the value for the released candidate, computed from it alone; the plan checked before the release",
        "charged each criterion's ε whatever the candidate.",
        "",
        "| criterion | kind | DP value | threshold | passed | ε | mechanism | bounds | sensitivity (this candidate) "
        "| noise scale |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in document["criteria"]:
        bounds = "—" if r["bounds"] is None else f"[{_g(r['bounds'][0])}, {_g(r['bounds'][1])}]"
        lines.append(
            f"| {r['name']} | {r['kind']} | {_g(r['dp_value'])} | {_g(r['threshold'])} | "
            f"{'yes' if r['passed'] else 'no'} | {_g(r['epsilon'])} | {r['mechanism']} | {bounds} | "
            f"{_g(r['sensitivity'])} | {_g(r['noise_scale'])} |"
        )
    lines += ["", f"Total ε of the acceptance criteria per flow: {_g(document['epsilon_acceptance'])}.", ""]
    return "\n".join(lines)


def write_documents(folder: Path, documents: Mapping[str, str]) -> None:
    """Write text documents (name → text) into ``folder``."""
    unknown = sorted(set(documents) - set(PUBLIC_FILES))
    if unknown:
        raise SpecError(f"not public bundle files: {', '.join(unknown)}")
    for name, text in documents.items():
        write_text(folder / name, text)


def ledger_document(ledger: Mapping[str, Any], flow_events: Sequence[Mapping[str, Any]], *,
                    total_epsilon: float, budget: float, delta: float | None = None) -> str:
    """``ledger.json``: the outer ledger (the record count and one private-selection event) and the
    accepted flow's split; ``total_delta`` only for an (ε, δ) release."""
    head: dict[str, Any] = {"total_epsilon": total_epsilon}
    if delta is not None:
        head["total_delta"] = delta
    return json_text({**head, "budget": budget, "ledger": dict(ledger), "accepted_flow_events": list(flow_events)})


