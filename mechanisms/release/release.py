"""``privlab release``: run the release scheme once, on one machine, in release mode.

A release spec names the shortlist of configurations (written by ``privlab shortlist`` from a
public-data grid search) and declares the budget split and the private-selection parameters.
:func:`run_release` then

1. loads the spec and refuses to start when its total ε,
   ``ε_count + 2·(ε_generation + ε_acceptance) + ε₀``, exceeds the budget (``--budget``, else the spec's ``budget``) — before reading anything else;
2. loads the shortlist, its space and flow settings, and checks that the settings' ε match the
   spec's declared split and that every configuration fits the space, the criteria and ε₁;
3. reads, validates and cleans the private data (errors name the column and the kind of
   problem, never rows, values or counts);
4. releases a DP record count and resizes the cleaned data to it
   (:mod:`privlab.mechanisms.release.record_count`), so that the release's size is DP;
5. runs private selection with a known threshold (Hod & Canetti 2024, Algorithm 1) over the
   shortlist with a :class:`~privlab.platform.randomness.SecureSource` recording a transcript,
   or with a :class:`~privlab.platform.randomness.ReplaySource` reading one back;
6. writes the bundle atomically (:mod:`privlab.mechanisms.release.bundle`).

Spec format (TOML; paths relative to the spec file)::

    name = "births-release"
    description = "..."                 # free text, shown in the README
    shortlist = "shortlist.toml"        # written by `privlab shortlist`
    budget = 9.98                       # optional default cap; --budget overrides it
    decode = "representative"           # or "uniform" (see below)

    [epsilon]                           # the budget split, checked against the settings file
    generation = 4.0                    # ε_x: the synthesizer's fit
    acceptance = 0.99                   # ε_q: the sum of the criteria's ε
    record_count = 0.02                 # ε of the DP record count (the release's size)

    [selection]                         # Algorithm 1's stopping rule (Theorem 3)
    gamma = 0.0
    steps = "inf"                       # or a positive integer
    epsilon0 = 0.0

    [datasheet]                         # optional text for README.md
    title = "..."
    publisher = "..."
    contact = "..."
    population = "..."

Decoding: a released record is the accepted candidate's codes mapped back to the raw schema.
``decode = "representative"`` (the default, and what the births spec uses) maps each bin to its
declared representative value (the bin midpoint by default), so the released values show the
resolution the model was trained and evaluated at and no precision the process never had;
``"uniform"`` draws a value uniformly inside each bin with a post-processing generator seeded
from the CSPRNG (``source.generator(purpose="decode-uniform-within-bin")``, recorded in the
transcript), which looks like raw data but suggests a precision that is not there.

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
    release; the total is ``ε_count + 2ε₁ + ε₀`` (10.0 for births with ε_count = 0.02). Only the accepted configuration and its
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
import hashlib
import importlib.metadata
import logging
import math
import re
import shutil
import threading
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from privlab.mechanisms.release import bundle, record_count
from privlab.mechanisms.release.flow import (
    FlowConfiguration,
    FlowOutcome,
    FlowSettings,
    load_settings,
    planned_events,
    resolve_transformation,
    run_flow,
)
from privlab.mechanisms.selection.private_selection import PrivateSelectionParams, private_selection
from privlab.mechanisms.tabular.space import ReleaseSpace, load_release_space
from privlab.platform.errors import (
    BudgetExceededError,
    ExecutionError,
    SchemaError,
    SpecError,
    TranscriptError,
)
from privlab.platform.ledger import Ledger
from privlab.platform.randomness import RandomSource, ReplaySource, SecureSource
from privlab.platform.transcript import TranscriptReader, TranscriptWriter

logger = logging.getLogger(__name__)

DECODE_MODES = ("representative", "uniform")
_SPEC_KEYS = frozenset({"name", "description", "shortlist", "budget", "decode", "epsilon", "selection", "datasheet"})
_SHORTLIST_CONFIG_KEYS = ("transformation", "synthesizer", "epsilon_split", "theta", "degree", "score", "min_count")
_SYNTHESIZER_KEYS = ("epsilon_split", "theta", "degree", "score")
_DATASHEET_KEYS = frozenset({"title", "publisher", "contact", "population", "notes"})
#: Context keys a replay must match; ``created_utc`` is carried along, not checked.
CONTEXT_KEYS = ("privlab_version", "spec_sha256", "shortlist_sha256", "settings_sha256", "space_sha256",
                "data_sha256", "budget")


def _number(value: Any, what: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpecError(f"{what} ({value!r}) must be a finite number")
    if positive and value <= 0:
        raise SpecError(f"{what} ({value!r}) must be > 0")
    return float(value)


def _toml(path: Path, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise SpecError(f"{what} {str(path)!r} does not exist")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise SpecError(f"{path}: not valid TOML: {error}") from None


def _require_regular_file(path: Path, what: str) -> None:
    """Refuse a missing path, and a pipe, device or folder (reading a FIFO would block forever)."""
    if not path.exists():
        raise SpecError(f"{what} {str(path)!r} does not exist")
    if not path.is_file():
        raise SpecError(f"{what} {str(path)!r} is not a regular file (a pipe, device or folder); give a file "
                        "(csv, csv.gz or parquet for data)")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- the spec ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReleaseSpec:
    """A parsed release spec (format in the module docstring).

    Privacy:
        ``total_epsilon = ε_count + 2·(epsilon_generation + epsilon_acceptance) + ε₀``: the DP record
        count, then private selection (Theorem 3), composed sequentially.
    """

    path: Path
    name: str
    description: str
    shortlist: Path
    epsilon_generation: float
    epsilon_acceptance: float
    epsilon_count: float
    selection: PrivateSelectionParams
    budget: float | None
    decode: str
    datasheet: Mapping[str, str]

    @property
    def epsilon_flow(self) -> float:
        return math.fsum([self.epsilon_generation, self.epsilon_acceptance])

    @property
    def epsilon_selection(self) -> float:
        """Private selection's ``2ε₁ + ε₀``."""
        return 2.0 * self.epsilon_flow + self.selection.epsilon0

    @property
    def total_epsilon(self) -> float:
        return math.fsum([self.epsilon_count, self.epsilon_selection])


def load_release_spec(path: str | Path) -> ReleaseSpec:
    """Read and check a release spec; reads nothing but the spec file.

    Raises:
        SpecError: Missing file, invalid TOML, unknown or missing keys, invalid values.
    """
    path = Path(path)
    document = _toml(path, "release spec")
    unknown = sorted(set(document) - _SPEC_KEYS)
    if unknown:
        raise SpecError(f"{path}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_SPEC_KEYS))}")
    for key in ("name", "shortlist", "epsilon", "selection"):
        if key not in document:
            raise SpecError(f"{path}: {key} is required (see privlab.mechanisms.release.release for the format)")
    name, shortlist = document["name"], document["shortlist"]
    if not isinstance(name, str) or not name:
        raise SpecError(f"{path}: name ({name!r}) must be a non-empty string")
    if not isinstance(shortlist, str) or not shortlist:
        raise SpecError(f"{path}: shortlist ({shortlist!r}) must be a file path")
    epsilon = document["epsilon"]
    if not isinstance(epsilon, dict) or set(epsilon) != {"generation", "acceptance", "record_count"}:
        raise SpecError(
            f"{path}: [epsilon] must have exactly the keys generation, acceptance and record_count (the ε of the DP "
            "count of records after cleaning, which sets the release's size: cleaning drops records, so the count "
            "is not public; 0.02 costs 0.2% of a 10-ε budget and gives about n − 660 records, a public margin that makes "
            "padding almost never needed, ± 50 of noise)")
    selection = document["selection"]
    if not isinstance(selection, dict) or not {"gamma", "steps", "epsilon0"} <= set(selection) <= {
            "gamma", "steps", "epsilon0", "unbounded_ok"}:
        raise SpecError(f"{path}: [selection] must have the keys gamma, steps and epsilon0 (and, for the infinite "
                        "horizon, unbounded_ok)")
    steps = selection["steps"]
    if steps == "inf":
        steps = math.inf
    elif isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise SpecError(f"{path}: selection.steps ({steps!r}) must be a positive integer or \"inf\"")
    try:
        params = PrivateSelectionParams(gamma=_number(selection["gamma"], "selection.gamma"), steps=steps,
                                        epsilon0=_number(selection["epsilon0"], "selection.epsilon0"))
    except (TypeError, ValueError) as error:
        raise SpecError(f"{path}: [selection]: {error}") from None
    _check_horizon_acknowledged(path, params, selection.get("unbounded_ok"))
    budget = document.get("budget")
    decode = document.get("decode", "representative")
    if decode not in DECODE_MODES:
        raise SpecError(f"{path}: decode ({decode!r}) must be one of {', '.join(DECODE_MODES)}")
    datasheet = document.get("datasheet", {})
    if not isinstance(datasheet, dict) or set(datasheet) - _DATASHEET_KEYS or not all(
            isinstance(v, str) for v in datasheet.values()):
        raise SpecError(f"{path}: [datasheet] takes text entries {', '.join(sorted(_DATASHEET_KEYS))}")
    description = document.get("description", "")
    if not isinstance(description, str):
        raise SpecError(f"{path}: description ({description!r}) must be a string")
    return ReleaseSpec(
        path=path, name=name, description=description, shortlist=(path.parent / shortlist),
        epsilon_generation=_number(epsilon["generation"], "epsilon.generation", positive=True),
        epsilon_acceptance=_number(epsilon["acceptance"], "epsilon.acceptance", positive=True),
        epsilon_count=_number(epsilon["record_count"], "epsilon.record_count", positive=True),
        selection=params, budget=None if budget is None else _number(budget, "budget", positive=True),
        decode=decode, datasheet=dict(datasheet),
    )


def _check_horizon_acknowledged(path: Path, params: PrivateSelectionParams, unbounded_ok: Any) -> None:
    """The infinite horizon runs about 1/p flows, forever when p = 0: it must be chosen knowingly.

    ``p`` is the shortlist's acceptance probability on the private data (unknown; estimate it by the
    grid search's ``accepted_rate`` on public data of the same size). A finite horizon (γ > 0, T
    steps) bounds the run at the price of ε₀ and a possible ⊥; it needs no acknowledgement.
    """
    if not params.is_infinite_horizon:
        if unbounded_ok is not None:
            raise SpecError(f"{path}: selection.unbounded_ok applies only to the infinite horizon (gamma = 0, "
                            "steps = \"inf\"); remove it")
        return
    if unbounded_ok is not True:
        raise SpecError(
            f"{path}: [selection] is the infinite horizon (gamma = 0, steps = \"inf\"): the release runs until a flow "
            "is accepted, about 1/p flows when the shortlist's acceptance probability on the private data is p, and "
            "forever when p = 0 (a shortlist tuned on data of another size can have p ≈ 0). Estimate p first "
            "(privlab compare GRID_EXPERIMENT --metric accepted, on public data of the same size), then either set "
            "unbounded_ok = true in [selection], or choose a finite horizon: gamma > 0 and steps >= "
            "max(ln(2/epsilon0)/gamma, 1 + 1/(e*gamma)), which costs epsilon0 more and may end without a release")


def check_budget(spec: ReleaseSpec, budget: float | None) -> float:
    """The budget to enforce; raises when the spec's total ε exceeds it.

    Raises:
        SpecError: No budget given (neither ``--budget`` nor the spec's ``budget``), or not > 0.
        BudgetExceededError: ``spec.total_epsilon > budget`` (nothing was read or written).
    """
    if budget is None:
        budget = spec.budget
    if budget is None:
        raise SpecError(f"no privacy budget: give --budget EPS (the spec {spec.path} declares total "
                        f"ε = {spec.total_epsilon:g}) or set budget in the spec")
    budget = _number(budget, "--budget", positive=True)
    if spec.total_epsilon > budget:
        raise BudgetExceededError(
            f"the release spec {spec.path} needs total ε = {spec.epsilon_count:g} + 2·({spec.epsilon_generation:g} + "
            f"{spec.epsilon_acceptance:g}) + {spec.selection.epsilon0:g} = {spec.total_epsilon:g}, more than the "
            f"budget {budget:g}; nothing was read or written. Lower the spec's ε split or raise --budget")
    return budget


# --- the shortlist ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Shortlist:
    """The public shortlist and the files it names."""

    path: Path
    space_path: Path
    settings_path: Path
    space: ReleaseSpace
    settings: FlowSettings
    configurations: tuple[FlowConfiguration, ...]


def _configuration(table: Any, where: str) -> FlowConfiguration:
    if not isinstance(table, dict):
        raise SpecError(f"{where} must be a table")
    unknown = sorted(set(table) - set(_SHORTLIST_CONFIG_KEYS))
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(_SHORTLIST_CONFIG_KEYS)}")
    if "transformation" not in table or "synthesizer" not in table:
        raise SpecError(f"{where}: transformation and synthesizer are required")
    min_count = table.get("min_count", 0)
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count == 1 or min_count < 0:
        raise SpecError(f"{where}: min_count ({min_count!r}) must be 0 (no projection) or an integer >= 2")
    try:
        return FlowConfiguration(
            transformation=table["transformation"], synthesizer=table["synthesizer"],
            synthesizer_params=tuple((k, table[k]) for k in _SYNTHESIZER_KEYS if k in table),
            min_count=min_count or None)
    except SpecError as error:
        raise SpecError(f"{where}: {error}") from None


def load_shortlist(path: Path) -> Shortlist:
    """Read the shortlist TOML written by ``privlab shortlist`` and everything it names.

    Raises:
        SpecError: The file is missing (run the grid search and ``privlab shortlist`` first),
            invalid, empty, or a configuration does not fit the space or the criteria.
    """
    if not path.is_file():
        raise SpecError(
            f"shortlist {str(path)!r} does not exist. Run the public-data grid search first "
            "(privlab run GRID_SPEC, with the release_flow configurations of this space), then write the shortlist "
            f"with `privlab shortlist RUN_ID --min-prob 0.1 --out {path}`")
    document = _toml(path, "shortlist")
    unknown = sorted(set(document) - {"space", "settings", "configuration"})
    if unknown:
        raise SpecError(f"{path}: unknown key(s) {', '.join(unknown)}; allowed: configuration, settings, space")
    for key in ("space", "settings"):
        if not isinstance(document.get(key), str):
            raise SpecError(f"{path}: {key} must name a file (relative to the shortlist)")
    tables = document.get("configuration", [])
    if not isinstance(tables, list) or not tables:
        raise SpecError(f"{path}: the shortlist has no [[configuration]]; private selection needs at least one. "
                        "Rerun `privlab shortlist` with a lower --min-prob or run more grid attempts")
    space_path, settings_path = path.parent / document["space"], path.parent / document["settings"]
    space = load_release_space(space_path)
    settings = load_settings(settings_path)
    configurations = tuple(_configuration(t, f"{path} configuration {i + 1}") for i, t in enumerate(tables))
    for i, configuration in enumerate(configurations):
        where = f"{path} configuration {i + 1}"
        try:
            transformation = resolve_transformation(space, configuration.transformation)
            configuration.build_synthesizer(where=f"{where}: synthesizer {configuration.synthesizer!r}")
            for criterion in settings.criteria:
                criterion.check_domain(transformation.domain)
        except SpecError as error:
            raise SpecError(f"{where}: {error}") from None
    return Shortlist(path=path, space_path=space_path, settings_path=settings_path, space=space,
                     settings=settings, configurations=configurations)


def check_split(spec: ReleaseSpec, settings: FlowSettings, settings_path: Path) -> None:
    """The settings' ε must be the spec's declared split (so the budget check was exact)."""
    for label, declared, actual in (("generation", spec.epsilon_generation, settings.epsilon_generation),
                                    ("acceptance", spec.epsilon_acceptance, settings.epsilon_acceptance)):
        if not math.isclose(declared, actual, rel_tol=1e-12, abs_tol=1e-15):
            raise SpecError(f"{spec.path}: epsilon.{label} = {declared:g} but the flow settings {settings_path} "
                            f"give ε_{label} = {actual:g}; make them agree")


# --- the private data (firewalled) ------------------------------------------------------------


_PROBLEMS = (
    ("missing/nan", "missing or NaN values"),
    ("bound", "values outside the column's public bounds"),
    ("do not parse", "values that do not parse as dates in the declared format"),
    ("true/false", "values that are not booleans"),
    ("other than 0/1", "values that are not booleans"),
    ("non-text", "values of the wrong kind"),
    ("categor", "values outside the declared categories"),
    ("fraction", "fractional values in an integer column"),
    ("nothing is left", "no record left after the raw constraints"),
    ("dataset is empty", "no record left after the raw constraints (they dropped every record)"),
)


def _withheld(error: Exception, *, what: str, space: ReleaseSpace) -> SchemaError:
    """A data error's message without anything computed from the data (rows, values, counts)."""
    text = str(error).lower()
    problem = next((label for key, label in _PROBLEMS if key in text), "values that break the schema")
    match = re.search(r"column '([^']+)'", str(error))
    column = match.group(1) if match and match.group(1) in space.schema.names else None
    where = f"column {column!r}" if column else "the data"
    bounds = ""
    if column is not None:
        declared = next(c for c in space.schema.columns if c.name == column)
        if getattr(declared, "lower", None) is not None:
            bounds = f" (public bounds [{declared.lower}, {declared.upper}])"
    return SchemaError(
        f"{what}: {where}{bounds} holds {problem}. In release mode the offending rows, values and counts "
        "are withheld because they are computed from the private data; inspect the file inside the "
        "secure environment and fix it, or correct the space's schema")


def load_private_data(path: Path, space: ReleaseSpace) -> pd.DataFrame:
    """Read, validate and clean the private data; errors never show rows, values or counts.

    Raises:
        SpecError: The file is missing or of an unknown format.
        SchemaError: Empty data, missing columns, values outside the schema, nothing left.
    """
    what = f"private data {str(path)!r}"
    if not path.is_file():
        raise SpecError(f"{what} does not exist")
    try:
        if path.suffix == ".parquet":
            raw = pd.read_parquet(path)
        elif path.name.endswith((".csv", ".csv.gz")):
            raw = pd.read_csv(path)
        else:
            raise SpecError(f"{what} must be .csv, .csv.gz or .parquet")
    except pd.errors.EmptyDataError:
        raise SchemaError(f"{what} is empty: it has no header and no records") from None
    except SpecError:
        raise
    except Exception as error:  # parser messages quote lines of the file
        raise SchemaError(f"{what} could not be read as {path.suffix or 'a table'} "
                          f"({type(error).__name__}; details withheld in release mode)") from None
    if len(raw) == 0:
        raise SchemaError(f"{what} has no records")
    missing = [c for c in space.schema.names if c not in raw.columns]
    if missing:
        raise SchemaError(f"{what} lacks the schema column(s) {', '.join(map(repr, missing))}; the release space "
                          f"needs {', '.join(space.schema.names)}")
    for column in space.schema.names:  # the cleaning rules would drop every record: name the column instead
        if raw[column].isna().all():
            raise SchemaError(f"{what}: column {column!r} is empty (no value in any record); check that the file "
                              "is the right one and that the column was exported")
    try:
        return space.clean_raw(raw, source="private data")
    except (SchemaError, SpecError, TypeError, ValueError) as error:
        raise _withheld(error, what=what, space=space) from None


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
) -> ReleaseResult:
    """Run the release (see the module docstring) and write the bundle to ``out``.

    Args:
        spec_path: The release spec.
        data: The private raw data (csv, csv.gz or parquet).
        out: The bundle folder to create (must not exist).
        budget: The ε cap (default: the spec's ``budget``).
        replay: A transcript to replay instead of drawing fresh randomness.
        progress: Called with short public status lines (no data-dependent facts).

    Returns:
        A :class:`ReleaseResult`.

    Raises:
        BudgetExceededError: The spec's total ε exceeds the budget (before anything is read).
        SpecError: Bad spec, shortlist, settings, configurations or paths; ``out`` exists.
        SchemaError: The private data does not fit the schema (message withholds values).
        TranscriptError: The replay transcript is incomplete or bound to other data/spec.
        ExecutionError: A flow failed (message withheld) or the search ended with ⊥.

    Privacy:
        (2ε₁ + ε₀)-DP, replace-one, n public; see the module docstring.

    References:
        Hod & Canetti (2024), Algorithm 1, Sections 4.9 and 4.11.
    """
    say = progress or (lambda _message: None)
    spec = load_release_spec(spec_path)
    cap = check_budget(spec, budget)
    out, data = Path(out), Path(data)
    bundle.check_destination(out)
    shortlist = load_shortlist(spec.shortlist)
    check_split(spec, shortlist.settings, shortlist.settings_path)
    _require_regular_file(data, "private data")
    context = transcript_context(spec=spec, shortlist=shortlist, data=data, budget=cap)
    reader = None
    if replay is not None:
        replay = Path(replay)
        _require_regular_file(replay, "--replay")
        reader = TranscriptReader(replay, expected_context=context)
        created = reader.context.get("created_utc")
        if created is None:
            raise TranscriptError(f"transcript {str(replay)!r} has no created_utc entry; it was not written by "
                                  "privlab release")
        context = reader.context
    else:
        context["created_utc"] = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cleaned = load_private_data(data, shortlist.space)
    for configuration in shortlist.configurations:  # each flow must fit ε₁ before any flow runs
        Ledger(epsilon_cap=shortlist.settings.epsilon_flow, delta_cap=0.0).check_plan(
            planned_events(configuration, shortlist.settings, space=shortlist.space, n=len(cleaned)))
    say(f"release {spec.name}: total ε = {spec.total_epsilon:g} within budget {cap:g}; "
        f"{len(shortlist.configurations)} configuration(s) in the shortlist")

    kept: list[Path] = []  # where a sealed transcript was rescued to, if writing the bundle failed
    sealed = False

    def keep_sealed_transcript(staging: Path) -> None:
        if sealed and reader is None:  # a replay's transcript is a copy: the original is safe
            rescued = bundle.keep_transcript(staging, out)
            if rescued is not None:
                kept.append(rescued)

    try:
        with bundle.atomic_directory(out, on_failure=keep_sealed_transcript) as staging:
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
                ledger = Ledger(epsilon_cap=cap, delta_cap=0.0)
                n = record_count.dp_record_count(len(cleaned), epsilon=spec.epsilon_count, source=source,
                                                 ledger=ledger)
                resized = record_count.resize(cleaned, n, space=shortlist.space,
                                              rng=source.generator(purpose="resize-to-dp-record-count"))
                del cleaned
                say("running private selection (the number of flows is not shown: it depends on the private data)")
                with _heartbeat(say, every_seconds=30.0):
                    outcome, selection = _select(resized, spec=spec, shortlist=shortlist, source=source,
                                                 ledger=ledger)
                released = outcome.decoded(
                    rng=source.generator(purpose="decode-uniform-within-bin") if spec.decode == "uniform" else None)
                if isinstance(source, ReplaySource):
                    source.finish()
            finally:
                if writer is not None:
                    writer.close()
            seal = reader.seal if reader is not None else writer.seal  # type: ignore[union-attr]
            sealed = True
            say("writing the bundle")
            _write_public(staging, spec=spec, shortlist=shortlist, outcome=outcome, selection=selection,
                          released=released, budget=cap, context=context, n=n, seal=seal)
    except OSError as error:
        if not kept:
            raise
        raise ExecutionError(
            f"writing the bundle failed ({error.strerror or type(error).__name__}) after private selection: the "
            f"budget is spent, but the sealed transcript was kept at {str(kept[0])!r} (as sensitive as the data; "
            "keep it with it). Fix the cause (free space, permissions), then regenerate the same bundle: "
            f"privlab release {spec.path} --data {data} --out {out} --replay {kept[0]}") from None
    return ReleaseResult(out=out, total_epsilon=spec.total_epsilon, budget=cap, configuration=outcome.configuration,
                         accepted=outcome.accepted, public_files=(*bundle.PUBLIC_FILES, bundle.CHECKSUMS))


def _select(cleaned: pd.DataFrame, *, spec: ReleaseSpec, shortlist: Shortlist, source: RandomSource,
            ledger: Ledger) -> tuple[FlowOutcome, Any]:
    """Private selection over the shortlist (charged to ``ledger``, which already holds the
    record count); failures are reported without their messages."""

    def run_once(configuration: FlowConfiguration, iteration: int, *, source: RandomSource,
                 ledger: Ledger) -> tuple[FlowOutcome, bool]:
        outcome = run_flow(cleaned, space=shortlist.space, configuration=configuration,
                           settings=shortlist.settings, source=source, ledger=ledger)
        return outcome, outcome.accepted

    try:
        selection = private_selection(run_once, candidates=list(shortlist.configurations), params=spec.selection,
                                      epsilon1=shortlist.settings.epsilon_flow, source=source, ledger=ledger,
                                      name="release_candidate", step="release")
    except (BudgetExceededError, TranscriptError):
        raise  # their messages hold only ε, public parameters and transcript positions
    except Exception as error:
        raise ExecutionError(
            f"a flow failed during private selection ({type(error).__name__}); its message is withheld in "
            "release mode because it may contain values computed from the private data. Reproduce it in "
            "research mode on public data (privlab run with the grid spec); no bundle was written") from None
    if selection.is_bottom:
        raise ExecutionError("private selection ended with ⊥ (no candidate accepted within the spec's stopping "
                             "rule); the budget is spent and no bundle was written")
    return selection.output, (selection, ledger)


def _write_public(staging: Path, *, spec: ReleaseSpec, shortlist: Shortlist, outcome: FlowOutcome, selection: Any,
                  released: pd.DataFrame, budget: float, context: Mapping[str, str], n: int, seal: str) -> None:
    outcome_selection, ledger = selection
    bundle.write_released(staging, released)
    acceptance = bundle.acceptance_document([r.to_dict() for r in outcome.results],
                                            epsilon_acceptance=shortlist.settings.epsilon_acceptance)
    configuration = outcome.configuration
    config_text = bundle.config_toml(
        {
            "configuration": {"transformation": outcome.transformation.id, "synthesizer": configuration.synthesizer,
                              **dict(configuration.synthesizer_params), "min_count": configuration.min_count or 0},
            "budget": {"epsilon_record_count": spec.epsilon_count, "epsilon_generation": spec.epsilon_generation,
                       "epsilon_acceptance": spec.epsilon_acceptance, "epsilon_flow": spec.epsilon_flow,
                       "epsilon_selection": spec.epsilon_selection, "epsilon_total": spec.total_epsilon,
                       "budget": budget},
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
        "acceptance.json": bundle.json_text(acceptance),
        "acceptance.md": bundle.acceptance_markdown(acceptance),
        "config.toml": config_text,
        "ledger.json": bundle.ledger_document(ledger.to_dict(), [e.to_dict() for e in outcome_selection.accepted_events],
                                              total_epsilon=spec.total_epsilon, budget=budget),
        "privacy-statement.md": privacy_statement(spec, shortlist, n=n),
        "README.md": datasheet(spec, shortlist, outcome, acceptance, n=n, created=context["created_utc"]),
        bundle.SEAL_FILE: bundle.seal_text(seal),
    })
    bundle.write_checksums(staging)


# --- documents ----------------------------------------------------------------------------------


def privacy_statement(spec: ReleaseSpec, shortlist: Shortlist, *, n: int) -> str:
    """``privacy-statement.md``: the ε and the argument in plain language."""
    s = spec.selection
    horizon = ("γ = 0, T = ∞, ε₀ = 0: it ran until a candidate was accepted" if s.is_infinite_horizon
               else f"γ = {s.gamma:g}, at most T = {s.steps} attempts, ε₀ = {s.epsilon0:g}")
    criteria = "\n".join(f"| {c.name} | {c.kind} | {c.epsilon:g} |" for c in shortlist.settings.criteria)
    return f"""# Privacy statement: {spec.name}

**This dataset satisfies ε-differential privacy with ε = {spec.total_epsilon:g} (pure DP, δ = 0).**

## What this promises

Differential privacy limits how much the released dataset can depend on any one person. Take the
original data and add one person's record, remove one, or replace one with any other record: every
possible released dataset becomes at most e^ε ≈ {math.exp(spec.total_epsilon):.4g} times more or less likely.
Whatever an attacker knows in advance, seeing this release changes what they can learn about any
one person by at most that factor. The unit of privacy is one record of the original data, before
any cleaning. Public, and fixed from public information before the private data was read: the
schema, its bounds and categories, the cleaning rules, the shortlist of configurations to choose
from and the acceptance criteria.

The number of records is **not** treated as public. Cleaning drops records, so the count after
cleaning depends on who is in the data; it was released with Laplace noise
(ε_record_count = {spec.epsilon_count:g}, sensitivity 1), lowered by a public margin of
{record_count.count_margin(spec.epsilon_count):,} records (so that the data almost never has to be
padded), and the cleaned data was reduced to that many records by a uniformly random choice before
anything else was computed: {n:,} records. Every other step then treats this number as public, as
the paper's analysis does.

## How the budget was spent

First, the number of records: ε_record_count = {spec.epsilon_count:g}.

Then one *attempt* trains a synthetic-data model on the data with ε_generation = {spec.epsilon_generation:g},
samples a candidate dataset from it (sampling, constraint filtering and the face-privacy projection
only use the private model, so they cost nothing more), and checks the candidate with
acceptance criteria whose errors are released with Laplace noise, ε_acceptance = {spec.epsilon_acceptance:g}
in total. One attempt is therefore ε₁ = {spec.epsilon_flow:g}-differentially private.

| criterion | kind | ε |
|---|---|---|
{criteria}

Attempts were repeated, each with a configuration drawn uniformly from a public shortlist of
{len(shortlist.configurations)}, until one was accepted ({horizon}). Private selection with a known threshold
(Liu & Talwar 2019; Hod & Canetti 2024, Theorem 3) shows that the whole search, however many attempts
it takes, is (2ε₁ + ε₀)-differentially private: 2 · {spec.epsilon_flow:g} + {s.epsilon0:g} = {spec.epsilon_selection:g}.
With the record count (sequential composition): {spec.epsilon_count:g} + {spec.epsilon_selection:g} = {spec.total_epsilon:g}.
Only the accepted candidate, its configuration and the noisy acceptance results are published; the
number of attempts and the rejected candidates are not.

## How it was computed

All noise was drawn from the operating system's cryptographically secure random number generator
with exact samplers (no floating-point Laplace), and every draw was recorded in a transcript kept
with the private data, never published, so the release can be audited by replaying it. The
transcript is sealed by a hash chain whose head is published in `transcript-seal.txt`; an auditor
with the private data and the transcript runs `privlab verify`, which refuses a transcript altered
in any way and reproduces every public file byte for byte. The seal is a salted commitment: it
reveals nothing about the data to anyone who cannot break SHA-256.
Synthetic data, binning and the projection add protection in depth but are not part of the
guarantee; the guarantee comes from differential privacy alone.

References: Hod & Canetti, "Differentially Private Release of Israel's National Registry of Live
Births" (2024), Sections 3.7 and 4.9; Liu & Talwar, "Private Selection from Private Candidates"
(STOC 2019).
"""


def _criterion_line(criterion: Any) -> str:
    fields = {f.name: getattr(criterion, f.name) for f in dataclasses.fields(criterion)
              if f.name not in ("name", "threshold", "epsilon")}
    def text_of(value: Any) -> str:
        return ", ".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)

    shown = "; ".join(f"{k}: {text_of(v)}" for k, v in fields.items()
                      if k in ("target", "by", "response", "covariates", "k", "columns", "exact") and v)
    text = criterion.description or criterion.kind
    return f"- **{criterion.name}**: {text} below {criterion.threshold:g}" + (f" ({shown})" if shown else "")


def datasheet(spec: ReleaseSpec, shortlist: Shortlist, outcome: FlowOutcome, acceptance: Mapping[str, Any], *,
              n: int, created: str) -> str:
    """``README.md``: a datasheet for data users (Hod & Canetti 2024, Section 4.13)."""
    sheet = spec.datasheet
    title = sheet.get("title", spec.name)
    columns = []
    sources = [transform.column.name for transform in outcome.transformation.columns]
    for source_name, column in zip(sources, outcome.transformation.domain, strict=True):
        if column.values is None:
            values = ", ".join(column.labels)
        else:
            values = ", ".join(f"{label} → {value:g}" for label, value in zip(column.labels, column.values, strict=True))
        columns.append(f"| {source_name} | {column.name} | {values} |")
    binned = next(((name, label, value) for name, column in zip(sources, outcome.transformation.domain, strict=True)
                   if column.values is not None
                   for label, value in zip(column.labels, column.values, strict=True) if label != f"{value:g}"), None)
    example = (f": a row with {binned[0]} {binned[2]:g} means \"a {binned[0]} in the bin {binned[1]}\""
               if binned is not None else "")
    decode_text = ("each value is the **representative value of its bin** (shown after → below), not a measured "
                   f"value{example}"
                   if spec.decode == "representative" else
                   "each value was drawn **uniformly at random inside its bin** (post-processing); digits finer "
                   "than the bins below carry no information")
    criteria = "\n".join(_criterion_line(c) for c in shortlist.settings.criteria)
    return f"""# {title}

{spec.description.strip()}

{shortlist.space.description.strip()}

- Records: {n:,}: a differentially private count of the original records after cleaning, less a public
  margin of {record_count.count_margin(spec.epsilon_count):,} (see `privacy-statement.md`); add the margin for an
  unbiased estimate of the cleaned count
- Files: `released.csv` and `released.parquet` (the same table); `SHA256SUMS` lets you check them
  with `sha256sum -c SHA256SUMS`.
- Privacy: ε = {spec.total_epsilon:g}-differential privacy; see `privacy-statement.md`.
- Audit: `transcript-seal.txt` publishes the seal of the private transcript of every random draw;
  `privlab verify` checks a transcript against it and reproduces these files byte for byte.
- Produced: {created} with privlab {importlib.metadata.version("privlab")}.
{f"- Publisher: {sheet['publisher']}" if "publisher" in sheet else ""}
{f"- Population: {sheet['population']}" if "population" in sheet else ""}

## What this data is

A **synthetic** dataset: no row is a real person. A generative model was trained on the original
records with differential privacy, records were sampled from it, and the sample was released only
after it passed every acceptance criterion below (their noisy results are in `acceptance.md`). The
columns are those of the original schema at the resolution of the selected transformation
(`{outcome.transformation.id}`); {decode_text}.

Released columns and the bins behind them (a boolean column holds the code 0/1 as False/True; a
date column holds the bin's representative date):

| released column | modelled as | bins (label → representative value) |
|---|---|---|
{chr(10).join(columns)}

## Intended use: the queries it was designed to answer

The dataset was accepted because, with differential privacy, these statistics of the released data
were found close to those of the original data:

{criteria}

Analyses of the same kind (counts and proportions of these columns and their combinations, group
means along these groupings, the linear regression of these covariates) are what the data supports.

## Not intended for

- Questions about individuals, record linkage or re-identification: no row is a real person.
- Small subgroups, rare combinations and exact counts: noise and synthesis distort them; use
  proportions over groups with many records.
- Precision finer than the bins above, and columns or relations not listed in the criteria.
- Complex machine learning, anomaly or outlier detection, and any analysis whose quality the
  acceptance criteria do not cover: the results may be wrong, without warning.

## Data quality

`acceptance.md` and `acceptance.json` list each criterion's differentially private error, its
threshold, its ε, mechanism, bounds, sensitivity and noise scale. The noisy values are estimates:
a criterion's true error can differ from its noisy value by a few noise scales.

## Production

Configuration: `config.toml`. Privacy ledger: `ledger.json`. Method: Hod & Canetti, "Differentially
Private Release of Israel's National Registry of Live Births" (2024).

## Feedback

{sheet.get("contact", "Contact the publisher of this release.")}
{(chr(10) + sheet["notes"]) if "notes" in sheet else ""}
"""
