"""``privlab release``: run the release scheme once, on one machine, in release mode.

A release spec names the shortlist of configurations (written by ``privlab shortlist`` from a
public-data grid search) and declares the budget split and the private-selection parameters.
:func:`run_release` then

1. loads the spec and refuses to start when its total ε,
   ``ε_count + 2·(ε_generation + ε_acceptance) + ε₀``, exceeds the budget (``--budget``, else the spec's ``budget``) — before reading anything else;
2. loads the shortlist, its space and flow settings, and checks that the settings' ε match the
   spec's declared split and that every configuration fits the space and the criteria (and ε₁:
   step 4). A shortlist naming a zCDP synthesizer (MST, AIM) makes the release (ε, δ)-DP: the
   spec declares ``delta``, and its (ε, δ) — which depends on the shortlist's flows — is computed
   and checked against the budget here, still before the data is read
   (:mod:`~privlab.mechanisms.release.guarantee`);
3. reads, validates and cleans the private data (errors name the column and the kind of
   problem, never rows, values or counts);
4. releases a DP record count ``m`` and checks every configuration's plan — that it fits ε₁
   and that the synthesizer can run on ``m`` records — at ``m``, the size the flows will see,
   then resizes the cleaned data to it (:mod:`privlab.mechanisms.release.record_count`), so
   that the release's size is DP. The plans are never checked at the exact number of cleaned
   records: a size rule (privbayes needs two records) would then fail for one record and not
   for two, and its message would tell the exact count;
5. runs private selection with a known threshold (Hod & Canetti 2024, Algorithm 1) over the
   shortlist with a :class:`~privlab.platform.dp.randomness.SecureSource` recording a transcript,
   or with a :class:`~privlab.platform.dp.randomness.ReplaySource` reading one back;
6. writes the bundle atomically (:mod:`privlab.mechanisms.release.bundle`).

Spec format: :mod:`privlab.mechanisms.release.spec`; the shortlist:
:mod:`~privlab.mechanisms.release.shortlist`; reading the private data:
:mod:`~privlab.mechanisms.release.firewall`; the documents: :mod:`~privlab.mechanisms.release.documents`.

Decoding: a released record is the accepted candidate's codes mapped back to the raw schema.
``decode = "representative"`` (the default, and what the births spec uses) maps each bin to its
declared representative value (the bin midpoint by default), so the released values show the
resolution the model was trained and evaluated at and no precision the process never had;
``"uniform"`` draws a value uniformly inside each bin with a post-processing generator seeded
from the CSPRNG (``source.generator(purpose="decode-uniform-within-bin")``, recorded in the
transcript), which looks like raw data but suggests a precision that is not there.

Failures while writing (a full disk: ``ENOSPC``/``EDQUOT``, or any ``OSError`` under
``--out``'s folder): before the transcript is sealed — during the record count or private
selection, or while sealing it — the run stops with an :class:`ExecutionError` that names the
folder and the OS's reason and says what to do (free space, or ``--out`` on another file
system); the staging folder, with the unfinished transcript, is deleted. That transcript has no
end record, so it can never be replayed or verified, and nothing was published that it could
reproduce; but it holds the raw noise and its length and operations follow the number of flows,
which depends on the private data, so keeping it would only leave a sensitive file behind with
no use. (If it cannot be deleted, the message names it.) After the seal, while the public files
are written, the sealed transcript is kept beside ``--out`` instead, because the budget is spent
and it regenerates the bundle (``--replay``). Neither message holds anything computed from the
private data, and only a flow's own failure suggests reproducing it in research mode.

Interruptions (Ctrl-C, or SIGTERM, which the command line turns into the same) follow the same
rule: before the seal the staging folder and its unfinished transcript are deleted; after it the
sealed transcript is kept beside ``--out`` (mode 0600) and the message (:class:`ReleaseInterrupted`)
names it with the ``--replay`` command that regenerates the bundle and the ``rm`` that gives the
release up. A further Ctrl-C or SIGTERM during that clean-up is held until it ends. The next
release into the same folder names every such transcript, as it names a killed release's
staging folder (:func:`~privlab.mechanisms.release.bundle.kept_transcripts`).

Replay: ``run_release(..., replay=TRANSCRIPT)`` checks the transcript's context — the SHA-256
of the data file, of the spec, shortlist, settings and space files, the budget and the privlab
version — and reproduces every public file byte for byte; any difference is a clear error.

Privacy:
    Adding, removing or replacing one raw record. The paper's analysis (Section 4.4.2) is for
    replace-one neighbours with n public; the number of records after cleaning is not public
    here, so it is released with ε_count and the data resized to that DP size m first (see
    :mod:`~privlab.mechanisms.release.record_count` for why this restores the paper's setting
    with m public). Each flow is ε₁-DP with ``ε₁ = ε_generation + ε_acceptance`` (sequential
    composition inside the flow); private selection with a known threshold makes the search
    ``(2ε₁ + ε₀)``-DP however many flows run (Liu & Talwar 2019; Hod & Canetti 2024,
    Theorem 3), with the infinite horizon γ = 0, T = ∞, ε₀ = 0 giving 2ε₁ = 9.98 for the births
    release; the total is ``ε_count + 2ε₁ + ε₀`` (10.0 for births with ε_count = 0.02). With zCDP
    flows in the shortlist the search is random stopping accounted in Rényi DP (Papernot &
    Steinke 2022, Theorem 2) and the release is (ε, δ)-DP at the spec's ``delta`` (12.44 at
    δ = 1e-9 for births with PrivBayes, MST and AIM and γ = 0.05; see
    :mod:`~privlab.mechanisms.release.guarantee`). Only the accepted configuration and its
    candidate (with the DP criterion results) leave the run; how many flows ran, which failed,
    exact errors, counts and rows never reach files, logs, progress output or exception
    messages (the privacy firewall), and MLflow is not used at all.

References:
    Hod & Canetti (2024), Sections 3.7, 4.9, 4.11-4.13; Liu & Talwar (STOC 2019).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import errno
import importlib.metadata
import logging
import os
import shlex
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from privlab.mechanisms.release import bundle, record_count

from privlab.mechanisms.release.documents import datasheet, privacy_statement
from privlab.mechanisms.release.firewall import load_private_data
from privlab.mechanisms.release.flow import FlowConfiguration, FlowOutcome, planned_events, run_flow
from privlab.mechanisms.release.guarantee import (
    ReleaseGuarantee,
    check_flow_plans,
    release_guarantee,
    renyi_base,
)
from privlab.mechanisms.release.shortlist import Shortlist, check_split, load_shortlist
from privlab.mechanisms.release.spec import (
    ReleaseSpec,
    check_budget,
    load_release_spec,
    require_regular_file,
    sha256_file,
)
from privlab.mechanisms.selection.private_selection import private_selection
from privlab.mechanisms.tabular import bundle_files
from privlab.platform.core.errors import BudgetExceededError, ExecutionError, SchemaError, SpecError, TranscriptError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource, ReplaySource, SecureSource
from privlab.platform.dp.transcript import TranscriptReader, TranscriptWriter

logger = logging.getLogger(__name__)

#: Context keys a replay must match; ``created_utc`` is carried along, not checked.
CONTEXT_KEYS = ("privlab_version", "spec_sha256", "shortlist_sha256", "settings_sha256", "space_sha256",
                "data_sha256", "budget")


# --- the run ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ReleaseResult:
    """What the CLI may show: only public facts (never the number of flows that ran)."""

    out: Path
    total_epsilon: float
    budget: float
    configuration: FlowConfiguration
    accepted: bool
    public_files: tuple[str, ...]
    delta: float = 0.0


def transcript_context(*, spec: ReleaseSpec, shortlist: Shortlist, data: Path, budget: float) -> dict[str, str]:
    """What the run is bound to; a replay checks every :data:`CONTEXT_KEYS` entry."""
    return {
        "privlab_version": importlib.metadata.version("privlab"),
        "spec_sha256": sha256_file(spec.path),
        "shortlist_sha256": sha256_file(shortlist.path),
        "settings_sha256": sha256_file(shortlist.settings_path),
        "space_sha256": sha256_file(shortlist.space_path),
        "data_sha256": sha256_file(data),
        "budget": repr(float(budget)),
    }


@contextlib.contextmanager
def _heartbeat(say: Callable[[str], None], *, every_seconds: float) -> Iterator[None]:
    """Tell the operator the selection is still running, with the elapsed time only.

    The elapsed time is what the operator's own clock shows anyway; nothing else (not the number
    of flows, which depends on the private data) is said.
    """
    stop = threading.Event()
    began = time.monotonic()

    def beat() -> None:
        while not stop.wait(every_seconds):
            elapsed = int(time.monotonic() - began)
            say(f"private selection still running ({elapsed // 60:d} min {elapsed % 60:02d} s elapsed); "
                "if it never ends, the shortlist's acceptance probability on this data is too low")

    thread = threading.Thread(target=beat, name="privlab-release-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def run_release(
    spec_path: str | Path,
    *,
    data: str | Path,
    out: str | Path,
    budget: float | None = None,
    replay: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    force: bool = False,
) -> ReleaseResult:
    """Run the release (see the module docstring) and write the bundle to ``out``.

    Args:
        spec_path: The release spec.
        data: The private raw data (csv, csv.gz or parquet).
        out: The bundle folder to create (must not exist).
        budget: The ε cap (default: the spec's ``budget``).
        replay: A transcript to replay instead of drawing fresh randomness.
        progress: Called with short public status lines (no data-dependent facts).
        force: Write the bundle even where git would not ignore its private transcript (inside
            a git work tree, :func:`.bundle.check_transcript_ignored`).

    Returns:
        A :class:`ReleaseResult`.

    Raises:
        BudgetExceededError: The spec's total ε exceeds the budget (before anything is read).
        SpecError: Bad spec, shortlist, settings, configurations or paths; ``out`` exists, or
            is in a git work tree that does not ignore its transcript (and not ``force``).
        SchemaError: The private data does not fit the schema (message withholds values).
        TranscriptError: The replay transcript is incomplete or bound to other data/spec.
        ExecutionError: A flow failed (message withheld), the search ended with ⊥, the DP
            record count is too small for a configuration, or writing under ``out``'s folder
            failed (a full disk; see the module docstring for what is kept).

    Privacy:
        (2ε₁ + ε₀)-DP, replace-one, n public; see the module docstring.

    References:
        Hod & Canetti (2024), Algorithm 1, Sections 4.9 and 4.11.
    """
    say = progress or (lambda _message: None)
    spec = load_release_spec(spec_path)
    if spec.delta is None:
        check_budget(spec, budget)  # pure ε: the total is the spec's own, checked before anything else is opened
    out, data = Path(out), Path(data)
    bundle_files.check_destination(out)
    if not force:
        bundle.check_transcript_ignored(out)
    shortlist = load_shortlist(spec.shortlist)
    check_split(spec, shortlist.settings, shortlist.settings_path)
    guarantee = release_guarantee(spec, shortlist, budget)  # (ε, δ) with zCDP flows: needs the shortlist, not the data
    cap = guarantee.budget
    require_regular_file(data, "private data")
    context = transcript_context(spec=spec, shortlist=shortlist, data=data, budget=cap)
    reader = None
    if replay is not None:
        replay = Path(replay)
        require_regular_file(replay, "--replay")
        reader = TranscriptReader(replay, expected_context=context)
        created = reader.context.get("created_utc")
        if created is None:
            raise TranscriptError(f"transcript {str(replay)!r} has no created_utc entry; it was not written by "
                                  "privlab release")
        context = reader.context
    else:
        context["created_utc"] = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cleaned = load_private_data(data, shortlist.space)
    say(f"release {spec.name}: total {_stated(guarantee)} within budget {cap:g}; "
        f"{len(shortlist.configurations)} configuration(s) in the shortlist")

    kept: list[Path] = []  # where a sealed transcript was rescued to, if writing the bundle failed
    staged: list[Path] = []  # the staging folder, to tell whether a failed run's transcript is gone
    sealed = False
    writer: TranscriptWriter | None = None

    def keep_sealed_transcript(staging: Path) -> None:
        if sealed and reader is None:  # a replay's transcript is a copy: the original is safe
            rescued = bundle.keep_transcript(staging, out)
            if rescued is not None:
                kept.append(rescued)

    try:
        with bundle_files.atomic_directory(out, private_dir=bundle.PRIVATE_DIR, on_failure=keep_sealed_transcript) as staging:
            staged.append(staging)
            transcript_path = staging / bundle.TRANSCRIPT
            if reader is not None:
                source: RandomSource = ReplaySource(reader)
                shutil.copyfile(reader.path, transcript_path)
                transcript_path.chmod(0o600)
                writer = None
            else:
                writer = TranscriptWriter(transcript_path, context=context)
                source = SecureSource(writer)
            try:
                ledger = guarantee.ledger()
                n = record_count.dp_record_count(len(cleaned), epsilon=spec.epsilon_count, source=source,
                                                 ledger=ledger)
                plans = _check_plans(shortlist, m=n, epsilon_count=spec.epsilon_count,
                                     guarantee=guarantee)  # before any flow runs
                resized = record_count.resize(cleaned, n, space=shortlist.space,
                                              rng=source.generator(purpose="resize-to-dp-record-count"))
                del cleaned
                say("running private selection (the number of flows is not shown: it depends on the private data)")
                with _heartbeat(say, every_seconds=30.0):
                    outcome, selection = _select(resized, spec=spec, shortlist=shortlist, source=source,
                                                 ledger=ledger, guarantee=guarantee, plans=plans)
                released = outcome.decoded(
                    rng=source.generator(purpose="decode-uniform-within-bin") if spec.decode == "uniform" else None)
                if isinstance(source, ReplaySource):
                    source.finish()
            except BaseException:
                if writer is not None:
                    writer.discard()  # unsealed: a failed run's transcript is never kept (module docstring)
                raise
            if writer is not None:
                writer.close()  # a full disk here is a failure before the seal, like one during selection
            seal = reader.seal if reader is not None else writer.seal  # type: ignore[union-attr]
            sealed = True
            say("writing the bundle")
            _write_public(staging, spec=spec, shortlist=shortlist, outcome=outcome, selection=selection,
                          released=released, guarantee=guarantee, context=context, n=n, seal=seal)
    except Exception as error:
        failure = writer.failure if writer is not None and writer.failure is not None else error
        if not isinstance(failure, OSError):
            raise
        if kept:
            raise ExecutionError(
                f"writing the bundle failed ({_reason(failure)}) after private selection: the "
                f"budget is spent, but the sealed transcript was kept at {str(kept[0])!r} (as sensitive as the "
                "data; keep it with it). Fix the cause (free space, permissions), then regenerate the same bundle: "
                f"privlab release {spec.path} --data {data} --out {out} --replay {kept[0]}") from None
        raise _write_failure(failure, out=out, sealed=sealed, replay=reader.path if reader is not None else None,
                             left=[p for p in staged if p.exists()]) from None
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (the command line turns it into this)
        raise ReleaseInterrupted(_interrupted_message(
            spec=spec.path, data=data, out=out, sealed=sealed, kept=kept[0] if kept else None,
            replay=reader.path if reader is not None else None, left=[p for p in staged if p.exists()])) from None
    return ReleaseResult(out=out, total_epsilon=guarantee.epsilon, budget=cap, configuration=outcome.configuration,
                         accepted=outcome.accepted, public_files=(*bundle.PUBLIC_FILES, bundle_files.CHECKSUMS),
                         delta=guarantee.delta)


class ReleaseInterrupted(KeyboardInterrupt):
    """A release stopped by Ctrl-C or SIGTERM; its text says what was left and what to do with it
    (the command line prints it and exits 130, as for any interruption)."""


def _interrupted_message(*, spec: Path, data: Path, out: Path, sealed: bool, kept: Path | None,
                         replay: Path | None, left: list[Path]) -> str:
    """What an interrupted release left behind, named, with the command that uses or removes it.

    Privacy:
        Only paths and the phase (before or after the seal) are said, both public: the phase is
        the operator's own observation of the progress lines, never the number of flows.
    """
    if kept is not None:
        said = (f"the release was interrupted while its bundle was written, after private selection: the budget is "
                f"spent, and the sealed transcript was kept at {str(kept)!r} (mode 0600, as sensitive as the private "
                f"data). Regenerate the same bundle from it: privlab release {shlex.quote(str(spec))} --data "
                f"{shlex.quote(str(data))} --out {shlex.quote(str(out))} --replay {shlex.quote(str(kept))}  "
                f"(or, to give this release up, delete it: rm -- {shlex.quote(str(kept))})")
    elif replay is not None:
        said = (f"the replay was interrupted; no bundle was written and the replayed transcript {str(replay)!r} is "
                "untouched: run the same replay again")
    elif sealed:
        said = ("the release was interrupted while its bundle was written, and its sealed transcript could not be "
                "kept: the budget is spent and this release cannot be regenerated; run a new release")
    else:
        said = ("the release was interrupted before its transcript was sealed; no bundle was written and the "
                "unfinished transcript was deleted (it can never be replayed, and it is as sensitive as the "
                "private data)")
    if left:
        said += (f". Deleting the staging folder {str(left[0])!r} did not finish: delete it yourself (rm -r -- "
                 f"{shlex.quote(str(left[0]))}); it may hold a transcript, as sensitive as the private data")
    return said


def _stated(guarantee: ReleaseGuarantee) -> str:
    if guarantee.is_pure:
        return f"ε = {guarantee.epsilon:g}"
    return f"(ε, δ) = ({guarantee.epsilon:.6g}, {guarantee.delta:g})"


def _check_plans(shortlist: Shortlist, *, m: int, epsilon_count: float,
                 guarantee: ReleaseGuarantee) -> dict[int, list[Any]]:
    """Check every configuration's plan at the DP record count ``m`` (the size the flows see);
    return the plans (by configuration index) for the Rényi path's spend checks.

    Raises:
        ExecutionError: A configuration cannot run on ``m`` records.
        BudgetExceededError: A configuration's plan does not fit ε₁ (pure path) or its flow's
            budget (Rényi path: :func:`~privlab.mechanisms.release.guarantee.check_flow_plans`).

    Privacy:
        ``m`` is post-processing of the ε_count-DP count, so a message that depends on it (and on
        the public configurations) reveals nothing more; the exact number of cleaned records is
        never used, so the outcome is the same for every private size that yields the same ``m``.
    """
    plans: dict[int, list[Any]] = {}
    for i, configuration in enumerate(shortlist.configurations):
        try:
            plan = planned_events(configuration, shortlist.settings, space=shortlist.space, n=m)
            if guarantee.is_pure:
                Ledger(epsilon_cap=shortlist.settings.epsilon_flow, delta_cap=0.0).check_plan(plan)
            plans[i] = plan
        except (SchemaError, SpecError) as error:
            margin = record_count.count_margin(epsilon_count)
            floor = (f"; m = 1, its floor, means the private data has too few records for a release with "
                     f"record_count = {epsilon_count:g} (it needs clearly more than {margin})" if m == 1 else "")
            raise ExecutionError(
                f"shortlist configuration {i + 1} ({configuration.as_dict()}) cannot run on the release's DP record "
                f"count m = {m}: {error}. m is the number of cleaned records plus Laplace noise of scale "
                f"1/{epsilon_count:g}, minus a public margin of {margin} records{floor}. No flow ran and no bundle "
                f"was written; ε_count = {epsilon_count:g} was spent on the count") from None
    if not guarantee.is_pure:
        check_flow_plans(shortlist, plans, m=m)
    return plans


def _reason(error: OSError) -> str:
    """The OS's words for an error (from its errno, never from its message)."""
    if error.errno is None:
        return type(error).__name__
    return f"{os.strerror(error.errno)}, {errno.errorcode.get(error.errno, error.errno)}"


def _write_failure(error: OSError, *, out: Path, sealed: bool, replay: Path | None,
                   left: list[Path]) -> ExecutionError:
    """The message for an ``OSError`` under ``out``'s folder when no sealed transcript was kept."""
    folder = str(out.absolute().parent)
    full = error.errno in (errno.ENOSPC, errno.EDQUOT)
    cause = "the file system is full (or the quota is used up)" if full else "the file system refused a write"
    todo = (f"Free space in {folder!r} (or raise the quota), or choose --out on another file system"
            if full else "Fix the cause (permissions, a read-only or failing device), or choose --out elsewhere")
    if replay is not None:
        kept = f"The replayed transcript {str(replay)!r} is untouched; run the same replay again"
    elif sealed:
        kept = ("The sealed transcript could not be kept either: the budget is spent and this release cannot be "
                "regenerated; run a new release")
    else:
        kept = ("The unfinished transcript was deleted (it has no seal, so it can never be replayed, and it is as "
                "sensitive as the private data); nothing was published. Run the release again")
    if left:
        kept += (f". Deleting the staging folder {str(left[0])!r} failed: delete it yourself (rm -r -- "
                 f"{str(left[0])!r}); it may hold a transcript, as sensitive as the private data")
    stage = "while the bundle was written" if sealed else "before the release's transcript was sealed"
    return ExecutionError(f"writing under {folder!r} failed {stage}: {cause} ({_reason(error)}); no bundle "
                          f"was written. {todo}. {kept}.")


def _select(cleaned: pd.DataFrame, *, spec: ReleaseSpec, shortlist: Shortlist, source: RandomSource,
            ledger: Ledger, guarantee: ReleaseGuarantee, plans: dict[int, list[Any]]) -> tuple[FlowOutcome, Any]:
    """Private selection over the shortlist (charged to ``ledger``, which already holds the
    record count); failures are reported without their messages."""

    def run_once(configuration: FlowConfiguration, iteration: int, *, source: RandomSource,
                 ledger: Ledger) -> tuple[FlowOutcome, bool]:
        outcome = run_flow(cleaned, space=shortlist.space, configuration=configuration,
                           settings=shortlist.settings, source=source, ledger=ledger)
        return outcome, outcome.accepted

    try:
        if guarantee.is_pure:
            accounting: dict[str, Any] = {"epsilon1": shortlist.settings.epsilon_flow}
        else:
            accounting = {"renyi": renyi_base(guarantee, shortlist, plans=plans, m=len(cleaned))}
        selection = private_selection(run_once, candidates=list(shortlist.configurations), params=spec.selection,
                                      source=source, ledger=ledger, name="release_candidate", step="release",
                                      **accounting)
    except (BudgetExceededError, TranscriptError):
        raise  # their messages hold only ε, public parameters and transcript positions
    except OSError as error:  # the machine, not the configuration: research mode would not help
        raise ExecutionError(
            f"a flow failed during private selection with a system error ({_reason(error)}); its message is "
            "withheld in release mode. Check the machine's resources (free space for temporary files, open-file "
            "and memory limits), then run the release again; no bundle was written") from None
    except Exception as error:
        raise ExecutionError(
            f"a flow failed during private selection ({type(error).__name__}); its message is withheld in "
            "release mode because it may contain values computed from the private data. Reproduce it in "
            "research mode on public data (privlab run with the grid spec); no bundle was written") from None
    if selection.is_bottom:
        raise ExecutionError("private selection ended with ⊥ (no candidate accepted within the spec's stopping "
                             "rule); the budget is spent and no bundle was written")
    return selection.output, (selection, ledger)


def _budget_table(spec: ReleaseSpec, guarantee: ReleaseGuarantee) -> dict[str, Any]:
    """``config.toml``'s [budget]: the pure path's ε split, or the Rényi path's (ε, δ) and flows' ρ."""
    if guarantee.is_pure:
        return {"epsilon_record_count": spec.epsilon_count, "epsilon_generation": spec.epsilon_generation,
                "epsilon_acceptance": spec.epsilon_acceptance, "epsilon_flow": spec.epsilon_flow,
                "epsilon_selection": spec.epsilon_selection, "epsilon_total": spec.total_epsilon,
                "budget": guarantee.budget}
    return {"epsilon_record_count": spec.epsilon_count, "epsilon_generation": spec.epsilon_generation,
            "epsilon_acceptance": spec.epsilon_acceptance, "epsilon_total": guarantee.epsilon,
            "delta": guarantee.delta, "accounting": "renyi-dp random stopping (Papernot & Steinke 2022, Theorem 2)",
            "budget": guarantee.budget,
            **{f"{label}_{'_'.join(f.synthesizers)}": value for f in guarantee.flows
               for label, value in (("flow_rho", f.rho), ("flow_epsilon", f.epsilon))}}


def _write_public(staging: Path, *, spec: ReleaseSpec, shortlist: Shortlist, outcome: FlowOutcome, selection: Any,
                  released: pd.DataFrame, guarantee: ReleaseGuarantee, context: Mapping[str, str], n: int,
                  seal: str) -> None:
    outcome_selection, ledger = selection
    total = ledger.total()
    if not guarantee.is_pure and (total.epsilon > guarantee.epsilon * (1.0 + 1e-12) or total.delta > guarantee.delta):
        raise ExecutionError(f"the release ledger's total (ε, δ) = ({total.epsilon!r}, {total.delta!r}) exceeds the "
                             f"guarantee checked before the run ({guarantee.epsilon!r}, {guarantee.delta!r}); no "
                             "bundle was written")
    bundle_files.write_released(staging, released)
    acceptance = bundle.acceptance_document([r.to_dict() for r in outcome.results],
                                            epsilon_acceptance=shortlist.settings.epsilon_acceptance)
    configuration = outcome.configuration
    config_text = bundle_files.config_toml(
        {
            "configuration": {"transformation": outcome.transformation.id, "synthesizer": configuration.synthesizer,
                              **dict(configuration.synthesizer_params), "min_count": configuration.min_count or 0},
            "budget": _budget_table(spec, guarantee),
            "selection": {"gamma": spec.selection.gamma, "steps": float(spec.selection.steps),
                          "epsilon0": spec.selection.epsilon0, "shortlist_size": len(shortlist.configurations)},
            "output": {"decode": spec.decode, "records": n,
                       "records_margin": record_count.count_margin(spec.epsilon_count)},
            "inputs": {"spec_sha256": context["spec_sha256"], "shortlist_sha256": context["shortlist_sha256"],
                       "settings_sha256": context["settings_sha256"], "space_sha256": context["space_sha256"],
                       "privlab_version": context["privlab_version"]},
        },
        header=f"The configuration selected by private selection for release {spec.name}.\n"
               "min_count = 0 means no face-privacy projection.")
    bundle.write_documents(staging, {
        "acceptance.json": bundle_files.json_text(acceptance),
        "acceptance.md": bundle.acceptance_markdown(acceptance),
        "config.toml": config_text,
        "ledger.json": bundle.ledger_document(ledger.to_dict(), [e.to_dict() for e in outcome_selection.accepted_events],
                                              total_epsilon=guarantee.epsilon, budget=guarantee.budget,
                                              delta=None if guarantee.is_pure else guarantee.delta),
        "privacy-statement.md": privacy_statement(spec, shortlist, n=n, guarantee=guarantee),
        "README.md": datasheet(spec, shortlist, outcome, acceptance, n=n, created=context["created_utc"],
                               guarantee=guarantee),
        bundle.SEAL_FILE: bundle.seal_text(seal),
    })
    bundle_files.write_checksums(staging, bundle.PUBLIC_FILES)
