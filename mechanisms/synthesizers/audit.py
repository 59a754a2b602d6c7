"""Distinguishing games for every registered synthesizer: ``privlab audit synth_<name>``.

One auditable per entry of the synthesizer registry is made at import
(:func:`register_synthesizer_audits`), so a synthesizer plugged in through the
``privlab.synthesizers`` entry points is audited with no new code.

The game (Annamalai, Ganev & De Cristofaro 2024, Section 4; Jagielski et al. 2020): the
adversary knows the public domain and every record but one, and must tell whether the release
was fitted on D or on its neighbour D′. The pair is the worst case for marginal-based
synthesizers: a domain of ``columns`` columns with ``categories`` codes each; D holds ``n``
copies of the record x₀ = (0, …, 0); D′ replaces one of them by the target x* = (k−1, …, k−1),
a unique outlier that differs from x₀ in every column, so every marginal any synthesizer
measures moves by its full replace-one sensitivity (one count −1 in x₀'s cell, one +1 in x*'s).
Each trial fits once on D and once on D′ with fresh randomness from the trial's seed stream.

Threat models (the score is a function of what the adversary sees, so any test on it is
post-processing of the release):

* ``whitebox``: the adversary sees the released noisy measurements (the synthesizer's fitted
  ``measurements_``: ``(clique, noisy counts, scale)``, as MST, AIM, PrivBayes and the
  independent baseline keep them) and runs the likelihood-ratio test of D against D′ on the
  two cells of every measured marginal that the pair moves. Gaussian noise (the zCDP
  synthesizers): the score is ``z = Σ_m [(y_m(x*) − 0) − (y_m(x₀) − n)]/σ_m² / sqrt(Σ_m 2/σ_m²)``,
  exactly N(0, 1) under D and N(sqrt(Σ_m 2/σ_m²), 1) under D′ given the selected marginals: the
  Neyman–Pearson test for those measurements, whose trade-off curve is a GDP curve. Laplace noise
  (the pure-ε synthesizers): the score is the exact log-likelihood ratio
  ``Σ_m [|y_m(x*)| − |y_m(x*) − 1| + |y_m(x₀) − n| − |y_m(x₀) − n + 1|]/b_m``, which ranges over
  ``[−L, L]`` with ``L`` the sum of the tables' ε.
* ``blackbox``: the adversary sees ``synthetic_records`` synthetic records and counts those
  equal to x* (the density test on the target's cell).

Claims: a pure synthesizer claims (ε, 0); a zCDP one (MST, AIM) claims (ε, δ) with δ the δ''
its ε is read at (``delta``), and μ = sqrt(2ρ) for its ρ (what its Gaussian measurements would
give alone; the 2026 MST/AIM audit's "implied μ"). The audit counts ``score ≥ t`` over a
fixed grid of thresholds set from those public numbers, then bounds ε (at δ) and μ from the
counts (:mod:`privlab.platform.audit.audit_statistics`).

Privacy:
    The audited guarantee is each synthesizer's: replace-one neighbouring with ``n`` public.
    Each fit charges a ledger of its own (a ``zcdp`` one at δ'' = ``delta`` for zCDP
    synthesizers), which the fit itself checks against its plan; the trial's ledger is not
    charged (the audit's plan is empty), since a simulated world's fits spend no real budget.

References:
    Annamalai, Ganev & De Cristofaro (2024), arXiv 2405.10994 (worst-case datasets, white-box
    attacks on synthetic-data generators); "Tight auditing of differential privacy in MST and
    AIM" (2026), arXiv 2604.18352 (GDP audits from the trade-off curve); Dong, Roth & Su (2022)
    (Gaussian DP); Neyman & Pearson (1933).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from privlab.mechanisms.synthesizers.base import Synthesizer, synthesizer_class, synthesizer_from_spec, synthesizer_names
from privlab.mechanisms.synthesizers.zcdp import ZcdpSynthesizer
from privlab.mechanisms.tabular.domain import CODE_DTYPE, ColumnDomain, Domain
from privlab.platform.audit.registration import EpsilonAuditable, register_auditable
from privlab.platform.core.errors import SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource

__all__ = ["STRUCTURE_VIEWS", "THREATS", "SynthesizerGameParams", "SynthesizerGame", "privbayes_structure_llr",
           "register_synthesizer_audits", "whitebox_score", "worst_case_pair", "worst_case_records"]

THREATS = ("whitebox", "blackbox")
RELATIONS = ("replace-one", "add-remove")
THRESHOLD_COUNT = 25
MAX_CELLS = 4096  # the largest domain (product of the sizes) the worst-case pair is built over
_HALF_GRID = (THRESHOLD_COUNT - 1) // 2
DOMAIN_MISMATCH_SCORE = -1000.0  # below every threshold of the white-box grids


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesizerGameParams:
    """A distinguishing game's parameters (the synthesizer is fixed by the auditable).

    Attributes:
        epsilon: The claimed ε of one fit (required: privlab has no default ε).
        delta: The δ'' a zCDP synthesizer's ε is read at (required for those, refused for
            pure-ε ones).
        threat: ``"whitebox"`` (the noisy measurements) or ``"blackbox"`` (synthetic records).
        n: Records in D and D′ (public).
        columns, categories: The worst-case domain: ``columns`` columns of ``categories`` codes.
        synthetic_records: Records the black-box adversary sees (default ``n``).
        hyperparameters: The synthesizer's hyperparameters as a JSON object, e.g.
            ``'{"iters": 50}'`` (default: its own defaults).
        outlier_columns: In how many of the last columns the target differs from x₀ (default:
            all). Fewer leaves the target correlated with nothing in some columns, so the pair
            moves a structure choice too (which columns a Bayesian network links).
        neighbouring: ``"replace-one"`` (D′ replaces a copy of x₀ by x*; the synthesizers'
            relation, n public) or ``"add-remove"`` (D′ is D plus x*, n + 1 records). The
            synthesizers state no add/remove guarantee; that game compares with the same ε,
            which their measurements satisfy there too (a count vector's ℓ1 and ℓ2 sensitivities
            under add/remove, 1 and 1, are at most replace-one's, 2 and √2), so a bound above it
            points at a step whose sensitivity depends on n.
    """

    synthesizer: ClassVar[str] = ""

    epsilon: float
    delta: float | None = None
    threat: str = "whitebox"
    n: int = 100
    columns: int = 3
    categories: int = 2
    synthetic_records: int | None = None
    hyperparameters: str = "{}"
    outlier_columns: int | None = None
    neighbouring: str = "replace-one"

    def __post_init__(self) -> None:
        if not (isinstance(self.epsilon, (int, float)) and not isinstance(self.epsilon, bool)
                and math.isfinite(self.epsilon) and self.epsilon > 0):
            raise SpecError(f"epsilon ({self.epsilon!r}) must be a finite number > 0")
        if self.threat not in THREATS:
            raise SpecError(f"threat ({self.threat!r}) must be one of {list(THREATS)}")
        if self.neighbouring not in RELATIONS:
            raise SpecError(f"neighbouring ({self.neighbouring!r}) must be one of {list(RELATIONS)}")
        for label, value, low in (("n", self.n, 2), ("columns", self.columns, 1), ("categories", self.categories, 2)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise SpecError(f"{label} ({value!r}) must be an integer ≥ {low}")
        if self.outlier_columns is not None and (not isinstance(self.outlier_columns, int)
                                                 or not 1 <= self.outlier_columns <= self.columns):
            raise SpecError(f"outlier_columns ({self.outlier_columns!r}) must be an integer in [1, columns = "
                            f"{self.columns}], or unset for all")
        if self.synthetic_records is not None and (not isinstance(self.synthetic_records, int)
                                                   or self.synthetic_records < 1):
            raise SpecError(f"synthetic_records ({self.synthetic_records!r}) must be an integer ≥ 1, or unset for n")
        if self.categories ** self.columns > MAX_CELLS:
            raise SpecError(
                f"columns ({self.columns}) and categories ({self.categories}) make a domain of "
                f"{self.categories ** self.columns:,} cells; the worst-case pair is built over at most {MAX_CELLS:,}: "
                "use fewer columns or categories")
        cls = synthesizer_class(self.synthesizer)
        zcdp = issubclass(cls, ZcdpSynthesizer)
        if zcdp and self.delta is None:
            raise SpecError(f"{self.synthesizer} is budgeted in zCDP: give the δ'' its ε is read at (--set delta=1e-2)")
        if not zcdp and self.delta is not None:
            raise SpecError(f"{self.synthesizer} is pure ε-DP: delta ({self.delta!r}) must be unset")
        if zcdp and not (isinstance(self.delta, float) and 0 < self.delta < 1):
            raise SpecError(f"delta ({self.delta!r}) must be a number in (0, 1)")
        synthesizer_hyperparameters(self)  # parses and builds the synthesizer once: a bad table fails here
        if self.threat == "whitebox" and not declares_whitebox_view(synthesizer_class(self.synthesizer)):
            raise SpecError(
                f"synthesizer {self.synthesizer!r} exposes no white-box view (no fitted measurements_ of "
                "(clique, noisy counts, scale)); audit it black-box: --set threat=blackbox")


def synthesizer_hyperparameters(params: SynthesizerGameParams) -> dict[str, Any]:
    try:
        table = json.loads(params.hyperparameters)
    except json.JSONDecodeError as error:
        raise SpecError(f"hyperparameters ({params.hyperparameters!r}) must be a JSON object: {error}") from None
    if not isinstance(table, dict):
        raise SpecError(f"hyperparameters ({params.hyperparameters!r}) must be a JSON object such as '{{\"iters\": 50}}'")
    synthesizer_from_spec(params.synthesizer, table, where=f"audit synth_{params.synthesizer}")
    return table


def worst_case_domain(columns: int, categories: int) -> Domain:
    return Domain.from_columns([ColumnDomain(name=f"c{j}", labels=tuple(str(c) for c in range(categories)))
                                for j in range(columns)])


def worst_case_records(params: SynthesizerGameParams) -> tuple[np.ndarray, np.ndarray]:
    """``(x₀, x*)``: all zeros, and the last ``outlier_columns`` columns at their largest code."""
    common = np.zeros(params.columns, dtype=CODE_DTYPE)
    target = common.copy()
    target[params.columns - (params.outlier_columns or params.columns):] = params.categories - 1
    return common, target


def worst_case_pair(params: SynthesizerGameParams) -> tuple[pd.DataFrame, pd.DataFrame]:
    """D: ``n`` copies of x₀; D′: the first of them replaced by the target x* (replace-one) or
    x* added before them (add/remove)."""
    common, target = worst_case_records(params)
    names = [f"c{j}" for j in range(params.columns)]
    d = pd.DataFrame(np.tile(common, (params.n, 1)), columns=names)
    if params.neighbouring == "add-remove":
        return d, pd.concat([pd.DataFrame([target], columns=names), d], ignore_index=True)
    d_prime = d.copy()
    d_prime.iloc[0] = target
    return d, d_prime


def _fit(params: SynthesizerGameParams, data: pd.DataFrame, source: RandomSource) -> Synthesizer:
    synthesizer = synthesizer_from_spec(params.synthesizer, synthesizer_hyperparameters(params),
                                        where=f"audit synth_{params.synthesizer}")
    if isinstance(synthesizer, ZcdpSynthesizer):
        ledger = Ledger(epsilon_cap=None, delta_cap=None, accountant="zcdp", delta_slack=params.delta)
    else:
        ledger = Ledger(epsilon_cap=None)
    domain = worst_case_domain(params.columns, params.categories)
    return synthesizer.fit(data, domain=domain, epsilon=params.epsilon, ledger=ledger, source=source)


def declares_whitebox_view(cls: type[Synthesizer]) -> bool:
    """Whether ``cls`` documents a fitted ``measurements_`` (its "Fitted attributes" list), the
    white-box view; decided from the class, so no fit runs before the audit starts (a fit that
    then lacks it is refused at the first trial)."""
    return "measurements_:" in (inspect.getdoc(cls) or "")


def whitebox_score(measurements: Sequence[tuple[Sequence[str], np.ndarray, float]], *, gaussian: bool, n: int,
                   sizes: Mapping[str, int], common: Mapping[str, int], target: Mapping[str, int],
                   replace: bool = True) -> float:
    """The likelihood-ratio statistic of D against D′ from the noisy marginals (module docstring).

    Args:
        measurements: ``(clique, noisy counts row-major over the clique, noise scale)``.
        gaussian: Gaussian noise (σ = scale) or Laplace (b = scale).
        n: Records in D (all x₀).
        sizes: Each column's number of codes.
        common, target: x₀'s and x*'s code in each column; a marginal on which they agree is
            the same on D and D′ and is skipped.
        replace: D′ replaces a copy of x₀ (its cell −1, the target's +1); otherwise D′ adds x*
            (the target's cell +1 alone, information 1/σ² instead of 2/σ²).
    """
    numerator, information = 0.0, 0.0
    for clique, noisy, scale in measurements:
        shape = tuple(sizes[c] for c in clique)
        if np.size(noisy) != math.prod(shape):
            # The release's shape is not the public domain's: it was read off the data, and the
            # adversary reads it back (a perfect test); scored apart from every likelihood ratio.
            return DOMAIN_MISMATCH_SCORE
        cell_target = int(np.ravel_multi_index(tuple(target[c] for c in clique), shape))
        cell_common = int(np.ravel_multi_index(tuple(common[c] for c in clique), shape))
        if cell_target == cell_common:
            continue
        y_target, y_common = float(noisy[cell_target]), float(noisy[cell_common])
        if gaussian:
            numerator += (y_target - ((y_common - n) if replace else 0.0)) / scale**2
            information += (2.0 if replace else 1.0) / scale**2
        else:
            numerator += (abs(y_target) - abs(y_target - 1.0)) / scale
            if replace:
                numerator += (abs(y_common - n) - abs(y_common - n + 1.0)) / scale
    if gaussian:
        return numerator / math.sqrt(information) if information else 0.0
    return numerator


def privbayes_structure_llr(fitted: Any, d: pd.DataFrame, d_prime: pd.DataFrame) -> float | None:
    """``log P_D′(network) − log P_D(network)`` of a fitted PrivBayes's released network under its
    claimed exponential mechanism (the adversary knows D and D′ and replays each greedy step's
    candidates and scores with the synthesizer's own code); ``None`` when a step scored a random
    subset of its candidates (then its probabilities are not replayed).

    The first attribute is a uniform data-independent draw and contributes nothing.
    """
    names = list(fitted.domain_.names)
    sizes = fitted.domain_.sizes
    index = {name: j for j, name in enumerate(names)}
    nodes = [(index[child], tuple(index[p] for p in parents)) for child, parents in fitted.network_]
    events = {e.name: e for e in fitted.events_}
    structure = [events[f"privbayes/structure/{i + 2}"] for i in range(len(nodes) - 1)]
    if not structure:
        return 0.0
    table_epsilon = events["privbayes/table/1"].epsilon
    codes = {"d": d.to_numpy().T.astype(np.int64), "d_prime": d_prime.to_numpy().T.astype(np.int64)}
    total = 0.0
    for i, event in enumerate(structure, start=1):
        candidates = fitted._candidates([c for c, _ in nodes[:i]], sizes, n=fitted.n_records_, table_epsilon=table_epsilon)
        if len(candidates) > fitted.params.max_candidates:
            return None
        chosen = candidates.index(nodes[i])
        log_p = {}
        for side, side_codes in codes.items():
            logits = event.epsilon * fitted._utilities(side_codes, candidates, sizes) / (2.0 * event.sensitivity)
            log_p[side] = float(logits[chosen] - np.logaddexp.reduce(logits))
        total += log_p["d_prime"] - log_p["d"]
    return total


STRUCTURE_VIEWS = {"privbayes": privbayes_structure_llr}
"""Synthesizers whose released model structure the white-box adversary also scores (by name)."""


class SynthesizerGame(EpsilonAuditable):
    """The distinguishing game for one registered synthesizer (module docstring).

    Subclasses are made by :func:`register_synthesizer_audits`, one per registered name.
    """

    synthesizer: ClassVar[str]
    neighbouring = "replace-one"  # or add-remove: the neighbouring parameter
    default_trials = 2_000
    threshold_count = THRESHOLD_COUNT

    def _class(self) -> type[Synthesizer]:
        return synthesizer_class(self.synthesizer)

    def _zcdp(self) -> bool:
        return issubclass(self._class(), ZcdpSynthesizer)

    def neighbours(self, params: SynthesizerGameParams, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
        return worst_case_pair(params)

    def claimed_epsilon(self, params: SynthesizerGameParams) -> float:
        return float(params.epsilon)

    def claimed_delta(self, params: SynthesizerGameParams) -> float:
        return float(params.delta) if self._zcdp() else 0.0

    def claimed_rho(self, params: SynthesizerGameParams) -> float:
        synthesizer = synthesizer_from_spec(params.synthesizer, synthesizer_hyperparameters(params), where="audit")
        assert isinstance(synthesizer, ZcdpSynthesizer)
        return synthesizer.rho_for(params.epsilon, params.delta)

    def claimed_mu(self, params: SynthesizerGameParams) -> float | None:
        return math.sqrt(2.0 * self.claimed_rho(params)) if self._zcdp() else None

    def plan(self, params: SynthesizerGameParams) -> list[PrivacyEvent]:
        return []  # each fit charges its own ledger (module docstring)

    def release(self, params: SynthesizerGameParams, data: pd.DataFrame, *, source: RandomSource,
                ledger: Ledger) -> float:
        fitted = _fit(params, data, source)
        if params.threat == "blackbox":
            count = params.synthetic_records or params.n
            synthetic = fitted.sample(count, rng=source.rng)
            _, target = worst_case_records(params)
            return float((synthetic.to_numpy() == target).all(axis=1).sum())
        measurements = getattr(fitted, "measurements_", None)
        if not isinstance(measurements, tuple):
            raise SpecError(f"synthesizer {self.synthesizer!r} documents measurements_ but its fit kept none; "
                            "audit it black-box: --set threat=blackbox")
        names = [f"c{j}" for j in range(params.columns)]
        common, target = (dict(zip(names, map(int, record), strict=True)) for record in worst_case_records(params))
        score = whitebox_score(measurements, gaussian=self._zcdp(), n=params.n, sizes=dict.fromkeys(names, params.categories),
                               common=common, target=target, replace=params.neighbouring == "replace-one")
        structure = STRUCTURE_VIEWS.get(self.synthesizer)
        if structure is not None and score != DOMAIN_MISMATCH_SCORE:
            d, d_prime = worst_case_pair(params)
            structure_score = structure(fitted, d, d_prime)
            score += structure_score or 0.0
        return score

    def _laplace_total(self, params: SynthesizerGameParams) -> float:
        """The largest log-likelihood ratio of the tables under the claim: their ε. (A scored
        structure adds a continuous term; the grid stays on the tables' atoms, and the top event
        takes everything above.)"""
        synthesizer = synthesizer_from_spec(params.synthesizer, synthesizer_hyperparameters(params), where="audit")
        events = synthesizer.planned_events(params.epsilon, worst_case_domain(params.columns, params.categories),
                                            params.n)
        return math.fsum(e.epsilon for e in events if e.mechanism == "laplace")

    def thresholds(self, params: SynthesizerGameParams) -> Sequence[float]:
        if params.threat == "blackbox":
            return tuple(j - 0.5 for j in range(1, THRESHOLD_COUNT + 1))
        if self._zcdp():
            mu = self.claimed_mu(params)
            assert mu is not None
            return tuple(np.linspace(-1.5, mu + 1.5, THRESHOLD_COUNT))
        # Under the claim the log-likelihood ratio lies in [−L, L] with atoms at sums of ±ε_m;
        # the grid runs just below multiples of L/6 (float rounding cannot move an atom across
        # a threshold) over [−2L, 2L], so a release noisier-looking or more revealing than the
        # claim allows lands in events of its own.
        total = self._laplace_total(params)
        step = total / (_HALF_GRID / 2)
        return tuple(step * j - 1e-9 * max(total, 1.0) for j in range(-_HALF_GRID, _HALF_GRID + 1))

    def event_label(self, params: SynthesizerGameParams, threshold: float, complement: bool) -> str:
        sign = "<" if complement else "≥"
        if params.threat == "blackbox":
            return f"synthetic copies of the target {sign} {math.ceil(threshold)}"
        statistic = "likelihood-ratio z of the noisy marginals" if self._zcdp() else "log-likelihood ratio of the noisy tables"
        return f"{statistic} {sign} {threshold:.4g}"


@functools.cache
def _params_class(name: str) -> type[SynthesizerGameParams]:
    cls = dataclasses.make_dataclass(f"SynthesizerGameParams_{name}", [], bases=(SynthesizerGameParams,),
                                     frozen=True, kw_only=True, namespace={"synthesizer": name, "__module__": __name__})
    globals()[cls.__name__] = cls  # importable by name, so params pickle to Ray workers
    return cls


@functools.cache
def _auditable_class(name: str) -> type[SynthesizerGame]:
    zcdp = issubclass(synthesizer_class(name), ZcdpSynthesizer)
    attributes = {
        "__module__": __name__, "name": f"synth_{name}", "synthesizer": name, "Params": _params_class(name),
        "description": f"distinguishing game, synthesizer {name!r}, unique outlier among identical records",
        "claim": ("(ε, δ) = (epsilon, delta) via zCDP, μ = sqrt(2ρ)" if zcdp else "ε = epsilon, δ = 0"),
        "score": "white-box likelihood ratio or black-box target copies",
        "__doc__": f"Distinguishing game for {name!r} (:class:`SynthesizerGame`).",
    }
    cls = type(f"SynthesizerGame_{name}", (SynthesizerGame,), attributes)
    globals()[cls.__name__] = cls
    return cls


def register_synthesizer_audits() -> list[str]:
    """Register ``synth_<name>`` for every registered synthesizer (again: a no-op); their names.

    Called at import; a synthesizer registered later in the process (a test's) is audited after
    calling it again.
    """
    names = []
    for name in synthesizer_names():
        register_auditable(_auditable_class(name))
        names.append(f"synth_{name}")
    return names


register_synthesizer_audits()
