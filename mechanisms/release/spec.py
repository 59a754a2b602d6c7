"""The release spec: what a release of DP synthetic data is allowed to spend and how it stops.

Format (TOML; paths relative to the spec file)::

    name = "births-release"
    description = "..."                 # free text, shown in the README
    shortlist = "shortlist.toml"        # written by `privlab shortlist`
    budget = 10.0                       # optional default cap; --budget overrides it
    delta = 1e-9                        # only with zCDP synthesizers (MST, AIM) in the shortlist
    decode = "representative"           # or "uniform" (see privlab.mechanisms.release.run_release)

    [epsilon]                           # the budget split, checked against the settings file
    generation = 4.0                    # ε_x: the synthesizer's fit
    acceptance = 0.99                   # ε_q: the sum of the criteria's ε
    record_count = 0.02                 # ε of the DP record count (the release's size)

    [selection]                         # Algorithm 1's stopping rule (Theorem 3)
    gamma = 0.0
    steps = "inf"                       # or a positive integer
    epsilon0 = 0.0
    unbounded_ok = true                 # required with the infinite horizon

    [datasheet]                         # optional text for README.md
    title = "..."
    publisher = "..."
    contact = "..."
    population = "..."

Reading a spec reads nothing else; :func:`check_budget` refuses a spec whose total ε exceeds the
budget before anything else is opened.

``delta`` is the δ of the release's (ε, δ) guarantee when the shortlist names a synthesizer
budgeted in zCDP (MST, AIM): the total ε then depends on the shortlist's flows and is computed
and checked once the shortlist is read, still before any data
(:mod:`privlab.mechanisms.release.guarantee`), and ``[selection]`` must be random stopping
(gamma in (0, 1), steps = "inf", epsilon0 = 0). A shortlist of pure-ε synthesizers takes no
``delta``: its release is pure ε-DP.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privlab.mechanisms.selection.private_selection import PrivateSelectionParams
from privlab.platform.core import toml_files
from privlab.platform.core.errors import BudgetExceededError, SpecError
from privlab.platform.core.validation import MAX_INT64, as_float, check_path_text, shown

DECODE_MODES = ("representative", "uniform")
_SPEC_KEYS = frozenset({"name", "description", "shortlist", "budget", "delta", "decode", "epsilon", "selection",
                        "datasheet"})
_DATASHEET_KEYS = frozenset({"title", "publisher", "contact", "population", "notes"})


def require_number(value: Any, what: str, *, positive: bool = False) -> float:
    number = as_float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is None or not math.isfinite(number):
        too_large = " (too large for a float)" if isinstance(value, int) and number is None else ""
        raise SpecError(f"{what} ({shown(value)}) must be a finite number{too_large}")
    if positive and number <= 0:
        raise SpecError(f"{what} ({value!r}) must be > 0")
    return number


def read_toml(path: Path, what: str) -> dict[str, Any]:
    return toml_files.read_toml(path, what=what)[0]


def require_regular_file(path: Path, what: str) -> None:
    """Refuse a missing path, and a pipe, device or folder (reading a FIFO would block forever)."""
    check_path_text(str(path), f"{what} ({shown(str(path))})")
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
        count, then private selection (Theorem 3), composed sequentially — for pure-ε flows. With
        ``delta`` (zCDP flows) the total is :func:`~privlab.mechanisms.release.guarantee.release_guarantee`'s.
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
    delta: float | None = None

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
    document = read_toml(path, "release spec")
    unknown = sorted(set(document) - _SPEC_KEYS)
    if unknown:
        raise SpecError(f"{path}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_SPEC_KEYS))}")
    for key in ("name", "shortlist", "epsilon", "selection"):
        if key not in document:
            raise SpecError(f"{path}: {key} is required (see privlab.mechanisms.release.run_release for the format)")
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
    elif isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_INT64:
        raise SpecError(f"{path}: selection.steps ({shown(steps)}) must be a positive integer (at most 2**63 - 1) "
                        "or \"inf\"")
    try:
        params = PrivateSelectionParams(gamma=require_number(selection["gamma"], "selection.gamma"), steps=steps,
                                        epsilon0=require_number(selection["epsilon0"], "selection.epsilon0"))
    except (TypeError, ValueError) as error:
        raise SpecError(f"{path}: [selection]: {error}") from None
    _check_horizon_acknowledged(path, params, selection.get("unbounded_ok"))
    budget = document.get("budget")
    delta = document.get("delta")
    if delta is not None:
        delta = require_number(delta, "delta")
        if not 0.0 < delta < 1.0:
            raise SpecError(f"{path}: delta ({document['delta']!r}) must be in (0, 1): the δ of the release's (ε, δ) "
                            "guarantee with zCDP synthesizers (1e-9, say; well below 1/n)")
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
        epsilon_generation=require_number(epsilon["generation"], "epsilon.generation", positive=True),
        epsilon_acceptance=require_number(epsilon["acceptance"], "epsilon.acceptance", positive=True),
        epsilon_count=require_number(epsilon["record_count"], "epsilon.record_count", positive=True),
        selection=params, budget=None if budget is None else require_number(budget, "budget", positive=True),
        decode=decode, datasheet=dict(datasheet), delta=delta,
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


def resolve_budget(spec: ReleaseSpec, budget: float | None) -> float:
    """The ε cap to enforce: ``budget`` (``--budget``), else the spec's.

    Raises:
        SpecError: neither is given, or the one given is not a positive finite number.
    """
    if budget is None:
        budget = spec.budget
    if budget is None:
        raise SpecError(f"no privacy budget: give --budget EPS or set budget in the spec {spec.path}")
    return require_number(budget, "--budget", positive=True)


def check_budget(spec: ReleaseSpec, budget: float | None) -> float:
    """The budget to enforce; raises when the spec's total ε exceeds it.

    Raises:
        SpecError: No budget given (neither ``--budget`` nor the spec's ``budget``), or not > 0.
        BudgetExceededError: ``spec.total_epsilon > budget`` (nothing was read or written).
    """
    if budget is None and spec.budget is None:
        raise SpecError(f"no privacy budget: give --budget EPS (the spec {spec.path} declares total "
                        f"ε = {spec.total_epsilon:g}) or set budget in the spec")
    budget = resolve_budget(spec, budget)
    if spec.total_epsilon > budget:
        raise BudgetExceededError(
            f"the release spec {spec.path} needs total ε = {spec.epsilon_count:g} + 2·({spec.epsilon_generation:g} + "
            f"{spec.epsilon_acceptance:g}) + {spec.selection.epsilon0:g} = {spec.total_epsilon:g}, more than the "
            f"budget {budget:g}; nothing was read or written. Lower the spec's ε split or raise --budget")
    return budget
