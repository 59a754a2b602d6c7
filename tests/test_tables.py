"""The per-study result tables shared by `privlab run` and `privlab compare` (issue 14, item 5)."""

from __future__ import annotations

import math

import pytest

from privlab.platform.registry import Expectation
from privlab.platform.tables import render_studies, render_study


def laplace_row(index: int, epsilon: float, n: int, mean: float, low: float, high: float) -> dict:
    return {
        "id": f"laplace_mean-{index:03d}", "study": "laplace_mean", "workload": "laplace_mean",
        "params": {"params.epsilon": epsilon, "params.n": n, "params.lower": 0.0, "params.upper": 1.0},
        "metrics": {"error_over_scale_mean": mean, "error_over_scale_ci_low": low, "error_over_scale_ci_high": high,
                    "error_over_scale_count": 300.0, "eps_total": epsilon, "delta_total": 0.0},
    }


def test_varying_parameters_are_columns_and_columns_line_up() -> None:
    text = render_study([laplace_row(0, 0.1, 100, 0.9, 0.8, 1.01), laplace_row(1, 0.1, 1000, 12345.678, 0.5, 0.6)])
    header, dashes, *rows = text.splitlines()[:4]
    assert header.split()[:3] == ["config", "n", "error_over_scale"]  # epsilon is the same in both: no column
    starts = [i for i, c in enumerate(dashes) if c == "-" and (i == 0 or dashes[i - 1] == " ")]
    for line in (header, *rows):
        for start in starts[1:]:
            assert line[start - 2:start] == "  ", (line, start)  # every cell starts at its column
    assert "0.9 [0.8, 1.01]" in rows[0] and "100 " in rows[0]  # an integer parameter stays an integer


def test_the_verdict_is_a_test_of_the_expected_value_against_the_interval() -> None:
    inside, outside = laplace_row(0, 0.1, 100, 0.95, 0.9, 1.01), laplace_row(1, 0.5, 100, 0.9, 0.8, 0.99)
    text = render_studies([inside, outside])
    row_in, row_out = text.splitlines()[3:5]
    assert row_in.rstrip().endswith("0.1") and "= 1 ok" in row_in
    assert "= 1 OFF" in row_out
    assert "checks against theory: 2 (1 ok, 1 OFF" in text


@pytest.mark.parametrize(("relation", "value", "low", "high", "holds"), [
    ("=", 1.0, 0.9, 1.1, True), ("=", 1.0, 1.01, 1.1, False), (">=", 0.95, 0.9, 0.96, True),
    (">=", 0.95, 0.9, 0.94, False), ("<=", 0.1, 0.05, 0.2, True), ("<=", 0.1, 0.11, 0.2, False),
])
def test_expectation_holds(relation: str, value: float, low: float, high: float, holds: bool) -> None:
    assert Expectation(value, relation).holds(low, high) is holds


def test_quickstart_workloads_state_what_theory_expects() -> None:
    from privlab.platform.registry import build_params, get_workload

    mean = get_workload("laplace_mean")
    expected = mean.expectations(build_params(mean.Params, {"epsilon": 1.0, "n": 10}, where="test"))
    assert expected["error_over_scale"] == Expectation(1.0)
    assert expected["within_scale"].value == pytest.approx(1 - math.exp(-1))  # the README's 0.632
    loss = get_workload("laplace_privacy_loss")
    expected = loss.expectations(build_params(loss.Params, {"epsilon": 2.0}, where="test"))
    assert expected["privacy_loss"].value == pytest.approx(2.0 + math.exp(-2.0) - 1)  # KL
    assert expected["in_event_d"].value == pytest.approx(math.exp(-2.0) / 2)


def test_a_study_with_many_metrics_shows_the_first_and_names_the_rest() -> None:
    from privlab.platform.tables import MAX_METRIC_COLUMNS

    metrics = {f"m{i:02d}_mean": float(i) for i in range(MAX_METRIC_COLUMNS + 5)} | {"eps_total": 1.0}
    row = {"id": "wide-000", "study": "wide", "workload": "w", "params": {}, "metrics": metrics}
    text = render_studies([row])
    header = text.splitlines()[1].split()
    assert header == ["config", *[f"m{i:02d}" for i in range(MAX_METRIC_COLUMNS)], "ε"]
    assert text.splitlines()[-1].startswith("… and 5 more metrics (m14, m15, m16, …)")
    assert "--study wide --metric NAME" in text
    narrow = render_studies([laplace_row(0, 0.1, 100, 0.95, 0.9, 1.01)])
    assert "more metrics" not in narrow
