"""One flow of the births release scheme, and the ``release_flow`` grid workload through the runner.

A flow on the public NVSS 10K sample (research and release mode, with the paper's criteria from
experiments/births/flow.toml and with a small settings object built here) must spend exactly its
plan, return n valid records that satisfy the synthetic constraints and the face-privacy
projection, and replay bit-identically from a release transcript. Bad input must fail before any
budget is spent. Through ``privlab run``, serial and two Ray workers must agree, with one MLflow
run per attempt and one per configuration.
"""

from __future__ import annotations

import collections
import json
import math
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.mechanisms.acceptance.base import criterion_from_spec
from privlab.mechanisms.release.flow import (
    FlowConfiguration,
    FlowOutcome,
    FlowSettings,
    load_settings,
    planned_events,
    run_flow,
)
from privlab.mechanisms.tabular.face_privacy import smallest_count
from privlab.mechanisms.tabular.space import ReleaseSpace, load_release_space, release_space_from_spec
from privlab.platform.cli.main import main
from privlab.platform.core.errors import BudgetExceededError, ExecutionError, SpecError
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource, ReplaySource, SecureSource, SeededSource
from privlab.platform.dp.transcript import TranscriptReader, TranscriptWriter
from privlab.platform.execution.aggregation import wilson_interval
from privlab.platform.execution.local_cluster import local_cluster_status
from privlab.platform.results.compare import comparison_frame
from privlab.platform.results.reports import REPORT_PREFIX
from privlab.platform.tracking.run_tags import CONFIG_TAG, KIND_TAG
from privlab.platform.tracking.tracker import Tracker
from privlab.platform.tracking.unit_table import read_unit_table

ROOT = Path(__file__).resolve().parents[1]
BIRTHS = ROOT / "experiments" / "births"
NVSS = Path(__file__).resolve().parents[2] / "shared" / "data" / "nvss"
SAMPLE = NVSS / "birth_2019_nber_us_SINGLETON_SAMPLE10K.csv"
# Skipped with a reason when the sample is absent, an error under CI=true (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("nvss_10k")

CONTEXT = {"spec_sha256": "ab12", "data_sha256": "cd34"}
COARSE = "mother_age=coarse,parity=coarse,gestation_week=coarse"
CONFIGURATION = FlowConfiguration(transformation=COARSE, synthesizer="privbayes",
                                  synthesizer_params=(("epsilon_split", 0.25), ("degree", 2)), min_count=2)
N_CLEANED = 9898  # the 10K sample after the paper's raw-data constraints (Section 4.8.1)


@pytest.fixture(scope="module")
def births() -> ReleaseSpace:
    return load_release_space(BIRTHS / "space.toml")


@pytest.fixture(scope="module")
def cleaned(births: ReleaseSpace) -> pd.DataFrame:
    return births.clean_raw(pd.read_csv(SAMPLE), source=SAMPLE.name)


@pytest.fixture(scope="module")
def paper() -> FlowSettings:
    return load_settings(BIRTHS / "flow.toml")


def small_settings() -> FlowSettings:
    """Two criteria with their own ε (not the paper's): all 1- and 2-way marginals and the
    mean birth weight by gestation week."""
    return FlowSettings(epsilon_generation=1.5, criteria=(
        criterion_from_spec({"kind": "marginals_absolute", "name": "two_way", "threshold": 0.05, "epsilon": 0.25,
                             "k_max": 2}, where="test"),
        criterion_from_spec({"kind": "conditional_mean", "name": "weight_by_week", "threshold": 150.0,
                             "epsilon": 0.125, "target": "birth_weight", "target_bounds": [1400, 4600],
                             "by": ["gestation_week"], "resize_margin": 0.01}, where="test"),
    ))


def accounting(events: tuple[PrivacyEvent, ...] | list[PrivacyEvent]) -> list[tuple[object, ...]]:
    return [(e.name, e.mechanism, e.epsilon, e.scope, e.step) for e in events]


def flow(data: pd.DataFrame, space: ReleaseSpace, settings: FlowSettings, source: RandomSource, ledger: Ledger,
         configuration: FlowConfiguration = CONFIGURATION) -> FlowOutcome:
    return run_flow(data, space=space, configuration=configuration, settings=settings, source=source, ledger=ledger)


def seeded(seed: int) -> SeededSource:
    return SeededSource(np.random.default_rng(seed))


# --- one flow, research mode --------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["small", "paper"])
def test_a_research_flow_spends_its_plan_and_returns_a_valid_projected_candidate(
    which: str, births: ReleaseSpace, cleaned: pd.DataFrame, paper: FlowSettings
) -> None:
    settings = small_settings() if which == "small" else paper
    ledger = Ledger(epsilon_cap=None)
    outcome = flow(cleaned, births, settings, seeded(11), ledger)

    # Exact accounting: the steps taken are the plan, and ε₁ = ε_generation + Σ ε_criterion.
    n = len(cleaned)
    assert n == N_CLEANED
    plan = planned_events(CONFIGURATION, settings, space=births, n=n)
    assert accounting(ledger.events) == accounting(plan)
    expected = math.fsum([settings.epsilon_generation, *(c.epsilon for c in settings.criteria)])
    assert ledger.total().epsilon == expected == settings.epsilon_flow
    assert ledger.total().delta == 0.0
    if which == "paper":
        assert ledger.total().epsilon == 4.99  # Table 2: ε_generation = 4, ε_acceptance = 0.99

    # The candidate: exactly n codes of the domain, none breaking a synthetic constraint, no record
    # rarer than min_count.
    candidate = outcome.candidate
    domain = outcome.transformation.domain
    assert len(candidate) == n and tuple(candidate.columns) == domain.names
    assert domain.validate(candidate, what="candidate").equals(candidate.astype(np.int64))
    constraints = births.synthetic_filter(outcome.transformation)
    assert constraints.valid_mask(candidate).all()
    # ...and the filter is not vacuous on this domain: mother <18 with parity "10<" breaks rule 5.
    broken = candidate.iloc[:1].copy()
    broken["mother_age"], broken["parity"] = 0, domain["parity"].size - 1
    assert not constraints.valid_mask(broken).any()
    assert CONFIGURATION.min_count is not None and smallest_count(candidate) >= CONFIGURATION.min_count

    # Results: one per criterion, in order, with the exact value attached in research mode.
    assert [r.name for r in outcome.results] == [c.name for c in settings.criteria]
    for result in outcome.results:
        assert result.true_value is not None and math.isfinite(result.true_value), result
        assert math.isfinite(result.dp_value) and result.passed == (result.dp_value < result.threshold)
        assert result.mechanism != "" and result.noise_scale > 0
    assert outcome.accepted == all(r.passed for r in outcome.results)
    assert {"transform", "fit", "sample", "project"} <= set(outcome.seconds)


def test_a_flow_is_a_function_of_its_seed(births: ReleaseSpace, cleaned: pd.DataFrame) -> None:
    settings = small_settings()
    first = flow(cleaned, births, settings, seeded(5), Ledger(epsilon_cap=None))
    again = flow(cleaned, births, settings, seeded(5), Ledger(epsilon_cap=None))
    other = flow(cleaned, births, settings, seeded(6), Ledger(epsilon_cap=None))
    assert again.candidate.equals(first.candidate) and again.results == first.results
    assert not other.candidate.equals(first.candidate)
    assert [r.dp_value for r in other.results] != [r.dp_value for r in first.results]


def test_min_count_none_skips_the_projection(births: ReleaseSpace, cleaned: pd.DataFrame) -> None:
    settings = small_settings()
    plain = flow(cleaned, births, settings, seeded(3), Ledger(epsilon_cap=None),
                 FlowConfiguration(transformation=COARSE, synthesizer="privbayes",
                                   synthesizer_params=CONFIGURATION.synthesizer_params, min_count=None))
    projected = flow(cleaned, births, settings, seeded(3), Ledger(epsilon_cap=None))
    # Without the projection the sample keeps its unique records; with it none is left.
    assert len(plain.candidate) == len(projected.candidate) == N_CLEANED
    assert smallest_count(plain.candidate) == 1 and smallest_count(projected.candidate) >= 2
    # Same seed, same sample before the projection: the projection keeps every row whose record
    # already occurs twice and only writes records that occur in its input (Section 4.6).
    counts = plain.candidate.value_counts()
    frequent = plain.candidate.apply(tuple, axis=1).map(counts).to_numpy() >= 2
    assert 0 < frequent.sum() < N_CLEANED
    assert projected.candidate[frequent].equals(plain.candidate[frequent])
    sampled = set(plain.candidate.itertuples(index=False, name=None))
    assert set(projected.candidate.itertuples(index=False, name=None)) <= sampled


# --- release mode ---------------------------------------------------------------------------------------------


def test_release_mode_hides_exact_values_and_replays_bit_identically(
    births: ReleaseSpace, cleaned: pd.DataFrame, paper: FlowSettings, tmp_path: Path
) -> None:
    path = tmp_path / "release.transcript"
    recorded_ledger = Ledger(epsilon_cap=paper.epsilon_flow)
    with TranscriptWriter(path, context=CONTEXT) as writer:
        recorded = flow(cleaned, births, paper, SecureSource(writer), recorded_ledger)
    assert all(r.true_value is None for r in recorded.results)
    # Release noise is the exact lattice Laplace (Mironov 2012); the accounting is the plan's.
    assert all("lattice" in e.mechanism for e in recorded_ledger.events if e.step == "acceptance")
    plan = planned_events(CONFIGURATION, paper, space=births, n=len(cleaned))
    assert ([(e.name, e.epsilon, e.scope, e.step) for e in recorded_ledger.events]
            == [(e.name, e.epsilon, e.scope, e.step) for e in plan])
    assert recorded_ledger.total().epsilon == 4.99

    replay = ReplaySource(TranscriptReader(path, expected_context=CONTEXT))
    replayed_ledger = Ledger(epsilon_cap=paper.epsilon_flow)
    replayed = flow(cleaned, births, paper, replay, replayed_ledger)
    replay.finish()  # every recorded draw was consumed, in order
    assert replayed.candidate.equals(recorded.candidate)
    assert replayed.candidate.to_numpy().tobytes() == recorded.candidate.to_numpy().tobytes()
    dp = np.array([r.dp_value for r in recorded.results])
    assert np.array([r.dp_value for r in replayed.results]).tobytes() == dp.tobytes()
    assert replayed.results == recorded.results  # thresholds, noise scales and public details too
    assert replayed_ledger.events == recorded_ledger.events


# --- bad input fails before any budget is spent ---------------------------------------------------------------


def _bad_criterion(table: dict[str, object]) -> FlowSettings:
    """The paper's criteria with a bad one last, where it would surface after everything else spent."""
    paper = load_settings(BIRTHS / "flow.toml")
    return FlowSettings(epsilon_generation=paper.epsilon_generation,
                        criteria=(*paper.criteria, criterion_from_spec(table, where="test")))


def _configuration(**changes: object) -> FlowConfiguration:
    fields = {"transformation": COARSE, "synthesizer": "privbayes",
              "synthesizer_params": CONFIGURATION.synthesizer_params, "min_count": 2} | changes
    return FlowConfiguration(**fields)  # type: ignore[arg-type]


BAD_INPUT = {
    "unknown column": (_configuration(transformation=f"{COARSE},shoe_size=large"), None,
                       r"unknown column\(s\) shoe_size"),
    "unknown alternative": (_configuration(transformation="mother_age=huge,parity=coarse,gestation_week=coarse"),
                            None, r"column 'mother_age' has no alternative 'huge'"),
    "partial id": (_configuration(transformation="mother_age=coarse,parity=coarse"), None,
                   r"choose gestation_week= one of coarse, fine"),
    "unknown synthesizer": (_configuration(synthesizer="privbayez"), None,
                            r"synthesizer \('privbayez'\) must be one of"),
    "unknown hyperparameter": (_configuration(synthesizer_params=(("epsilon_split", 0.25), ("thetta", 4.0))), None,
                               r"unknown key\(s\) 'thetta'"),
    "marginals column": (_configuration(), {"kind": "marginals_absolute", "name": "bad", "threshold": 0.1,
                                            "epsilon": 0.1, "columns": ["parity", "shoe_size"]},
                         r"criterion 'bad': columns names column 'shoe_size'"),
    "relative marginals column": (_configuration(), {"kind": "marginals_relative", "name": "bad", "threshold": 1.5,
                                                     "epsilon": 0.1, "ratio_clip": 2.0, "columns": ["shoe_size"]},
                                  r"criterion 'bad': columns names column 'shoe_size'"),
    "group-by column": (_configuration(), {"kind": "conditional_mean", "name": "bad", "threshold": 1.0,
                                           "epsilon": 0.1, "target": "parity", "target_bounds": [1, 11],
                                           "by": ["shoe_size"], "resize_margin": 0.01},
                        r"criterion 'bad': by names column 'shoe_size'"),
    "regression covariate": (_configuration(), {"kind": "regression_coefficients", "name": "bad", "threshold": 30.0,
                                                "epsilon": 0.1, "response": "birth_weight",
                                                "covariates": ["parity", "shoe_size"],
                                                "response_bounds": [1400, 4600]},
                             r"criterion 'bad': covariates names column 'shoe_size'"),
    "faithfulness column": (_configuration(), {"kind": "faithfulness", "name": "bad", "threshold": 0.05,
                                               "epsilon": 0.1, "exact": ["birth_month", "parity", "shoe_size"],
                                               "within_one_bin": ["mother_age", "gestation_week", "birth_weight"],
                                               "ignore": ["birth_sex"]},
                            r"criterion 'bad': column\(s\) 'shoe_size' are not in the domain"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_fails_before_any_budget_is_spent(
    case: str, births: ReleaseSpace, cleaned: pd.DataFrame, paper: FlowSettings
) -> None:
    configuration, criterion, message = BAD_INPUT[case]
    settings = paper if criterion is None else _bad_criterion(criterion)
    ledger = Ledger(epsilon_cap=None)
    with pytest.raises(SpecError, match=message):
        flow(cleaned, births, settings, seeded(0), ledger, configuration)
    assert ledger.events == ()
    # The plan (what spec validation and the runner check before any work) refuses it too.
    with pytest.raises(SpecError, match=message):
        planned_events(configuration, settings, space=births, n=len(cleaned))


def test_a_budget_cap_below_the_flow_fails_before_spending(
    births: ReleaseSpace, cleaned: pd.DataFrame, paper: FlowSettings
) -> None:
    # The fit (ε = 4) would fit under the cap; the whole flow (ε₁ = 4.99) does not.
    ledger = Ledger(epsilon_cap=4.5)
    with pytest.raises(BudgetExceededError):
        flow(cleaned, births, paper, seeded(0), ledger)
    assert ledger.events == ()

    # On a ledger that already holds one flow the check counts what is there: the second flow is
    # refused before its fit, not part-way through its criteria.
    ledger = Ledger(epsilon_cap=9.5)
    flow(cleaned, births, paper, seeded(1), ledger)
    first = ledger.events
    assert ledger.total().epsilon == 4.99
    with pytest.raises(BudgetExceededError):
        flow(cleaned, births, paper, seeded(2), ledger)
    assert ledger.events == first

    # A cap of exactly ε₁ is enough.
    exact = Ledger(epsilon_cap=paper.epsilon_flow)
    flow(cleaned, births, paper, seeded(3), exact)
    assert exact.total().epsilon == paper.epsilon_flow


def test_the_rejection_sampling_limit_raises_an_execution_error(births: ReleaseSpace, cleaned: pd.DataFrame) -> None:
    # A synthetic constraint no record can satisfy (decoded birth weights are >= 1400 g).
    document = tomllib.loads((BIRTHS / "space.toml").read_text())
    document["synthetic_constraints"] = {"rules": ["birth_weight > 0"]}
    impossible = release_space_from_spec(document, where="impossible")
    base = small_settings()
    settings = FlowSettings(epsilon_generation=base.epsilon_generation, criteria=base.criteria, max_rounds=1)
    ledger = Ledger(epsilon_cap=None)
    with pytest.raises(ExecutionError):
        flow(cleaned, impossible, settings, seeded(0), ledger)
    # Sampling comes after the DP fit: the generation budget is spent, no criterion ran.
    assert ledger.total().epsilon == settings.epsilon_generation
    assert all(e.step != "acceptance" for e in ledger.events)


# --- the release_flow workload through `privlab run` -----------------------------------------------------------


def grid_args(data: Path) -> list[str]:
    """experiments/births/grid.toml cut to 2 + 1 configurations with 2 attempts each, on ``data``."""
    sets = ["study.privbayes_theta.grid_points=2", "study.privbayes_degree.grid_points=1",
            "study.privbayes_theta.repetitions=2", "study.privbayes_degree.repetitions=2",
            f"study.privbayes_theta.params.data={data}", f"study.privbayes_degree.params.data={data}"]
    return ["run", str(BIRTHS / "grid.toml"), *(a for s in sets for a in ("--set", s)), "--no-progress"]


@pytest.fixture(scope="module")
def serial_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict]:
    folder = tmp_path_factory.mktemp("grid")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)  # MLflow writes artifacts under the working directory
        assert main([*grid_args(SAMPLE), "--serial", "--tracking-uri", uri,
                     "--summary-json", str(folder / "serial.json")]) == 0
    return folder, uri, json.loads((folder / "serial.json").read_text())


def test_the_grid_logs_one_run_per_configuration_with_a_row_per_attempt(
    serial_run: tuple[Path, str, dict], paper: FlowSettings
) -> None:
    _, uri, summary = serial_run
    entries = summary["configurations"]
    assert [e["study"] for e in entries] == ["privbayes_theta", "privbayes_theta", "privbayes_degree"]
    assert summary["epsilon_total"] == 4.99
    for entry in entries:
        assert entry["units"] == 2 and entry["params"]["params.data"] == str(SAMPLE)
        metrics = entry["metrics"]
        assert metrics["accepted_trials"] == 2.0 and metrics["eps_total"] == 4.99
        low, high = wilson_interval(metrics["accepted_successes"], 2)
        assert (metrics["accepted_ci_low"], metrics["accepted_ci_high"]) == (low, high)
        assert low <= metrics["accepted_rate"] <= high
        for criterion in paper.criteria:
            assert 0.0 <= metrics[f"{criterion.name}_passed_rate"] <= 1.0
            assert f"{criterion.name}_passed_ci_low" in metrics
        assert not any(k.startswith("timing_") for k in metrics)  # timings are not results

    tracker = Tracker(uri)
    parent = tracker.get_run(summary["run_id"])
    children = tracker.child_runs(parent.info.experiment_id, summary["run_id"])
    assert collections.Counter(c.data.tags[KIND_TAG] for c in children) == {"configuration": 3}  # no run per attempt
    for entry in entries:
        (run,) = [c for c in children if c.data.tags[CONFIG_TAG] == entry["id"]]
        units = read_unit_table(tracker, run.info.run_id)
        assert units is not None and units["unit"].tolist() == [0, 1]
        assert tracker.list_artifacts(run.info.run_id) == ["ledger.txt"]  # the table is a row of the parent's parts
        # MLflow shows the headline metrics (Workload.run_metrics); every statistic is in the entry
        assert set(run.data.metrics) == {"accepted_rate", "eps_configuration", "epsilon_flow_mean", "epsilon_generation",
                                         "epsilon_acceptance", *(f"{c.name}_passed_rate" for c in paper.criteria)}
        assert {f"{c.name}_{kind}_mean" for c in paper.criteria for kind in ("dp", "exact", "sensitivity")} <= \
            set(entry["metrics"])
        # The configuration's rates are the means over its attempts' rows.
        assert entry["metrics"]["accepted_rate"] == units["accepted"].sum() / 2
        for criterion in paper.criteria:
            assert entry["metrics"][f"{criterion.name}_passed_rate"] == units[f"{criterion.name}_passed"].sum() / 2
            assert units[f"{criterion.name}_exact"].map(math.isfinite).all()  # research mode
            assert (units[f"timing_{criterion.name}_seconds"] > 0).all()
        assert (units["epsilon_flow"] == 4.99).all()
        assert units["seed_key"].str.endswith(("/0", "/1")).all()


def _report_files(tracker: Tracker, run_id: str) -> dict[str, bytes | None]:
    """The study reports a run logged (markdown text with its run id masked, figures as bytes)."""
    files: dict[str, bytes | None] = {}
    folders = [REPORT_PREFIX]
    while folders:
        folder = folders.pop()
        for path in tracker.list_artifacts(run_id, folder):
            content = tracker.read_bytes(run_id, path)
            if content is None:
                folders.append(path)
            else:  # the header's run id, command line and wall time describe the run, not its results
                lines = content.replace(run_id.encode(), b"RUN").splitlines(keepends=True)
                files[path] = b"".join(line for line in lines if not line.startswith((b"Command: ", b"Wall time")))
    return files


def _without_run_ids(frame: pd.DataFrame) -> pd.DataFrame:
    """A comparison without what differs run to run: run ids and timings."""
    kept = [c for c in frame.columns if c not in ("parent_run_id", "run_id") and not c.startswith("timing_")]
    return frame[kept]


@pytest.mark.slow  # starts Ray with two workers and logs a run per attempt (about 16 s)
@pytest.mark.ray
def test_two_ray_workers_with_a_run_per_attempt_give_the_serial_answers(
    serial_run: tuple[Path, str, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    """The option of one MLflow run per attempt (as before issue 16) changes no answer: the
    summary, compare, shortlist and the reports are those of the serial run with per-attempt
    tables, and each attempt's run holds the values of its row in the table."""
    folder, uri, serial = serial_run
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        assert main([*grid_args(SAMPLE), "--workers", "2", "--tracking-uri", uri, "--set", "tracking.unit_runs=true",
                     "--summary-json", str(folder / "ray.json")]) == 0
    ray = json.loads((folder / "ray.json").read_text())
    assert ray["timing"]["backend"] == "ray" and ray["timing"]["workers"] == 2
    assert ray["run_id"] != serial["run_id"]
    # "tracking": where this run's results went (its own artifact folder); "spec_sha256": the
    # spec with the unit_runs option set is another document.
    per_run = ("timing", "run_id", "tracking", "spec_sha256")
    assert {k: v for k, v in ray.items() if k not in per_run} == \
        {k: v for k, v in serial.items() if k not in per_run}
    tracker = Tracker(uri)
    experiment_id = tracker.get_run(ray["run_id"]).info.experiment_id
    children = tracker.child_runs(experiment_id, ray["run_id"])
    assert collections.Counter(c.data.tags[KIND_TAG] for c in children) == {"unit": 6, "configuration": 3}
    serial_children = tracker.configuration_runs(experiment_id, serial["run_id"])
    for entry in serial["configurations"]:
        (configuration,) = [c for c in serial_children if c.data.tags[CONFIG_TAG] == entry["id"]]
        table = read_unit_table(tracker, configuration.info.run_id)
        runs = sorted((c for c in children if c.data.tags[KIND_TAG] == "unit" and c.data.tags[CONFIG_TAG] == entry["id"]),
                      key=lambda c: int(c.data.tags["privlab.unit"]))
        assert [int(c.data.tags["privlab.unit"]) for c in runs] == table["unit"].tolist()
        for run, row in zip(runs, table.to_dict("records"), strict=True):
            results = {k: v for k, v in run.data.metrics.items() if not k.startswith("timing_")}
            assert results == {k: row[k] for k in results}  # same values, bit for bit

    frames = [comparison_frame(tracker, "births-grid", run_id=run_id) for run_id in (serial["run_id"], ray["run_id"])]
    pd.testing.assert_frame_equal(*map(_without_run_ids, frames))
    shortlists = []
    for run_id in (serial["run_id"], ray["run_id"]):
        out = folder / f"shortlist-{run_id}.toml"
        assert main(["shortlist", run_id, "--min-prob", "0", "--out", str(out), "--tracking-uri", uri]) == 0
        shortlists.append(out.read_text().replace(run_id, "RUN"))
    assert shortlists[0] == shortlists[1]
    reports = [_report_files(tracker, run_id) for run_id in (serial["run_id"], ray["run_id"])]
    assert reports[0] and reports[0] == reports[1]
    capsys.readouterr()


def _listening_addresses(port: int) -> list[str]:
    """The local addresses of every listening TCP socket on ``port``."""
    out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    return [fields[3].rsplit(":", 1)[0] for fields in map(str.split, out.splitlines())
            if fields[3].rsplit(":", 1)[1] == str(port)]


@pytest.mark.slow  # PostgreSQL, an MLflow server and a three-node Ray cluster (about 60 s)
@pytest.mark.ray
def test_the_grid_on_a_three_node_cluster_with_a_postgres_tracking_server_gives_the_serial_answers(
    serial_run: tuple[Path, str, dict], postgres_tracking_server, tmp_path: Path,  # conftest.TrackingServer
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 16's multi-node run, as cluster/README.md tells a user to do it: ``privlab cluster up
    --nodes 3``, then ``privlab run --address … --tracking-uri http://…`` to the MLflow server whose
    backend store is PostgreSQL (cluster/mlflow-postgres-setup.sh, cluster/mlflow-server.sh), then
    compare, shortlist and report from that server. Every answer is the serial run's on an
    embedded store; the runs are rows in PostgreSQL; the per-attempt tables reached the server's
    artifact store through its proxy and nothing was written where the driver ran; the database
    and the server listen on 127.0.0.1 only."""
    if shutil.which("ss") is None:
        pytest.skip("needs `ss` (iproute2) to check listening sockets")
    _, _, serial = serial_run
    server = postgres_tracking_server
    for port in (server.database_port, server.server_port):
        assert _listening_addresses(port) == ["127.0.0.1"], f"port {port} listens beyond 127.0.0.1"

    cli = [sys.executable, "-m", "privlab.platform.cli"]
    state = tmp_path / "cluster"
    driver_folder = tmp_path / "driver"
    driver_folder.mkdir()
    up = subprocess.run([*cli, "cluster", "up", "--nodes", "3", "--state-dir", str(state)],
                        capture_output=True, text=True, timeout=180)
    try:
        assert up.returncode == 0, up.stdout + up.stderr[-3000:]
        info = local_cluster_status(state_dir=state)
        assert info is not None and info.nodes == 3 and info.address.startswith("127.0.0.1:")
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_TOKEN", "RAY_ADDRESS")}
        env.update(info.env)  # what `privlab cluster up` printed as export lines
        summary_path = tmp_path / "cluster.json"
        done = subprocess.run([*cli, *grid_args(SAMPLE), "--address", info.address, "--tracking-uri", server.uri,
                               "--summary-json", str(summary_path)],
                              env=env, cwd=driver_folder, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    finally:
        subprocess.run([*cli, "cluster", "down", "--state-dir", str(state)], capture_output=True, timeout=120)
    assert "View run" not in done.stdout  # MLflow's per-run URL lines are noise; the summary says where
    assert list(driver_folder.iterdir()) == []  # no local store, no local artifacts

    cluster = json.loads(summary_path.read_text())
    assert cluster["timing"]["backend"] == "ray" and cluster["timing"]["ray_nodes"] == 3
    assert cluster["tracking"]["uri"] == server.uri
    per_run = ("timing", "run_id", "tracking")
    assert {k: v for k, v in cluster.items() if k not in per_run} == \
        {k: v for k, v in serial.items() if k not in per_run}

    # The runs are rows in PostgreSQL: the parent and one finished run per configuration.
    psycopg2 = pytest.importorskip("psycopg2")
    with psycopg2.connect(server.database_dsn) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT r.run_uuid, r.status, t.value FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                       "WHERE t.key = %s", (KIND_TAG,))
        kinds = {run_id: (status, kind) for run_id, status, kind in cursor.fetchall()}
    assert collections.Counter(kinds.values()) == {("FINISHED", "configuration"): 3, ("FINISHED", "parent"): 1}
    assert kinds[cluster["run_id"]][1] == "parent"

    remote, local = Tracker(server.uri), Tracker(serial_run[1])
    experiment_id = remote.get_run(cluster["run_id"]).info.experiment_id
    local_experiment = local.get_run(serial["run_id"]).info.experiment_id
    local_runs = {r.data.tags[CONFIG_TAG]: r for r in local.configuration_runs(local_experiment, serial["run_id"])}
    for run in remote.configuration_runs(experiment_id, cluster["run_id"]):
        assert run.info.run_id in kinds
        assert not (server.artifacts / experiment_id / run.info.run_id / "artifacts" / "units.parquet").exists()
        tables = [read_unit_table(t, r) for t, r in ((remote, run.info.run_id),
                                                     (local, local_runs[run.data.tags[CONFIG_TAG]].info.run_id))]
        results = [t[[c for c in t.columns if not c.startswith("timing_")]] for t in tables]
        pd.testing.assert_frame_equal(*results)

    frames = [comparison_frame(local, "births-grid", run_id=serial["run_id"]),
              comparison_frame(remote, "births-grid", run_id=cluster["run_id"])]
    pd.testing.assert_frame_equal(*map(_without_run_ids, frames))
    shortlists = []
    for uri, run_id in ((serial_run[1], serial["run_id"]), (server.uri, cluster["run_id"])):
        out = tmp_path / f"shortlist-{run_id}.toml"
        assert main(["shortlist", run_id, "--min-prob", "0", "--out", str(out), "--tracking-uri", uri]) == 0
        shortlists.append(out.read_text().replace(run_id, "RUN"))
    assert shortlists[0] == shortlists[1]
    reports = [_report_files(local, serial["run_id"]), _report_files(remote, cluster["run_id"])]
    assert reports[0] and reports[0] == reports[1]
    capsys.readouterr()


def test_a_missing_data_file_fails_before_any_mlflow_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "mlflow.db"
    missing = tmp_path / "no_such_births.csv"
    assert main([*grid_args(missing), "--serial", "--tracking-uri", f"sqlite:///{db}"]) == 2
    assert f"data ('{missing}') does not exist" in capsys.readouterr().err
    assert not db.exists() and not (tmp_path / "mlruns").exists(), "nothing may be logged before the data loads"


def test_worst_case_and_actual_sensitivities_are_both_shown_and_labelled(births: ReleaseSpace) -> None:
    """Issue 13 item 12: the research ledger's plan states the worst-case Δ of candidate-dependent
    criteria and says so; each attempt logs the Δ it actually used as a metric."""
    from privlab.mechanisms.release.workloads import ReleaseFlow, ReleaseFlowParams

    params = ReleaseFlowParams(space=str(BIRTHS / "space.toml"), settings=str(BIRTHS / "flow.toml"), data=str(SAMPLE),
                               transformation="mother_age=coarse,parity=coarse,gestation_week=coarse",
                               synthesizer="privbayes", epsilon_split=0.25, degree=2)
    workload = ReleaseFlow()
    plan = Ledger(epsilon_cap=None)
    for event in workload.plan(params):
        plan.spend(event)
    table = plan.render_table()
    labelled = [line for line in table.splitlines() if "sensitivity: worst case over candidates" in line]
    # The three conditional means and the relative marginals depend on the candidate; the rest do not.
    assert len(labelled) == 4 and any("birth_weight_mean_sensitivity" in line for line in labelled)
    planned = {e.name.removeprefix("acceptance:"): e.sensitivity for e in workload.plan(params)}
    result = workload.run_trial(params, data=workload.load_data(params), source=SeededSource(np.random.default_rng(3)),
                                ledger=Ledger(epsilon_cap=None))
    assert {"birth_weight_mean_sensitivity", "faithfulness_sensitivity"} <= set(result)
    assert "birth_weight_mean_sensitivity" in workload.metric_kinds(params)
    assert 0 < result["birth_weight_mean_sensitivity"] <= planned["birth_weight_mean"]
    assert result["faithfulness_sensitivity"] == planned["faithfulness"]
