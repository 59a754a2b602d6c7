"""``privlab verify``: check that a published bundle is what its sealed transcript and the data produce.

An auditor holds the public bundle, the private data and the private transcript. Verification:

0. the bundle holds exactly the files a release writes (:data:`bundle.RELEASE_FILES`, and
   optionally ``private/`` with the transcript): a missing file or an added one (``evil.txt``)
   is not verified;
1. every public file matches the bundle's ``SHA256SUMS``;
2. the transcript is complete and its hash chain matches its own end record (a record altered,
   reordered, dropped, inserted or appended without recomputing the chain is refused here);
3. the chain head equals the seal the bundle publishes in ``transcript-seal.txt`` (a transcript
   altered *and* re-chained, or another release's transcript, is refused here);
4. the release is replayed from the transcript (which also checks the spec, shortlist, settings,
   space and data hashes bound into it) into a temporary folder; the bundle must hold exactly
   the public files the replay wrote, and each must equal the replay's byte for byte, the
   checksums included.

Where the expected file list comes from: not from the bundle's ``SHA256SUMS``, which whoever
altered the bundle can rewrite (drop a file and its line, add a file and a line). Step 0 uses
the release's documented file set, which is code, not data; step 4 uses what the release writer
itself wrote when replayed from the sealed transcript, so a list that drifted from the writer's
is caught too. ``SHA256SUMS`` itself is trusted only after it equals the replay's byte for byte.

A bundle written by ``privlab pd-generate`` (the release's writer, its own file list, no sealed
transcript: :mod:`privlab.mechanisms.plausible_deniability.generation_run`) is recognised: its
files are checked against that list and its ``SHA256SUMS`` (missing, extra or altered files are
not verified), and an intact one is refused as input ``verify`` cannot audit, saying how it is
reproduced instead.

Privacy:
    Verification is post-processing of the release and its transcript; it spends no budget. Its
    messages name files and the kind of mismatch, never values, counts or hashes of private data.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from privlab.mechanisms.release import bundle

from privlab.mechanisms.release.run_release import run_release
from privlab.mechanisms.tabular import bundle_files
from privlab.platform.core.errors import SpecError, TranscriptError, VerificationError
from privlab.platform.core.toml_files import read_toml
from privlab.platform.dp.transcript import TranscriptReader


@dataclasses.dataclass(frozen=True)
class Verification:
    """What ``privlab verify`` established (all public facts)."""

    bundle: Path
    seal: str
    files: tuple[str, ...]


def _bundle_budget(folder: Path) -> float:
    try:
        return float(read_toml(folder / "config.toml", what="config.toml")[0]["budget"]["budget"])
    except (KeyError, TypeError, ValueError):  # SpecError (unreadable, not TOML, too deep) is a ValueError
        raise SpecError(f"{str(folder)!r}: config.toml is missing or has no [budget] budget; is it a release bundle?") \
            from None


def _not_what_was_written(missing: list[str], extra: list[str], *, writer: str) -> VerificationError:
    parts = ([f"{', '.join(missing)} missing"] if missing else []) + \
            ([f"{', '.join(extra)} added"] if extra else [])
    return VerificationError(f"the bundle does not hold exactly the files {writer} writes: {'; '.join(parts)}; "
                             "files were removed from or added to the published bundle")


def check_file_list(folder: Path) -> None:
    """Refuse a bundle whose files are not exactly the release's (the module docstring, step 0).

    Raises:
        VerificationError: a file is missing or added (or, for a pd-generate bundle, altered).
        SpecError: an intact pd-generate bundle: ``privlab verify`` cannot audit it.
    """
    found = bundle_files.bundle_entries(folder)
    if bundle.SEAL_FILE not in found and found & {"summary.json", "ledger.txt"}:
        _check_pd_generation_bundle(folder, found)
    missing, extra = bundle_files.file_list_differences(found, bundle.RELEASE_FILES, bundle.PRIVATE_ENTRIES)
    if missing or extra:
        raise _not_what_was_written(missing, extra, writer="a release")


def _check_pd_generation_bundle(folder: Path, found: set[str]) -> None:
    from privlab.mechanisms.plausible_deniability.generation_run import BUNDLE_FILES

    missing, extra = bundle_files.file_list_differences(found, (*BUNDLE_FILES, bundle_files.CHECKSUMS))
    if missing or extra:
        raise _not_what_was_written(missing, extra, writer="privlab pd-generate")
    altered = bundle_files.verify_checksums(folder)
    if altered:
        verb = "does" if len(altered) == 1 else "do"
        raise VerificationError(f"the pd-generate bundle's {_and(altered)} {verb} not match its SHA256SUMS; its "
                                "files were altered after it was written")
    raise SpecError(f"{str(folder)!r} is a privlab pd-generate bundle (seeded research output: no sealed "
                    "transcript), whose files match its SHA256SUMS; `privlab verify` audits release bundles. "
                    "Reproduce it with `privlab pd-generate SPEC --out NEW` (the seed is in its config.toml) and "
                    "compare the folders")


def verify_release(folder: str | Path, *, spec: str | Path, data: str | Path, transcript: str | Path) -> Verification:
    """Verify a release bundle against its private data and sealed transcript (see the module docstring).

    Args:
        folder: The published bundle.
        spec: The release spec the bundle was produced with.
        data: The private data.
        transcript: The release's ``private/transcript.bin`` (or the kept copy).

    Returns:
        A :class:`Verification` naming the files that were reproduced.

    Raises:
        SpecError: A path is missing, or ``folder`` is not a sealed release bundle (an intact
            pd-generate bundle included).
        VerificationError: A file is missing from the bundle or added to it; a public file
            differs from ``SHA256SUMS``; the transcript is altered,
            incomplete, does not match the published seal or is bound to other data or spec; or
            the replay does not reproduce every public file.
    """
    folder, transcript = Path(folder), Path(transcript)
    if not folder.is_dir():
        raise SpecError(f"bundle {str(folder)!r} does not exist")
    check_file_list(folder)
    if not transcript.is_file():
        raise SpecError(f"transcript {str(transcript)!r} does not exist")
    altered = bundle_files.verify_checksums(folder)
    if altered:
        raise VerificationError(f"the bundle's {_and(altered)} {'does' if len(altered) == 1 else 'do'} not match its "
                                f"SHA256SUMS; the published {'file was' if len(altered) == 1 else 'files were'} "
                                "altered after the release")
    published = bundle.published_seal(folder)
    budget = _bundle_budget(folder)
    try:
        seal = TranscriptReader(transcript).seal  # checks completeness and the chain against its end record
    except TranscriptError as error:
        raise VerificationError(f"the transcript cannot be trusted: {error}") from None
    if seal != published:
        raise VerificationError(
            "the transcript's seal differs from the one the bundle publishes (transcript-seal.txt): the transcript "
            "was altered and re-sealed, or it belongs to another release")
    with tempfile.TemporaryDirectory(prefix="privlab-verify-") as scratch:
        replayed = Path(scratch) / "replay"
        try:
            run_release(spec, data=data, out=replayed, budget=budget, replay=transcript,
                        force=True)  # a scratch folder, deleted below: no git work tree keeps it
        except TranscriptError as error:
            raise VerificationError(f"the transcript does not replay against this spec and data: {error}") from None
        written = bundle_files.bundle_entries(replayed) - set(bundle.PRIVATE_ENTRIES)
        missing, extra = bundle_files.file_list_differences(bundle_files.bundle_entries(folder), sorted(written),
                                                      bundle.PRIVATE_ENTRIES)
        if missing or extra:
            raise _not_what_was_written(missing, extra, writer="the replayed release")
        names = (*[name for name in bundle.RELEASE_FILES if name in written],  # the documented order first
                 *sorted(written - set(bundle.RELEASE_FILES)))
        differing = [name for name in names if (folder / name).read_bytes() != (replayed / name).read_bytes()]
    if differing:
        raise VerificationError(f"replaying the transcript does not reproduce {_and(differing)}; the bundle is "
                                "not what this spec, data and transcript produce")
    return Verification(bundle=folder, seal=seal, files=names)


def _and(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
