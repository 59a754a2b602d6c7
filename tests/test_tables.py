"""The per-study result tables shared by `privlab run` and `privlab compare` (issue 14, item 5)."""

from __future__ import annotations

import math

import pytest

from privlab.platform.experiment.registry import Expectation
from privlab.platform.results.tables import render_studies, render_study


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
    from privlab.platform.experiment.registry import build_params, get_workload

    mean = get_workload("laplace_mean")
    expected = mean.expectations(build_params(mean.Params, {"epsilon": 1.0, "n": 10}, where="test"))
    assert expected["error_over_scale"] == Expectation(1.0)
    assert expected["within_scale"].value == pytest.approx(1 - math.exp(-1))  # the README's 0.632
    loss = get_workload("laplace_privacy_loss")
    expected = loss.expectations(build_params(loss.Params, {"epsilon": 2.0}, where="test"))
    assert expected["privacy_loss"].value == pytest.approx(2.0 + math.exp(-2.0) - 1)  # KL
    assert expected["in_event_d"].value == pytest.approx(math.exp(-2.0) / 2)


def test_a_study_with_many_metrics_shows_the_first_and_names_the_rest() -> None:
    from privlab.platform.results.tables import MAX_METRIC_COLUMNS

    metrics = {f"m{i:02d}_mean": float(i) for i in range(MAX_METRIC_COLUMNS + 5)} | {"eps_total": 1.0}
    row = {"id": "wide-000", "study": "wide", "workload": "w", "params": {}, "metrics": metrics}
    text = render_studies([row])
    header = text.splitlines()[1].split()
    assert header == ["config", *[f"m{i:02d}" for i in range(MAX_METRIC_COLUMNS)], "ε"]
    assert text.splitlines()[-1].startswith("… and 5 more metrics (m14, m15, m16, …)")
    assert "--study wide --metric NAME" in text
    narrow = render_studies([laplace_row(0, 0.1, 100, 0.95, 0.9, 1.01)])
    assert "more metrics" not in narrow


def _facet_row(depth: object, cp: float, label: str) -> dict:
    return {"id": f"pmse_sensitivity-000.{label}", "config": "pmse_sensitivity-000", "study": "pmse_sensitivity",
            "workload": "pmse_sensitivity", "facet": label,
            "params": {"params.n": 1000, "depth": depth, "cp": cp},
            "metrics": {"violation_rate": 0.01, "violation_ci_low": 0.0, "violation_ci_high": 0.02}}


def test_facets_are_in_the_numeric_order_of_their_parameters() -> None:
    # Issue 34 item 11: `run` showed the facets as declared (cp 0.01 first), `compare` by their labels' text.
    declared = [_facet_row(d, cp, f"d{'inf' if d == 'unlimited' else d}_cp{str(cp)[2:]}")
                for cp in (0.01, 0.001) for d in (1, 10, 2, "unlimited")]
    rows = render_study(declared).splitlines()[2:]
    assert [r.split()[0].split(".")[1] for r in rows] == [
        "d1_cp001", "d2_cp001", "d10_cp001", "dinf_cp001", "d1_cp01", "d2_cp01", "d10_cp01", "dinf_cp01"]


def test_a_mean_of_too_few_values_shows_its_n_instead_of_an_interval() -> None:
    # Issue 34 item 11: with 2 repetitions, "faithfulness_dp 0.3896 [-0.3477, 1.127]" for a metric in [0, 1].
    few = laplace_row(0, 0.1, 100, 0.3896, -0.3477, 1.127)
    few["metrics"]["error_over_scale_count"] = 2.0
    enough = laplace_row(1, 0.5, 100, 0.95, 0.9, 1.01)
    text = render_studies([few, enough])
    row_few, row_enough = text.splitlines()[3:5]
    assert "0.3896 (n=2)" in row_few and "-0.3477" not in row_few and " ok" not in row_few and "OFF" not in row_few
    assert "0.95 [0.9, 1.01]" in row_enough and "= 1 ok" in row_enough
    assert "fewer than 5 values, shown without a 95% CI" in text
    assert "checks against theory: 1 (1 ok" in text  # a mean without an interval is no check
    assert "fewer than" not in render_studies([enough])


def test_a_wide_table_fits_the_width_and_its_hint_names_the_experiment() -> None:
    # Issue 34 item 11: the births grid's table was 454 characters wide, and its hint said EXPERIMENT.
    metrics = {f"criterion_{i:02d}_rate": 0.5 for i in range(12)}
    metrics |= {f"criterion_{i:02d}_ci_low": 0.25 for i in range(12)} | {f"criterion_{i:02d}_ci_high": 0.75
                                                                          for i in range(12)}
    row = {"id": "flows-000", "study": "flows", "workload": "w", "params": {}, "metrics": metrics | {"eps_total": 1.0}}
    text = render_studies([row, {**row, "id": "flows-001"}], experiment="births grid", width=100)
    table, hint = text.split("\n… and ")
    assert max(len(line) for line in table.splitlines()) <= 100
    assert table.splitlines()[1].split()[-1] == "ε"
    assert hint.startswith("8 more metrics (criterion_04, criterion_05, criterion_06, …)")
    assert "`privlab compare 'births grid' --study flows --format csv` all of them" in hint
    assert "more metrics" not in render_studies([row], width=None)


def test_a_long_study_shows_its_first_rows_counts_every_check_and_says_how_to_list_the_rest() -> None:
    # Every fifth row's interval misses the expected 1 (mean 0.5 [0.4, 0.6]); the widest cell of
    # all is in a hidden row (row 9's mean).
    rows = [laplace_row(i, 0.1, 100 + i, 0.5 if i % 5 == 0 else 1.0, 0.4 if i % 5 == 0 else 0.9,
                        0.6 if i % 5 == 0 else 1.1) for i in range(12)]
    rows[9]["metrics"]["error_over_scale_mean"] = 12345.678
    text = render_studies(rows, experiment="grid", max_rows=4)
    lines = text.splitlines()
    assert lines[0] == "laplace_mean (12 configurations)"
    shown = [line for line in lines if line.startswith("laplace_mean-")]
    assert [line.split()[0] for line in shown] == [f"laplace_mean-{i:03d}" for i in range(4)]
    assert "… and 8 more rows: `privlab compare grid --study laplace_mean` lists them all" in text
    assert "checks against theory: 12 (9 ok, 3 OFF" in text  # the hidden rows' checks are counted
    full_dashes = render_study(rows).splitlines()[1]
    assert "1.235e+04" not in text and len(lines[2]) < len(full_dashes)  # columns sized to the rows shown
    assert render_studies(rows, experiment="grid", max_rows=12) == render_studies(rows, experiment="grid")


def _quickstart_rows() -> list[dict]:
    """The quickstart's rows as its summary gives them, every metric of every configuration set,
    with a 95% interval around theory's value (so each expectation is one check) except one
    (laplace_privacy_loss-001's P_D′(S), OFF as on the quickstart's seed)."""
    from pathlib import Path

    from privlab.platform.experiment import registry
    from privlab.platform.experiment.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[1] / "experiments" / "quickstart.toml")
    rows = []
    for config in spec.configurations:
        workload = registry.get_workload(config.workload)
        expected = dict(workload.expectations(registry.build_params(workload.Params, dict(config.params), where=config.id)))
        metrics: dict[str, float] = {"eps_total": 1.0}
        for name, kind in workload.metrics.items():
            centre = expected[name].value if name in expected else 0.123456
            if config.id == "laplace_privacy_loss-001" and name == "in_event_d_prime":
                centre += 0.5
            low, high = centre - 1e-3, centre + 1e-3
            suffix = "mean" if kind == registry.MetricKind.VALUE else "rate"
            metrics |= {f"{name}_{suffix}": centre, f"{name}_ci_low": low, f"{name}_ci_high": high,
                        f"{name}_count": 300.0}
        rows.append({"id": config.id, "study": config.study, "workload": config.workload,
                     "params": config.flat_params(), "metrics": metrics})
    return rows


@pytest.mark.parametrize("width", [80, 120, None])
def test_the_quickstart_counts_its_25_checks_whatever_the_terminal_width(width: int | None) -> None:
    """Issue 46: at 80 columns the quickstart's summary said `checks against theory: 3 (3 ok,
    0 OFF)` (only the columns that fit; 16 at 120) instead of 25 with 1 OFF; its notes now fit
    the terminal too."""
    text = render_studies(_quickstart_rows(), experiment="quickstart", width=width)
    note = text[text.index("checks against theory:"):]
    assert " ".join(note.split()).startswith("checks against theory: 25 (24 ok, 1 OFF;")
    if width is not None:
        assert max(len(line) for line in text.splitlines()) <= width, text
        assert "more metric" in text  # columns were left out at this width, and their checks still counted


def test_the_privacy_line_explains_a_huge_epsilon() -> None:
    """Issue 46: PD adult printed `ε per configuration ≤ 1e+06` with nothing on screen saying why."""
    from privlab.platform.cli.run_commands import privacy_line

    small = privacy_line({"epsilon_total": 2.0, "delta_total": 0.0, "run_id": "abc"})
    assert small.startswith("privacy: ε per configuration ≤ 2, δ ≤ 0") and "privlab ledger abc" in small
    assert "\n" not in small
    huge = privacy_line({"epsilon_total": 1e6, "delta_total": 0.0, "run_id": "abc"})
    assert "≤ 1e+06" in huge and "Theorem 1" in huge and "per-candidate guarantee" in huge
