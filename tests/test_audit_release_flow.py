"""The release flow's distinguishing game (mechanisms/release/audit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from privlab.platform.audit import audit_run
from privlab.platform.audit.auditables import get_auditable
from privlab.platform.core.errors import SpecError
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.run.runner import RunOptions


def test_zcdp_synthesizers_and_bad_budgets_are_refused():
    with pytest.raises(SpecError, match="zCDP"):
        get_auditable("release_flow").Params(epsilon_generation=1.0, synthesizer="mst")
    with pytest.raises(SpecError, match="epsilon_acceptance"):
        get_auditable("release_flow").Params(epsilon_generation=1.0, epsilon_acceptance=0.0)


def test_the_target_is_an_outlier_after_the_transformation_too():
    auditable = get_auditable("release_flow")
    params = auditable.Params(epsilon_generation=8.0, n=20)
    d, d_prime = auditable.neighbours(params, np.random.default_rng(0))
    assert (d_prime.iloc[1:] == d.iloc[1:]).all().all() and (d_prime.iloc[0] != d.iloc[0]).all()
    # At a large ε the published records copy the target on D′ and never on D.
    on_d = [auditable.release(params, d, source=SeededSource(np.random.default_rng(i)), ledger=None) for i in range(20)]
    on_dp = [auditable.release(params, d_prime, source=SeededSource(np.random.default_rng(i)), ledger=None)
             for i in range(20)]
    assert sum(on_dp) > sum(on_d)


@pytest.mark.slow
def test_a_correct_flow_is_not_flagged(tmp_path):
    request = audit_run.prepare_audit("release_flow", settings=["epsilon_generation=1.0"], trials=100, seed=2)
    result, _ = audit_run.run_audit(request, RunOptions(serial=True, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}",
                                                        progress=False))
    assert not result.violation and result.claimed == pytest.approx(1.1)
