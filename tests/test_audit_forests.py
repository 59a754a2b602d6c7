"""The DP forests' distinguishing games (mechanisms/dipreme/audit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from privlab.platform.audit import audit_run
from privlab.platform.audit.auditables import get_auditable
from privlab.platform.core.errors import SpecError
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.run.runner import RunOptions


@pytest.mark.parametrize("name", ["forest_dipreme", "forest_dp_ert"])
def test_whitebox_score_is_centred_on_d_and_shifted_by_the_target_on_d_prime(name):
    auditable = get_auditable(name)
    params = auditable.Params(epsilon=4.0)
    d, d_prime = auditable.neighbours(params, np.random.default_rng(0))
    on_d = np.array([auditable.release(params, d, source=SeededSource(np.random.default_rng(i)), ledger=None)
                     for i in range(200)])
    on_d_prime = np.array([auditable.release(params, d_prime, source=SeededSource(np.random.default_rng(10_000 + i)),
                                             ledger=None) for i in range(200)])
    spread = auditable._sums_spread(params)
    assert on_d.std() <= 1.3 * spread  # the leaf sums' noise, no more (the spread bounds it)
    assert abs(on_d.mean()) < 5 * spread / np.sqrt(200)
    assert abs(on_d_prime.mean() - on_d.mean() - 1.0) < 7 * spread / np.sqrt(200)


def test_bad_forest_parameters_are_refused():
    with pytest.raises(SpecError, match="n_estimators"):
        get_auditable("forest_dipreme").Params(epsilon=1.0, n_estimators=0)
    with pytest.raises(SpecError, match="threat"):
        get_auditable("forest_dp_ert").Params(epsilon=1.0, threat="x")


@pytest.mark.statistical
@pytest.mark.parametrize("name", ["forest_dipreme", "forest_dp_ert"])
def test_correct_forests_stay_within_their_claim_in_process(name):
    """The game's scores, counted as the workload counts them, bound ε below the claim."""
    from privlab.platform.audit.audit_statistics import epsilon_lower_bound

    auditable = get_auditable(name)
    params = auditable.Params(epsilon=1.0)
    d, d_prime = auditable.neighbours(params, np.random.default_rng(0))
    thresholds = auditable.thresholds(params)
    counts_d, counts_dp = np.zeros(len(thresholds), int), np.zeros(len(thresholds), int)
    for trial in range(300):
        source = SeededSource(np.random.default_rng([7, trial]))
        counts_d += np.array(thresholds) <= auditable.release(params, d, source=source, ledger=None)
        counts_dp += np.array(thresholds) <= auditable.release(params, d_prime, source=source, ledger=None)
    assert epsilon_lower_bound(counts_d, counts_dp, 300, thresholds, confidence=0.95).epsilon_lower <= 1.0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["forest_dipreme", "forest_dp_ert"])
def test_correct_forests_are_not_flagged(name, tmp_path):
    request = audit_run.prepare_audit(name, settings=["epsilon=1.0"], trials=300, seed=5)
    result, _ = audit_run.run_audit(request, RunOptions(serial=True, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}",
                                                        progress=False))
    assert not result.violation and result.empirical <= 1.0
