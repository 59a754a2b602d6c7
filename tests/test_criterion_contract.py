"""The contract every acceptance criterion keeps, checked over every registered kind (issue 9 item 5).

The examples are the births flow settings (every built-in kind, several conditional means, the
MAE criterion reusing the coefficients criterion's DP fit) over the coarse births
transformation, on seeded random codes: the contract does not depend on the data.

For each criterion: the ledger is charged before anything is drawn (a plan that does not fit is
refused with nothing charged or drawn), the inputs are left alone, exactly the planned steps are charged, the result reports the
sensitivity and noise scale the ledger recorded, the decision is ``dp_value < threshold``, the
same seed gives the same value, research results carry the exact value and release results
never do, and the criterion's public checks accept the domain.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.acceptance.base import CRITERIA, AcceptanceCriterion, CriterionResult
from privlab.mechanisms.release.flow import load_settings
from privlab.mechanisms.tabular.domain import CODE_DTYPE, Domain
from privlab.mechanisms.tabular.space import resolve_transformation
from privlab.mechanisms.tabular.space import load_release_space
from privlab.platform.core.errors import BudgetExceededError, SchemaError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptWriter

BIRTHS = Path(__file__).resolve().parents[1] / "experiments" / "births"
SETTINGS = load_settings(BIRTHS / "flow.toml")
_MAE = next(c for c in SETTINGS.criteria if c.kind == "regression_mae")
# Every flow criterion, and the MAE criterion once more with a DP fit of its own.
CRITERIA_BY_NAME = {c.name: c for c in (*SETTINGS.criteria,
                                        dataclasses.replace(_MAE, name="mae_own_fit", fit_epsilon=0.43))}
N = 3000


@pytest.fixture(scope="module")
def domain() -> Domain:
    space = load_release_space(BIRTHS / "space.toml")
    return resolve_transformation(space, "mother_age=coarse,parity=coarse,gestation_week=coarse").domain


def _codes(domain: Domain, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({c.name: rng.integers(0, c.size, size=N).astype(CODE_DTYPE) for c in domain})


@pytest.fixture(scope="module")
def frames(domain: Domain) -> tuple[pd.DataFrame, pd.DataFrame]:
    return _codes(domain, 1), _codes(domain, 2)


def _release(criterion: AcceptanceCriterion, frames: tuple[pd.DataFrame, pd.DataFrame], domain: Domain, *,
             source: object, ledger: Ledger) -> CriterionResult:
    """Release as the flow does: a criterion that reuses a shared fit gets it from its provider."""
    original, candidate = frames
    extra = {}
    needed = criterion.shared_fit_needed()
    if needed is not None:
        provider = next(c for c in SETTINGS.criteria if c.shared_fit_provided() == needed)
        extra["fit"] = provider.fit_shared(original, domain=domain, source=SeededSource(np.random.default_rng(9)),
                                           ledger=Ledger(epsilon_cap=None))
    return criterion.release(original, candidate, domain=domain, source=source, ledger=ledger, **extra)  # type: ignore[arg-type]


def test_every_registered_kind_has_an_example() -> None:
    assert set(CRITERIA.names()) <= {c.kind for c in SETTINGS.criteria}, \
        "add an example of every registered criterion kind to the contract suite"


@pytest.mark.parametrize("kind", sorted(CRITERIA.names()))
def test_every_spec_key_has_declared_constraints(kind: str) -> None:
    cls = CRITERIA.get(kind)
    undeclared = {f.name for f in dataclasses.fields(cls)} - set(cls._parameter_constraints)
    assert not undeclared, f"criterion kind {kind!r}: declare constraints for {sorted(undeclared)}"


@pytest.mark.parametrize("name", sorted(CRITERIA_BY_NAME))
def test_it_checks_the_domain_it_is_given(name: str, domain: Domain) -> None:
    CRITERIA_BY_NAME[name].check_domain(domain)  # the public check passes on the domain it was written for


@pytest.mark.parametrize("name", sorted(CRITERIA_BY_NAME))
@pytest.mark.parametrize("n", [0, -3, True, 2.0, "10"])
def test_its_sensitivity_refuses_a_record_count_that_is_not_an_int_of_at_least_one(name: str, n: object) -> None:
    with pytest.raises(SchemaError, match=rf"^n \({re.escape(repr(n))}\) must be an int >= 1$"):
        CRITERIA_BY_NAME[name].sensitivity(n)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(CRITERIA_BY_NAME))
def test_it_charges_exactly_its_plan_and_reports_what_it_charged(name: str, domain: Domain, frames) -> None:
    criterion = CRITERIA_BY_NAME[name]
    ledger = Ledger(epsilon_cap=None)
    result = _release(criterion, frames, domain, source=SeededSource(np.random.default_rng(3)), ledger=ledger)
    planned = criterion.planned_events(N)
    assert [(e.name, e.mechanism, e.epsilon) for e in ledger.events] == \
        [(e.name, e.mechanism, e.epsilon) for e in planned]
    released = ledger.events[-1]  # the error measure's release is the last step
    assert released.sensitivity == pytest.approx(result.sensitivity)
    assert released.noise_scale == pytest.approx(result.noise_scale)
    assert result.noise_scale == pytest.approx(result.sensitivity / criterion.epsilon)
    # The plan states the candidate-free worst case; the candidate can only lower it.
    assert result.sensitivity <= planned[-1].sensitivity * (1 + 1e-12)
    assert result.passed == (result.dp_value < result.threshold)
    # Research results carry the exact value of what was released (for conditional means, the
    # measure on the DP-resized groups; for the MAE, the gap under the DP fit it was given).
    assert result.true_value is not None and np.isfinite(result.true_value)


@pytest.mark.parametrize("name", sorted(CRITERIA_BY_NAME))
def test_a_plan_that_does_not_fit_is_refused_before_any_draw(name: str, domain: Domain, frames) -> None:
    criterion = CRITERIA_BY_NAME[name]
    ledger = Ledger(epsilon_cap=criterion.epsilon / 2)

    class NoDraws(SeededSource):
        def _refuse(self, *args: object) -> object:
            raise AssertionError("a draw was made although the budget does not fit")

        _draw_laplace = _draw_integers = _draw_uniform = _draw_bernoulli = _generator = _refuse  # type: ignore[assignment]

    with pytest.raises(BudgetExceededError):
        _release(criterion, frames, domain, source=NoDraws(np.random.default_rng(0)), ledger=ledger)
    assert len(ledger) == 0


@pytest.mark.parametrize("name", sorted(CRITERIA_BY_NAME))
def test_it_leaves_its_inputs_alone(name: str, domain: Domain, frames) -> None:
    copies = tuple(frame.copy(deep=True) for frame in frames)
    _release(CRITERIA_BY_NAME[name], frames, domain, source=SeededSource(np.random.default_rng(4)),
             ledger=Ledger(epsilon_cap=None))
    for frame, copy in zip(frames, copies, strict=True):
        pd.testing.assert_frame_equal(frame, copy)


@pytest.mark.parametrize("name", sorted(CRITERIA_BY_NAME))
def test_the_same_seed_gives_the_same_release(name: str, domain: Domain, frames) -> None:
    criterion = CRITERIA_BY_NAME[name]
    first, second, other = (
        _release(criterion, frames, domain, source=SeededSource(np.random.default_rng(seed)),
                 ledger=Ledger(epsilon_cap=None)).dp_value for seed in (5, 5, 6))
    assert first == second != other


@pytest.mark.parametrize("name", sorted(CRITERIA_BY_NAME))
def test_a_release_result_never_carries_the_exact_value(name: str, domain: Domain, frames, tmp_path: Path) -> None:
    criterion = CRITERIA_BY_NAME[name]
    with TranscriptWriter(tmp_path / "t.bin", context={"spec_sha256": "00"}) as writer:
        ledger = Ledger(epsilon_cap=None)
        result = _release(criterion, frames, domain, source=SecureSource(writer), ledger=ledger)
    assert result.true_value is None and result.to_dict()["true_value"] is None
    assert ledger.events[-1].mechanism.endswith("laplace_lattice")
    assert ledger.events[-1].noise_scale >= result.sensitivity / criterion.epsilon
