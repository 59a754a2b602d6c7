"""The plausible-deniability generation study on the runner (issue 10: "On Ray", "Bad input").

A small census-like table is written as a headerless CSV with a space describing it; the
``pd_generation`` workload reads, codes and splits it, fits the DP model once per
configuration (the actor pool's shared state) and streams candidates. Results must not depend
on the batch size or the worker count, the ledger must hold the model's steps and Theorem 1
composed over every candidate, and every bad input must stop the run before anything is
logged.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from privlab.mechanisms.plausible_deniability.generation_params import (
    GenerationParams, coded_table, fit_split_model, parse_omega, run_plan)
from privlab.mechanisms.plausible_deniability.privacy_tests import PrivacyTestParams, generate_candidates
from privlab.platform.core.errors import PrivlabError, SchemaError, SpecError
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.experiment.spec import load_spec
from privlab.platform.run.runner import RunOptions, run_experiment

N = 3000
SPACE = """
name = "toy-census"
[reader]
header = false
columns = ["age", "weight", "education", "work", "income"]
strip_whitespace = true
na_values = ["?"]
[schema.age]
type = "integer"
lower = 17
upper = 56
[schema.education]
type = "categorical"
categories = ["none", "primary", "secondary", "college", "graduate"]
[schema.work]
type = "categorical"
categories = ["private", "public", "self"]
[schema.income]
type = "categorical"
categories = ["low", "high"]
[transformations.age]
source = "age"
[transformations.age.alternatives.years]
kind = "identity"
[transformations.education]
source = "education"
[transformations.education.alternatives.all]
kind = "categorical"
[transformations.work]
source = "work"
[transformations.work.alternatives.all]
kind = "categorical"
[transformations.income]
source = "income"
[transformations.income.alternatives.all]
kind = "categorical"
[raw_constraints]
drop_missing = true
"""


def _write_table(path: Path) -> None:
    """Seeded records with dependencies (age → education → income, education → work) and a
    missing value every 101 records (dropped by the space)."""
    rng = np.random.default_rng(10)
    age = rng.integers(17, 57, N)
    education = np.clip((age - 17) // 10 + rng.integers(-1, 2, N), 0, 4)
    work = np.where(education >= 3, rng.choice(3, N, p=[0.5, 0.4, 0.1]), rng.choice(3, N, p=[0.7, 0.1, 0.2]))
    income = (education + rng.normal(0, 1, N) > 2.5).astype(int)
    names = (["none", "primary", "secondary", "college", "graduate"], ["private", "public", "self"], ["low", "high"])
    lines = []
    for i in range(N):
        work_label = "?" if i % 101 == 0 else names[1][work[i]]
        lines.append(f"{age[i]}, {rng.integers(1000, 9000)}, {names[0][education[i]]}, {work_label}, "
                     f"{names[2][income[i]]}")
    path.write_text("\n".join(lines) + "\n")


def _spec(folder: Path, *, params: str = "", grid: str = 'omega = [2, "1-4"]', budget: float = 100_000.0,
          name: str = "pd-toy") -> Path:
    (folder / "space.toml").write_text(textwrap.dedent(SPACE))
    if not (folder / "toy.csv").exists():
        _write_table(folder / "toy.csv")
    spec = folder / "spec.toml"
    spec.write_text(textwrap.dedent(f"""
        name = "{name}"
        seed = 7
        [budget]
        epsilon = {budget!r}
        delta = 0.99
        accountant = "best"
        delta_slack = 9.313225746154785e-10
        [tracking]
        experiment = "{name}"
        [[study]]
        name = "generation"
        workload = "pd_generation"
        [study.params]
        space = "space.toml"
        data = "toy.csv"
        model_epsilon = 1.0
        k = 10
        gamma = 2.0
        epsilon0 = 1.0
        t = 1
        max_plausible = 60
        max_check_plausible = 500
        candidates = 600
        batch = 128
        {textwrap.dedent(params).strip()}
        [study.params.buckets]
        age = {{ width = 10 }}
        education = {{ groups = [["none", "primary"]] }}
        [study.grid]
        {grid}
        """))
    return spec


def _rates(summary: dict) -> dict[str, tuple[float, float]]:
    return {entry["id"]: (entry["metrics"]["passed_rate"], entry["metrics"]["plausible_seeds_mean"])
            for entry in summary["configurations"]}


def test_results_do_not_depend_on_batch_size(tmp_path: Path, new_store: Callable[[str], str]) -> None:
    spec = _spec(tmp_path)
    a = run_experiment(load_spec(spec), RunOptions(serial=True, progress=False,
                                                   tracking_uri=new_store("a.db")))
    b = run_experiment(load_spec(spec, ["study.generation.params.batch=37"]),
                       RunOptions(serial=True, progress=False, tracking_uri=new_store("b.db")))
    assert _rates(a) == _rates(b)
    rates = [r for r, _ in _rates(a).values()]
    assert max(rates) > 0.0 and len(set(rates)) == 2  # ω = 2 and ω ∈ [1, 4] differ


def test_actor_results_equal_the_library_generation(tmp_path: Path) -> None:
    """The workload's state and batches give what generate_candidates gives on the same model."""
    _spec(tmp_path)
    params = GenerationParams(space=str(tmp_path / "space.toml"), data=str(tmp_path / "toy.csv"), k=10, gamma=2.0,
                              epsilon0=1.0, t=1, max_plausible=60, max_check_plausible=500, candidates=300,
                              batch=64, omega="1-4", buckets={"age": {"width": 10}})
    from privlab.mechanisms.plausible_deniability.workloads import PlausibleDeniabilityGeneration
    workload = PlausibleDeniabilityGeneration()
    table = coded_table(params)
    state = workload.build_state(params, data=table.codes, rng=np.random.default_rng(3))
    passed = np.concatenate([workload.process(state, item, source=None)["passed"]  # type: ignore[arg-type]
                             for item in workload.items(params, rng=np.random.default_rng(0))])
    rng = np.random.default_rng(3)
    split, model, _ = fit_split_model(params, table, rng)
    reference = generate_candidates(model, split.seeds, synthesis=parse_omega("1-4"), test=params.test(), n=300,
                                    source=SeededSource(rng))
    assert np.array_equal(passed, reference.passed.astype(float))


def test_the_ledger_holds_the_model_and_theorem1_over_every_candidate(
    tmp_path: Path, new_store: Callable[[str], str],
) -> None:
    spec = _spec(tmp_path, grid="omega = [2]")
    summary = run_experiment(load_spec(spec), RunOptions(serial=True, progress=False,
                                                         tracking_uri=new_store("l.db")))
    entry = summary["configurations"][0]
    events = entry["ledger"]["events"]
    tests = [e for e in events if e["mechanism"] == "pd.privacy_test_2"]
    model = [e for e in events if e["step"] in ("pd.structure", "pd.parameters")]
    assert len(tests) == 1 and len(model) == 4 + 1 + 1 + 4 * 3 + 4  # H(x_i), 2 bucketed H, pairs, tables
    details = dict(tests[0]["details"])
    eps_t = 2 * (1.0 + math.log1p(2.0 / 1))                   # Theorem 1, replace-one (group of 2)
    assert details["invocations"] == 600 and details["per_candidate_epsilon"] == pytest.approx(eps_t)
    assert tests[0]["epsilon"] == pytest.approx(600 * eps_t)   # the record: basic composition over N
    assert tests[0]["scope"] == "data/seeds" and {e["scope"] for e in model} == {"data/structure", "data/parameters"}
    assert entry["ledger"]["partitions"] == [  # the plan; every trial declares the split it drew
        {"parent": "data", "parts": ["data/structure", "data/parameters", "data/seeds"],
         "split": {"kind": "permuted", "planned": True}}]
    # D_T, D_P and D_S are a positional split: the run is its worst part, here Theorem 1 over the
    # 600 candidates (basic beats Theorem 3.20 and the curves for these few, large steps).
    assert summary["epsilon_total"] == pytest.approx(600 * eps_t, rel=1e-9)


@pytest.mark.parametrize(("override", "error", "fragment"), [
    ("study.generation.params.k=0", SpecError, "k (0) must be an int >= 1"),
    ("study.generation.params.gamma=1.0", SpecError, "gamma (1.0) must be a finite real number > 1"),
    ("study.generation.params.epsilon0=0.0", SpecError, "epsilon0 (0.0) must be None or a finite real number > 0"),
    ("study.generation.grid.omega=[5]", SpecError, "omega_max (5) must be <= m (4)"),
    ("study.generation.grid.omega=['3-x']", SpecError, "omega ('3-x') must be an int >= 1 or a range"),
    ("study.generation.params.omega_rule='pooled'", SpecError,
     "omega_rule ('pooled') must be one of ['per_candidate', 'mixture']"),
    ("study.generation.params.seeds_fraction=0.7", SpecError, "must be < 1 (the rest is the test set)"),
    ("study.generation.params.t=10", ValueError, "t (10) must be < k (10)"),
    ("study.generation.params.data='missing.csv'", SpecError, "does not exist"),
    ("study.generation.params.buckets={salary={width=10}}", SchemaError, "unknown attribute 'salary'"),
    ("study.generation.params.buckets={work={groups=[[\"private\", \"farm\"]]}}", SchemaError, "'farm' is not a category"),
    ("budget.epsilon=10.0", PrivlabError, "budget"),
])
def test_bad_input_stops_before_anything_is_logged(tmp_path: Path, override: str, error: type, fragment: str) -> None:
    spec = _spec(tmp_path)
    store = tmp_path / "bad.db"
    with pytest.raises(error) as info:
        run_experiment(load_spec(spec, [override]), RunOptions(serial=True, progress=False,
                                                               tracking_uri=f"sqlite:///{store}"))
    assert fragment in str(info.value)
    assert not store.exists()


def test_generation_params_round_trip_and_omega_forms() -> None:
    assert parse_omega(10).omegas() == range(10, 11)
    assert parse_omega("5-11").omegas() == range(5, 12)
    with pytest.raises(SpecError, match="omega_max"):
        parse_omega("9-5")
    test = GenerationParams(space="s", data=["a", "b"], k=30, gamma=3.0, epsilon0=None).test()
    assert test == PrivacyTestParams(k=30, gamma=3.0, epsilon0=None, max_plausible=100, max_check_plausible=None)


def test_omega_rule_defaults_to_the_papers_and_leaves_old_specs_seeds_and_the_plan_alone() -> None:
    from privlab.platform.experiment.spec import seed_key_params

    paper = GenerationParams(toy_records=500, epsilon0=1.0)
    mixture = GenerationParams(toy_records=500, epsilon0=1.0, omega_rule="mixture")
    assert paper.synthesis() == parse_omega("5-11") and paper.synthesis().omega_rule == "per_candidate"
    assert mixture.synthesis().omega_rule == "mixture" and parse_omega(9, "mixture").omegas() == range(9, 10)
    values = {"toy_records": 500, "epsilon0": 1.0, "omega": "5-11"}
    assert seed_key_params(GenerationParams, values | {"omega_rule": "per_candidate"}) == values
    assert seed_key_params(GenerationParams, values | {"omega_rule": "mixture"})["omega_rule"] == "mixture"
    table = coded_table(paper)
    assert run_plan(paper, table) == run_plan(mixture, table)  # Theorem 1 does not depend on the rule


@pytest.mark.slow  # a three-node loopback ray.cluster_utils.Cluster (about 20 s)
@pytest.mark.ray
def test_three_node_cluster_gives_the_serial_results(tmp_path: Path, new_store: Callable[[str], str]) -> None:
    from ray.cluster_utils import Cluster

    spec = _spec(tmp_path)
    serial = run_experiment(load_spec(spec), RunOptions(serial=True, progress=False,
                                                        tracking_uri=new_store("s.db")))
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        summary = run_experiment(load_spec(spec, ["study.generation.params.batch=50"]),
                                 RunOptions(address=cluster.address, progress=False,
                                            tracking_uri=new_store("c.db")))
    finally:
        cluster.shutdown()
    assert summary["timing"]["ray_nodes"] == 3
    assert _rates(summary) == _rates(serial)
    assert [e["ledger"] for e in summary["configurations"]] == [e["ledger"] for e in serial["configurations"]]


# --- privlab pd-generate: the bundle ----------------------------------------------------------


def test_pd_generate_writes_the_runs_candidates_as_a_checked_bundle(tmp_path: Path, new_store: Callable[[str], str],
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import hashlib

    import pandas as pd

    from privlab.platform.cli.main import EXIT_INPUT, EXIT_OK, main

    spec = _spec(tmp_path, grid='omega = ["1-4"]')
    summary = run_experiment(load_spec(spec), RunOptions(serial=True, progress=False,
                                                         tracking_uri=new_store("g.db")))
    out = tmp_path / "bundle"
    assert main(["pd-generate", str(spec), "--out", str(out)]) == EXIT_OK
    assert "candidates passed" in capsys.readouterr().out
    facts = json.loads((out / "summary.json").read_text())
    (entry,) = summary["configurations"]
    assert facts["pass_rate"] == entry["metrics"]["passed_rate"]  # the run's own candidates, to the bit
    released = pd.read_csv(out / "released.csv")
    assert len(released) == facts["released"] == round(facts["pass_rate"] * 600)
    assert list(released.columns) == ["age", "education", "work", "income"]
    assert set(released["education"]) <= {"none", "primary", "secondary", "college", "graduate"}
    assert pd.read_parquet(out / "released.parquet").astype(str).equals(released.astype(str))
    for line in (out / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    assert json.loads((out / "ledger.json").read_text())["events"] == entry["ledger"]["events"]
    statement = (out / "privacy-statement.md").read_text()
    assert "Theorem 1" in statement and "600 candidates tested" in statement
    # an existing folder is refused before any work, and is left as it was
    before = sorted(p.name for p in out.iterdir())
    assert main(["pd-generate", str(spec), "--out", str(out), "--set", "study.generation.params.k=11"]) == EXIT_INPUT
    assert "already exists" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before


def test_pd_generate_bad_input_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from privlab.platform.cli.main import EXIT_INPUT, main

    spec = _spec(tmp_path)
    out = tmp_path / "never"
    assert main(["pd-generate", str(spec), "--out", str(out), "--set", "study.generation.grid.omega=[9]"]) == EXIT_INPUT
    assert "omega_max (9) must be <= m (4)" in capsys.readouterr().err
    assert not out.exists() and not any(p.name.startswith(".never") for p in tmp_path.iterdir())


# --- pd_evaluation: the Section 6 measures on the runner --------------------------------------


def test_evaluation_study_measures_and_charges_only_the_synthetics(
    tmp_path: Path, new_store: Callable[[str], str],
) -> None:
    """One repetition on the toy table: every metric present and in range, the ledger exactly the
    generation's plan (the baselines have ledgers of their own), the results page drawn."""
    _spec(tmp_path)
    spec = tmp_path / "evaluation.toml"
    spec.write_text(textwrap.dedent("""
        name = "pd-eval"
        seed = 3
        workload = "pd_evaluation"
        repetitions = 1
        [params]
        space = "space.toml"
        data = "toy.csv"
        k = 10
        gamma = 2.0
        epsilon0 = 1.0
        t = 1
        omega = "1-4"
        candidates = 400
        batch = 100
        target = "income"
        parts = ["tvd", "distinguishing", "model_accuracy", "dp_baselines"]
        evaluation_records = 300
        [budget]
        epsilon = 100000.0
        delta = 0.99
        accountant = "best"
        delta_slack = 9.313225746154785e-10
        [tracking]
        experiment = "pd-eval"
        """))
    summary = run_experiment(load_spec(spec), RunOptions(serial=True, progress=False, report_dir=tmp_path / "report",
                                                         tracking_uri=new_store("e.db")))
    (entry,) = summary["configurations"]
    m = entry["metrics"]
    for table in ("reals", "marginals", "synthetics"):
        assert 0.0 <= m[f"tvd_single_{table}_mean"] <= m[f"tvd_pairs_{table}_mean"] <= 1.0
    assert all(0.0 <= m[f"distinguish_{k}_{t}_mean"] <= 1.0 for k in ("rf", "tree") for t in ("marginals", "synthetics"))
    assert m["model_accuracy_random_education_mean"] == pytest.approx(1 / 5)
    assert 0.5 < m["accuracy_lr_nonprivate_mean"] <= 1.0 and 0.0 <= m["accuracy_svm_objective_mean"] <= 1.0
    assert m["released_mean"] == pytest.approx(400 * m["pass_rate_mean"])
    steps = {e["step"] for e in entry["ledger"]["events"]}
    assert steps == {"pd.structure", "pd.parameters", "pd.test"}  # no marginals or ERM events
    text = next((tmp_path / "report").rglob("README.md")).read_text()
    assert "Table 5" in text and "Figures 3–4" in text and "Table 4" in text


def test_examination_orders_that_would_not_fit_in_memory_are_refused(tmp_path: Path) -> None:
    """With max_check_plausible below |D_S| every candidate of a batch draws an examination order:
    batch × max_check_plausible words, refused past 2²⁶ before any work."""
    spec = _spec(tmp_path)
    # above |D_S| (≈ 1,440 records) no order is drawn, whatever the batch
    load_spec(spec, ["study.generation.params.max_check_plausible=600000", "study.generation.params.batch=100000"])
    with pytest.raises(SpecError, match=r"batch \(100000\) × max_check_plausible \(1000\).*lower batch to 67108"):
        load_spec(spec, ["study.generation.params.max_check_plausible=1000", "study.generation.params.batch=100000"])


def test_a_shared_model_seed_compares_tests_on_one_model(tmp_path: Path, new_store: Callable[[str], str]) -> None:
    """With model_seed, configurations differing only in the test (here ε₀) test the same
    candidates of the same model: k′ is identical; without it each draws its own model."""
    spec = _spec(tmp_path, grid="epsilon0 = [1.0, 2.0, 4.0]", params='omega = "1-4"\nmodel_seed = 99')
    text = spec.read_text().replace("epsilon0 = 1.0\n", "", 1)
    spec.write_text(text)
    shared = run_experiment(load_spec(spec), RunOptions(serial=True, progress=False,
                                                        tracking_uri=new_store("m.db")))
    found = {e["metrics"]["plausible_seeds_mean"] for e in shared["configurations"]}
    assert len(found) == 1
    spec.write_text(text.replace("model_seed = 99\n", ""))
    own = run_experiment(load_spec(spec), RunOptions(serial=True, progress=False,
                                                     tracking_uri=new_store("n.db")))
    assert len({e["metrics"]["plausible_seeds_mean"] for e in own["configurations"]}) == 3
