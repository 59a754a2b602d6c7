"""Acceptance criteria: an error measure, a threshold and a DP release of the measure.

An acceptance criterion ``AC = (E, T)`` compares the transformed private dataset ``R`` with a
public release candidate ``S`` (both frames of integer codes over one
:class:`~privlab.mechanisms.tabular.domain.Domain`, with the same number of rows ``n``); the
candidate passes when the DP estimate of ``E(R, S)`` is below ``T`` (Hod & Canetti 2024,
Definition 3 and Section 4.5). Each criterion releases its measure with its own ε, records the
step in the ledger with its sensitivity and noise scale, and returns a
:class:`CriterionResult`. The exact (non-DP) value is attached only in research mode.

Subclasses are frozen keyword-only dataclasses (hyperparameters from the spec) registered by
``kind`` with :func:`register_criterion`; :func:`criterion_from_spec` builds one from a spec
table and rejects unknown keys.

Privacy:
    The neighbouring relation is replace-one with ``n`` public (Section 4.4.2): ``R`` and
    ``R'`` differ in one record, ``S`` is fixed and public. Sensitivities below are for that
    relation.
"""

from __future__ import annotations

import abc
import dataclasses
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.basic.laplace import laplace_mechanism
from privlab.mechanisms.tabular.domain import Domain
from privlab.platform.core.errors import SchemaError, SpecError
from privlab.platform.core.plugins import Registry
from privlab.platform.core.validation import ConstrainedParams, ConstraintSpec, Interval, Text
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import SENSITIVITY_NOTE, PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

#: A finite real number (a threshold, a mean to fill in).
FINITE = Interval(numbers.Real, None, None, closed="neither")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CriterionResult:
    """What one criterion released: the DP value, the decision and how it was computed.

    ``true_value`` is the exact error measure; it is ``None`` in release mode, where nothing
    computed from the private data without DP may leave the mechanism.
    """

    name: str
    kind: str
    threshold: float
    dp_value: float
    passed: bool
    epsilon: float
    mechanism: str
    sensitivity: float
    noise_scale: float
    bounds: tuple[float, float] | None = None
    true_value: float | None = None
    details: tuple[tuple[str, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["bounds"] = None if self.bounds is None else list(self.bounds)
        d["details"] = dict(self.details)
        return d


@dataclasses.dataclass(frozen=True, kw_only=True)
class AcceptanceCriterion(ConstrainedParams, abc.ABC):
    """Base class: ``name`` (unique within a spec), ``threshold`` T and ``epsilon``.

    Each kind declares its hyperparameters' constraints in ``_parameter_constraints`` (this
    class's three plus its own); every message starts ``criterion NAME:`` and every mistake is a
    :class:`SpecError`. Lists and tables of columns are checked and normalised in
    ``_check_together`` (helpers below), with the rules that tie fields together.

    The default :meth:`release` adds ``Lap(Δ/ε)`` to :meth:`error` with ``Δ =``
    :meth:`sensitivity` and passes when the noisy value is ``< threshold``; criteria whose DP
    release differs (threshold adjustments, several noisy pieces) override it.
    """

    kind: ClassVar[str]
    #: What the error measure is, in plain language (datasheets); one line, no threshold.
    description: ClassVar[str] = ""
    #: Whether :meth:`error` is defined on normalised quantities (proportions, means, regression
    #: fits) and so compares an ``R`` and an ``S`` of any sizes (True), or compares counts or
    #: matches records one to one and needs ``|R| = |S|`` (False, the safe default): research
    #: tools (``privlab evaluate``) then resize the candidate to ``|R|`` first. Inside a flow both
    #: have ``n`` rows and :meth:`release` keeps requiring it (its sensitivity is for ``n``).
    any_size: ClassVar[bool] = False

    name: str
    threshold: float
    epsilon: float

    _parameter_constraints: ClassVar[Mapping[str, Sequence[ConstraintSpec]]] = {
        "name": [Text()],
        "threshold": [FINITE],
        "epsilon": [Interval(numbers.Real, 0, None, closed="neither")],
    }
    _parameter_hints: ClassVar[Mapping[str, str]] = {
        "epsilon": "drop the criterion from the spec instead of giving it no budget"}
    _type_error: ClassVar[type[Exception]] = SpecError  # a criterion is a spec table: every mistake is the spec's
    _undeclared_fields_allowed: ClassVar[bool] = True  # a plugin criterion may check its own keys itself

    def _message_prefix(self) -> str:
        return f"criterion {self.name!r}: "

    def check_domain(self, domain: Domain) -> None:
        """Raise :class:`SpecError` when the criterion cannot apply to ``domain`` (public; the
        default has nothing to check beyond what :meth:`error` checks)."""

    # --- DP fits shared between the criteria of one flow ------------------------------------
    # A criterion may compute a DP fit that later criteria of the same flow reuse (paying for it
    # once). A provider returns the fit's key from shared_fit_provided() and computes it in
    # fit_shared(); a user returns the same key from shared_fit_needed() and receives the fit
    # as release(..., fit=...). The flow matches them by key; no kind is named anywhere.

    #: What a spec must add when this criterion needs a fit no earlier criterion provides.
    missing_fit_hint: ClassVar[str] = "it needs a DP fit that no criterion listed before it provides"

    def shared_fit_provided(self) -> Any:
        """The key of the DP fit this criterion computes for others (None: it provides none)."""
        return None

    def shared_fit_needed(self) -> Any:
        """The key of a DP fit from an earlier criterion that this one uses (None: none)."""
        return None

    def fit_shared(self, transformed: pd.DataFrame, *, domain: Domain, source: RandomSource, ledger: Ledger,
                   scope: str = "data") -> Any:
        """Compute the fit keyed by :meth:`shared_fit_provided` (charging ``ledger``)."""
        raise NotImplementedError(f"criterion kind {self.kind!r} provides no shared fit")

    @abc.abstractmethod
    def error(self, transformed: pd.DataFrame, candidate: pd.DataFrame, *, domain: Domain) -> float:
        """The exact error measure ``E(R, S)`` (not private; research use and inside release)."""

    @abc.abstractmethod
    def sensitivity(self, n: int) -> float:
        """Global sensitivity of :meth:`error` in ``R`` for ``n`` records (replace-one)."""

    def planned_events(self, n: int, *, scope: str = "data") -> list[PrivacyEvent]:
        """The ledger steps :meth:`release` takes for ``n`` records (research-mode records; a
        release source uses the lattice Laplace with the same ε and sensitivity). Criteria whose
        release differs from one Laplace step override this together with :meth:`release`. A
        criterion whose Δ depends on the candidate (``candidate_sensitivity``) plans the worst case
        and says so in the event's details (:data:`~privlab.platform.dp.privacy_event.SENSITIVITY_NOTE`)."""
        delta = self.sensitivity(n)
        details: tuple[tuple[str, str], ...] = ()
        if hasattr(self, "candidate_sensitivity"):  # the release uses the candidate's own, smaller Δ
            details = ((SENSITIVITY_NOTE, f"worst case over candidates; each attempt's actual value is the metric "
                                          f"{self.name}_sensitivity"),)
        return [PrivacyEvent(name=f"acceptance:{self.name}", mechanism="laplace", epsilon=float(self.epsilon),
                             sensitivity=delta, noise_scale=delta / self.epsilon, scope=scope, step="acceptance",
                             details=details)]

    @property
    def bounds(self) -> tuple[float, float] | None:
        """The public clipping bounds ``[L, U]`` the criterion uses, if any (for reports)."""
        return None

    def release(
        self,
        transformed: pd.DataFrame,
        candidate: pd.DataFrame,
        *,
        domain: Domain,
        source: RandomSource,
        ledger: Ledger,
        scope: str = "data",
    ) -> CriterionResult:
        """Release ``E(R, S) + Lap(Δ/ε)`` and compare it with the threshold.

        Privacy:
            ε-DP by the Laplace mechanism for a measure of sensitivity Δ; the comparison with
            the public threshold is post-processing.
        """
        check_same_size(transformed, candidate, name=self.name)
        value = self.error(transformed, candidate, domain=domain)
        return release_laplace_measure(self, value, sensitivity=self.sensitivity(len(transformed)), source=source,
                                       ledger=ledger, scope=scope)


def checked_record_count(n: object) -> int:
    """``n``, the record count a criterion's sensitivity is stated for, as an int ``>= 1``.

    Raises:
        SchemaError: ``n`` is not an int (``bool`` excluded) or is below 1.
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise SchemaError(f"n ({n!r}) must be an int >= 1")
    return int(n)


def check_not_empty(transformed: pd.DataFrame, candidate: pd.DataFrame, *, name: str) -> None:
    """An ``any_size`` criterion's :meth:`~AcceptanceCriterion.error` needs records on both sides."""
    for frame, what in ((transformed, "transformed dataset"), (candidate, "candidate")):
        if len(frame) == 0:
            raise SpecError(f"criterion {name!r}: the {what} is empty; give it at least one record")


def check_same_size(transformed: pd.DataFrame, candidate: pd.DataFrame, *, name: str) -> None:
    """The criteria assume ``|R| = |S| = n`` (n public); anything else is a caller error."""
    if len(transformed) == 0:
        raise SpecError(f"criterion {name!r}: the transformed dataset is empty")
    if len(transformed) != len(candidate):
        raise SpecError(
            f"criterion {name!r}: the candidate has {len(candidate)} rows but the transformed data has "
            f"{len(transformed)}; the flow must sample exactly n records"
        )


# --- helpers shared by the criteria modules ---------------------------------------------------


def check_column_names(criterion: str, key: str, value: object, *, allow_empty: bool = False) -> tuple[str, ...]:
    """A spec list of distinct column names as a tuple (lists from TOML are accepted).

    Raises:
        SpecError: not a sequence of non-empty strings, repeated names, or empty when not allowed.
    """
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise SpecError(f"criterion {criterion!r}: {key} ({value!r}) must be a list of column names")
    names = tuple(value)
    if not all(isinstance(v, str) and v for v in names):
        raise SpecError(f"criterion {criterion!r}: {key} ({value!r}) must hold non-empty strings")
    if len(set(names)) != len(names):
        raise SpecError(f"criterion {criterion!r}: {key} ({value!r}) must not repeat a column")
    if not names and not allow_empty:
        raise SpecError(f"criterion {criterion!r}: {key} ({value!r}) must name at least one column")
    return names


def require_columns(criterion: str, key: str, names: Sequence[str], domain: Domain, *, numeric: bool = False) -> None:
    """Raise :class:`SpecError` naming ``key`` if a column is not in ``domain`` (or not numeric)."""
    for name in names:
        if name not in domain.names:
            raise SpecError(
                f"criterion {criterion!r}: {key} names column {name!r}, which is not in the domain "
                f"({', '.join(domain.names)})"
            )
        if numeric and not domain[name].numeric:
            raise SpecError(
                f"criterion {criterion!r}: {key} column {name!r} is nominal; declare a public number per "
                f"category with values = [...] in its transformation alternative (kind 'categorical' or "
                "'groups'), or bin a numeric column (Section 4.5.3's bin-to-number rule)"
            )


def codes_of(frame: pd.DataFrame, domain: Domain, names: Sequence[str], *, what: str) -> np.ndarray:
    """The ``n × len(names)`` int64 code matrix of ``names``, after validating the whole frame."""
    valid = domain.validate(frame, what=what)
    if not names:
        return np.empty((len(valid), 0), dtype=np.int64)
    return np.column_stack([valid[c].to_numpy() for c in names]).astype(np.int64, copy=False)


def release_laplace_measure(
    criterion: AcceptanceCriterion,
    value: float,
    *,
    sensitivity: float,
    source: RandomSource,
    ledger: Ledger,
    scope: str,
    threshold: float | None = None,
    public_details: tuple[tuple[str, float], ...] = (),
    research_details: tuple[tuple[str, float], ...] = (),
) -> CriterionResult:
    """Release ``value + Lap(Δ/ε)`` for ``criterion`` and build its :class:`CriterionResult`.

    Args:
        criterion: Supplies name, kind, ε, the configured threshold and the bounds.
        value: The exact measure on the private data.
        sensitivity: Its global sensitivity Δ (from public quantities only).
        source, ledger, scope: As in :meth:`AcceptanceCriterion.release`.
        threshold: The threshold the noisy value is compared with (default: the configured one).
        public_details: Facts computed from public inputs only (the candidate, n, the spec).
        research_details: Facts that depend on the private data without DP; attached in
            research mode only.

    Privacy:
        ε-DP by the Laplace mechanism for Δ; the comparison and the public details are
        post-processing. Release mode keeps ``true_value`` and ``research_details`` out.
    """
    noisy = float(
        laplace_mechanism(value, sensitivity=sensitivity, epsilon=criterion.epsilon, source=source,
                          ledger=ledger, name=f"acceptance:{criterion.name}", scope=scope, step="acceptance")
    )
    event = ledger.events[-1]
    used = float(criterion.threshold if threshold is None else threshold)
    research = source.mode == "research"
    return CriterionResult(
        name=criterion.name,
        kind=criterion.kind,
        threshold=used,
        dp_value=noisy,
        passed=noisy < used,
        epsilon=float(criterion.epsilon),
        mechanism=event.mechanism,
        sensitivity=float(sensitivity),
        noise_scale=float(event.noise_scale or 0.0),
        bounds=criterion.bounds,
        true_value=float(value) if research else None,
        details=public_details + (research_details if research else ()),
    )



CRITERIA: Registry[type[AcceptanceCriterion]] = Registry("criterion kind", groups=("privlab.criteria",))


def register_criterion(cls: type[AcceptanceCriterion]) -> type[AcceptanceCriterion]:
    """Class decorator: register a criterion class under its ``kind`` (list its module under the
    ``privlab.criteria`` entry points)."""
    return CRITERIA.register(cls.kind, cls)


def criterion_kinds() -> tuple[str, ...]:
    return tuple(CRITERIA.names())


def criterion_from_spec(table: Mapping[str, Any], *, where: str) -> AcceptanceCriterion:
    """Build a criterion from a spec table ``{kind = "...", name = "...", threshold, epsilon, ...}``.

    Raises:
        SpecError: Unknown kind, unknown or missing keys, or invalid values (naming ``where``).
    """
    kind = table.get("kind")
    if not isinstance(kind, str) or kind not in CRITERIA:
        raise SpecError(f"{where}: kind ({kind!r}) must be one of {', '.join(CRITERIA.names())}")
    cls = CRITERIA.get(kind)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(table) - set(fields) - {"kind"})
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)}; {kind} accepts {', '.join(sorted(fields))}")
    missing = sorted(
        name for name, f in fields.items()
        if name not in table and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    if missing:
        raise SpecError(f"{where}: missing key(s) {', '.join(missing)} for criterion kind {kind!r}")
    try:
        return cls(**{k: v for k, v in table.items() if k != "kind"})
    except (TypeError, ValueError) as error:
        raise SpecError(f"{where}: {error}") from error
