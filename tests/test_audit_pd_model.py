"""The plausible-deniability model's distinguishing game (mechanisms/plausible_deniability/audit.py)."""

from __future__ import annotations

import pytest

from privlab.platform.audit import audit_run
from privlab.platform.audit.auditables import get_auditable
from privlab.platform.core.errors import SpecError
from privlab.platform.run.runner import RunOptions


def test_bad_parameters_are_refused():
    with pytest.raises(SpecError, match="n_structure"):
        get_auditable("pd_model").Params(epsilon=1.0, n_structure=1)
    with pytest.raises(SpecError, match="epsilon"):
        get_auditable("pd_model").Params(epsilon=0.0)


def test_thresholds_are_fixed_by_public_parameters():
    from privlab.mechanisms.plausible_deniability import audit as pd_audit

    params = get_auditable("pd_model").Params(epsilon=1.0, columns=1, n_structure=20, n_parameters=20)
    first = pd_audit._calibrated_thresholds(params)  # drawn from CALIBRATION_SEED: a function of the parameters
    assert len(first) == pd_audit.THRESHOLD_COUNT and list(first) == sorted(first)


@pytest.mark.slow
def test_thresholds_come_from_public_parameters_and_the_correct_model_is_not_flagged(tmp_path):
    auditable = get_auditable("pd_model")
    params = auditable.Params(epsilon=1.0, columns=2)
    thresholds = auditable.thresholds(params)
    assert len(thresholds) == auditable.threshold_count and list(thresholds) == sorted(thresholds)
    request = audit_run.prepare_audit("pd_model", settings=["epsilon=1.0", "columns=2"], trials=200, seed=9)
    result, _ = audit_run.run_audit(request, RunOptions(serial=True, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}",
                                                        progress=False))
    assert not result.violation
    assert result.details["thresholds"] == pytest.approx(list(thresholds))
