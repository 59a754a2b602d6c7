"""``privlab verify``: check that a published bundle is what its sealed transcript and the data produce.

An auditor holds the public bundle, the private data and the private transcript. Verification:

1. every public file matches the bundle's ``SHA256SUMS``;
2. the transcript is complete and its hash chain matches its own end record (a record altered,
   reordered, dropped, inserted or appended without recomputing the chain is refused here);
3. the chain head equals the seal the bundle publishes in ``transcript-seal.txt`` (a transcript
   altered *and* re-chained, or another release's transcript, is refused here);
4. the release is replayed from the transcript (which also checks the spec, shortlist, settings,
   space and data hashes bound into it) into a temporary folder, and every public file, the
   checksums included, must equal the bundle's byte for byte.

Privacy:
    Verification is post-processing of the release and its transcript; it spends no budget. Its
    messages name files and the kind of mismatch, never values, counts or hashes of private data.
"""

from __future__ import annotations

import dataclasses
import tempfile
import tomllib
from pathlib import Path

from privlab.mechanisms.release import bundle
from privlab.mechanisms.release.run_release import run_release
from privlab.platform.errors import SpecError, TranscriptError, VerificationError
from privlab.platform.transcript import TranscriptReader


@dataclasses.dataclass(frozen=True)
class Verification:
    """What ``privlab verify`` established (all public facts)."""

    bundle: Path
    seal: str
    files: tuple[str, ...]


def _bundle_budget(folder: Path) -> float:
    try:
        with (folder / "config.toml").open("rb") as handle:
            return float(tomllib.load(handle)["budget"]["budget"])
    except (OSError, KeyError, TypeError, ValueError, tomllib.TOMLDecodeError):
        raise SpecError(f"{str(folder)!r}: config.toml is missing or has no [budget] budget; is it a release bundle?") \
            from None


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
        SpecError: A path is missing, or ``folder`` is not a sealed release bundle.
        VerificationError: A public file differs from ``SHA256SUMS``; the transcript is altered,
            incomplete, does not match the published seal or is bound to other data or spec; or
            the replay does not reproduce every public file.
    """
    folder, transcript = Path(folder), Path(transcript)
    if not folder.is_dir():
        raise SpecError(f"bundle {str(folder)!r} does not exist")
    if not transcript.is_file():
        raise SpecError(f"transcript {str(transcript)!r} does not exist")
    altered = bundle.verify_checksums(folder)
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
        names = (*bundle.PUBLIC_FILES, bundle.CHECKSUMS)
        differing = [name for name in names if (folder / name).read_bytes() != (replayed / name).read_bytes()]
    if differing:
        raise VerificationError(f"replaying the transcript does not reproduce {_and(differing)}; the bundle is "
                                "not what this spec, data and transcript produce")
    return Verification(bundle=folder, seal=seal, files=names)


def _and(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
