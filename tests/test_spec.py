"""Tests of privlab.platform.experiment.spec: loading, validation, --set overrides, grids and budgets.

Every spec is written to ``tmp_path`` as TOML and read back through :func:`load_spec`, the
same path the CLI takes. Error tests check that the message names the offending key and the
values that would have been accepted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
import re
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from privlab.platform.core.errors import BudgetExceededError, SpecError
from privlab.platform.dp.seeding import canonical_params, stable_key
from privlab.platform.experiment import registry
from privlab.platform.experiment.datasets import FileDataset, GeneratedDataset
from privlab.platform.experiment.registry import Pattern
from privlab.platform.experiment.spec import load_spec, parse_spec
from privlab.platform.experiment.spec_overrides import apply_override

QUICKSTART = Path(__file__).resolve().parents[1] / "experiments" / "quickstart.toml"

SINGLE = """
name = "single"
seed = 7
workload = "laplace_mean"
repetitions = 20
[params]
lower = 0.0
upper = 1.0
[grid]
epsilon = [0.1, 0.5, 1.0]
n = [100, 1000]
"""

MULTI = """
name = "multi"
seed = 11
[[study]]
name = "grid_study"
workload = "laplace_mean"
repetitions = 4
[study.grid]
epsilon = [0.5, 1.0]
n = [100]
[[study]]
name = "trials_study"
workload = "laplace_privacy_loss"
trials = 1000
[study.grid]
epsilon = [0.5, 1.0, 2.0]
"""


def write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# --- the quickstart --------------------------------------------------------------------------


def test_quickstart_has_sixteen_configurations_with_ids_and_units() -> None:
    spec = load_spec(QUICKSTART)
    assert spec.name == "quickstart"
    assert spec.seed == 20261122
    assert spec.budget is not None and spec.budget.epsilon == 2.0
    assert spec.tracking.experiment == "quickstart"
    assert [s.name for s in spec.studies] == [
        "laplace_mean", "exponential_median", "laplace_privacy_loss", "plausible_deniability", "pmse_sensitivity",
    ]
    assert [s.pattern for s in spec.studies] == [
        Pattern.GRID, Pattern.GRID, Pattern.TRIALS, Pattern.ACTOR_POOL, Pattern.TRIALS,
    ]
    assert len(spec.configurations) == 16
    assert [c.id for c in spec.configurations] == (
        [f"laplace_mean-{i:03d}" for i in range(6)]
        + [f"exponential_median-{i:03d}" for i in range(4)]
        + [f"laplace_privacy_loss-{i:03d}" for i in range(3)]
        + [f"plausible_deniability-{i:03d}" for i in range(2)]
        + ["pmse_sensitivity-000"]
    )
    # repetitions (grid), trials (trials), ceil(candidates / batch) = 20000/5000 items (actor pool)
    assert [c.units for c in spec.configurations] == [300] * 10 + [40_000] * 3 + [4] * 2 + [4_000]
    # Grid order is the Cartesian product in declaration order (epsilon outer, n inner).
    assert [c.grid_point for c in spec.configurations[:6]] == [
        {"epsilon": e, "n": n} for e in (0.1, 0.5, 1.0) for n in (100, 1000)
    ]


def test_quickstart_configuration_contents() -> None:
    spec = load_spec(QUICKSTART)
    first = spec.configurations[0]
    # All workload parameters, fixed + grid point + dataclass defaults.
    assert dict(first.params) == {
        "epsilon": 0.1, "n": 100, "lower": 0.0, "upper": 1.0, "beta_a": 2.0, "beta_b": 5.0,
    }
    assert first.flat_params()["params.epsilon"] == 0.1
    assert first.label() == "laplace_mean[epsilon=0.1, n=100]"
    assert spec.configurations[10].params["epsilon"] == 0.5
    assert spec.configurations[13].params["omega"] == 9 and spec.configurations[14].params["omega"] == "5-11"
    for study in spec.studies:
        configs = [c for c in spec.configurations if c.study == study.name]
        assert study.key == stable_key("study", study.name)
        assert {c.study_key for c in configs} == {study.key}
    assert len({c.config_key for c in spec.configurations}) == 16
    assert spec.study("laplace_privacy_loss").metrics[:3] == ("in_event_d", "in_event_d_prime", "privacy_loss")
    with pytest.raises(StopIteration):
        spec.study("nope")


def test_loading_is_deterministic_and_sha256_hashes_the_resolved_document() -> None:
    a, b = load_spec(QUICKSTART), load_spec(QUICKSTART)
    assert a.sha256 == b.sha256
    assert [c.config_key for c in a.configurations] == [c.config_key for c in b.configurations]
    assert a.sha256 == hashlib.sha256(canonical_params(a.document).encode()).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", a.sha256)


def test_sha256_changes_with_set_and_only_with_content() -> None:
    base = load_spec(QUICKSTART)
    changed = load_spec(QUICKSTART, ["study.laplace_privacy_loss.trials=1000"])
    assert changed.sha256 != base.sha256
    # Setting a value the file already has leaves the document, hence the hash, unchanged.
    same = load_spec(QUICKSTART, ["study.laplace_privacy_loss.trials=40000"])
    assert same.sha256 == base.sha256
    assert load_spec(QUICKSTART, ["seed=1"]).sha256 not in (base.sha256, changed.sha256)


def test_quickstart_budget_lowered_below_a_planned_epsilon_fails_at_load(tmp_path: Path) -> None:
    with pytest.raises(
        BudgetExceededError,
        match=re.escape("study 'laplace_privacy_loss' configuration {'epsilon': 2.0}:") + ".*over the cap of 1.5",
    ):
        load_spec(QUICKSTART, ["budget.epsilon=1.5"])


# --- a valid single-study spec ---------------------------------------------------------------


def test_single_study_form(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SINGLE))
    assert [s.name for s in spec.studies] == ["single"]
    assert spec.budget is None
    assert spec.tracking.experiment == "single"  # defaults to the spec name
    assert spec.execution.batch_size is None  # "auto"
    assert len(spec.configurations) == 6
    assert [c.id for c in spec.configurations] == [f"single-{i:03d}" for i in range(6)]
    assert {c.units for c in spec.configurations} == {20}
    assert spec.configurations[-1].grid_point == {"epsilon": 1.0, "n": 1000}
    assert spec.new_ledger().epsilon_cap is None
    assert spec.source == tmp_path / "spec.toml"


def test_grid_pattern_defaults_to_one_repetition_and_no_grid_gives_one_configuration(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, """
        name = "one"
        workload = "laplace_mean"
        [params]
        epsilon = 1.0
        n = 10
    """))
    assert len(spec.configurations) == 1
    (config,) = spec.configurations
    assert config.units == 1 and config.grid_point == {} and config.label() == "one"
    assert spec.seed is None


def test_actor_pool_units_follow_the_item_count(tmp_path: Path) -> None:
    spec = load_spec(QUICKSTART, ["study.plausible_deniability.params.candidates=20001"])
    assert [c.units for c in spec.configurations if c.study == "plausible_deniability"] == [5, 5]


def test_metrics_subset_is_kept_in_order(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SINGLE))  # no `metrics`: every metric, derived ones last
    assert spec.studies[0].metrics == ("abs_error", "error_over_scale", "within_scale", "theoretical_abs_error")
    spec = load_spec(write(tmp_path, 'metrics = ["within_scale", "abs_error"]\n' + SINGLE))
    assert spec.studies[0].metrics == ("within_scale", "abs_error")


def test_budget_execution_and_tracking_tables_are_parsed(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SINGLE + """
        [budget]
        epsilon = 10.0
        delta = 1e-6
        accountant = "advanced"
        delta_slack = 1e-7
        [execution]
        batch_size = 50
        max_retries = 0
        [tracking]
        experiment = "elsewhere"
        plots = false
    """))
    assert spec.budget is not None
    assert (spec.budget.epsilon, spec.budget.delta, spec.budget.accountant, spec.budget.delta_slack) == (
        10.0, 1e-6, "advanced", 1e-7,
    )
    ledger = spec.new_ledger()
    assert (ledger.epsilon_cap, ledger.delta_cap, ledger.accountant) == (10.0, 1e-6, "advanced")
    assert spec.execution.batch_size == 50 and spec.execution.max_retries == 0
    assert spec.tracking.experiment == "elsewhere" and spec.tracking.plots is False


def test_parse_spec_does_not_mutate_its_input() -> None:
    document = {"name": "x", "workload": "laplace_mean", "params": {"epsilon": 1.0, "n": 10}}
    before = repr(document)
    spec = parse_spec(document, source=Path("x.toml"))
    assert repr(document) == before
    assert spec.document == document and spec.document is not document


# --- errors ----------------------------------------------------------------------------------

HEAD = 'name = "bad"\nseed = 1\n'
LAPLACE = 'workload = "laplace_mean"\n[params]\nepsilon = 1.0\nn = 10\n'
TOP_ALLOWED = (
    "allowed keys: budget, dataset, description, execution, grid, grid_points, metrics, mode, "
    "name, params, repetitions, seed, study, tracking, trials, workload"
)
WORKLOADS = "registered workloads: column_mean, column_mean_path, cpu_burn, crash_once, exponential_median, laplace_mean"

ERROR_CASES = {
    # unknown keys, with the allowed ones listed
    "unknown top-level key": (
        HEAD + "repetiton = 5\n" + LAPLACE,
        "spec: unknown key(s) 'repetiton'; " + TOP_ALLOWED,
    ),
    "unknown budget key": (
        HEAD + LAPLACE + "[budget]\nepsilon = 1.0\neps = 2\n",
        "[budget]: unknown key(s) 'eps'; allowed keys: accountant, delta, delta_slack, epsilon",
    ),
    "unknown tracking key": (
        HEAD + LAPLACE + "[tracking]\nexperment = 'x'\n",
        "[tracking]: unknown key(s) 'experment'; allowed keys: artifacts, checkpoint_interval_s, "
        "experiment, outage_wait_s, plots, reservoirs, run_statistics, unit_runs, uri",
    ),
    "unknown run statistics": (
        HEAD + LAPLACE + "[tracking]\nrun_statistics = 'some'\n",
        "[tracking] run_statistics ('some') must be one of ['centre', 'summary', 'all']",
    ),
    "wrong-typed workload parameter": (
        HEAD + LAPLACE + 'lower = "zero"\n',
        "study 'bad' params: lower ('zero') must be a finite real number",
    ),
    "unknown execution key": (
        HEAD + LAPLACE + "[execution]\nworkers = 4\n",
        "[execution]: unknown key(s) 'workers'; allowed keys: batch_size, max_configurations, "
        "max_in_flight_per_worker, max_retries, target_task_seconds",
    ),
    "unknown study key": (
        HEAD + '[[study]]\nname = "s"\nworkload = "laplace_mean"\nrepeats = 3\n',
        "study 's': unknown key(s) 'repeats'; allowed keys: dataset, description, grid, grid_points, "
        "metrics, name, params, repetitions, trials, workload",
    ),
    "unknown param": (
        HEAD + LAPLACE + "epsilonn = 2.0\n",
        "study 'bad' params: unknown key(s) 'epsilonn'; allowed keys: beta_a, beta_b, epsilon, lower, n, upper",
    ),
    "missing required param": (
        HEAD + 'workload = "laplace_mean"\n[params]\nepsilon = 1.0\n',
        "study 'bad' params: missing required key(s) 'n'",
    ),
    # workloads
    "unknown workload": (
        HEAD + 'workload = "laplace_meen"\n',
        "study 'bad': unknown workload 'laplace_meen'; " + WORKLOADS,
    ),
    "missing workload": (HEAD, "study 'bad': 'workload' is required; " + WORKLOADS),
    "unknown metric": (
        HEAD + 'metrics = ["abs_eror"]\n' + LAPLACE,
        "study 'bad': unknown metric(s) 'abs_eror' for workload 'laplace_mean'; allowed metrics: "
        "abs_error, error_over_scale, within_scale, theoretical_abs_error",
    ),
    "metrics not a list": (HEAD + 'metrics = "abs_error"\n' + LAPLACE, "study 'bad': 'metrics' must be a list"),
    # wrong types and values
    "missing name": ('seed = 1\nworkload = "laplace_mean"\n', "spec: 'name' (a non-empty string) is required"),
    "description not a string": (HEAD + "description = 3\n" + LAPLACE, "spec: 'description' must be a string"),
    "negative seed": ('name = "bad"\nseed = -1\n' + LAPLACE, "seed (-1) must be an int >= 0"),
    "boolean seed": ('name = "bad"\nseed = true\n' + LAPLACE, "seed (True) must be an int >= 0"),
    "release mode": (HEAD + 'mode = "release"\n' + LAPLACE, "mode ('release') must be 'research'; release runs use `privlab release`"),
    "repetitions a string": (
        HEAD + 'repetitions = "many"\n' + LAPLACE,
        "study 'bad' repetitions ('many') must be an int in [1, 10000000000]",
    ),
    "repetitions a float": (
        HEAD + "repetitions = 2.0\n" + LAPLACE,
        "study 'bad' repetitions (2.0) must be an int in [1, 10000000000]",
    ),
    "repetitions zero": (HEAD + "repetitions = 0\n" + LAPLACE, "study 'bad' repetitions (0) must be an int in [1, "),
    "param of the wrong value": (
        HEAD + 'workload = "laplace_mean"\n[params]\nepsilon = -1.0\nn = 10\n',
        "study 'bad' params: epsilon (-1.0) must be a finite real number > 0",
    ),
    "param of the wrong type": (
        HEAD + 'workload = "laplace_mean"\n[params]\nepsilon = 1.0\nn = 10.5\n',
        "study 'bad' params: n (10.5) must be an int in [2, 100000000]",
    ),
    "params not a table": (HEAD + 'workload = "laplace_mean"\nparams = 3\n', "study 'bad' [params] must be a table, got int"),
    "budget without epsilon": (HEAD + LAPLACE + "[budget]\ndelta = 0.0\n", "[budget]: 'epsilon' is required"),
    "budget epsilon zero": (HEAD + LAPLACE + "[budget]\nepsilon = 0\n", "[budget] epsilon (0) must be a finite real number > 0"),
    "budget epsilon a string": (
        HEAD + LAPLACE + '[budget]\nepsilon = "1"\n', "[budget] epsilon ('1') must be a finite real number",
    ),
    "budget delta above one": (HEAD + LAPLACE + "[budget]\nepsilon = 1\ndelta = 2\n", "[budget] delta (2) must be a finite real number in [0, 1]"),
    "unknown accountant": (
        HEAD + LAPLACE + '[budget]\nepsilon = 1\naccountant = "renyi"\n',
        "[budget] accountant ('renyi') must be one of ['basic', 'advanced', 'pld', 'rdp', 'zcdp', 'best']",
    ),
    "advanced without slack": (
        HEAD + LAPLACE + '[budget]\nepsilon = 1\naccountant = "advanced"\n',
        "[budget]: accountant 'advanced' needs delta_slack",
    ),
    "pld without slack": (
        HEAD + LAPLACE + '[budget]\nepsilon = 1\naccountant = "pld"\n',
        "[budget]: accountant 'pld' needs delta_slack (the δ at which it reads its ε)",
    ),
    # These two used to escape as LedgerError from deep inside the ledger.
    "budget delta of one": (HEAD + LAPLACE + "[budget]\nepsilon = 1\ndelta = 1.0\n", "[budget]: delta_cap (1.0) must be in [0, 1)"),
    "advanced slack above delta": (
        HEAD + LAPLACE + '[budget]\nepsilon = 1\naccountant = "advanced"\ndelta_slack = 1e-5\n',
        "[budget]: delta_slack (1e-05) must be <= delta_cap (0.0)",
    ),
    "tracking flag not a bool": (HEAD + LAPLACE + "[tracking]\nplots = 1\n", "[tracking] plots (1) must be true or false"),
    "tracking not a table": (HEAD + 'tracking = "x"\n' + LAPLACE, "[tracking] must be a table, got str"),
    "batch size neither auto nor a count": (
        HEAD + LAPLACE + '[execution]\nbatch_size = "big"\n',
        "[execution] batch_size ('big') must be 'auto' or an int in [1, 10000000000]",
    ),
    "negative retries": (HEAD + LAPLACE + "[execution]\nmax_retries = -1\n", "[execution] max_retries (-1) must be an int >= 0"),
    # execution patterns
    "trials for a grid workload": (
        HEAD + "trials = 5\n" + LAPLACE,
        "study 'bad': workload 'laplace_mean' runs repetitions (grid pattern); use 'repetitions', not 'trials'",
    ),
    "repetitions for a trials workload": (
        HEAD + 'workload = "laplace_privacy_loss"\nrepetitions = 5\n[params]\nepsilon = 1.0\n',
        "study 'bad': workload 'laplace_privacy_loss' runs trials (trials pattern); use 'trials', not 'repetitions'",
    ),
    "trials missing": (
        HEAD + 'workload = "laplace_privacy_loss"\n[params]\nepsilon = 1.0\n',
        "study 'bad': 'trials' (trials per configuration) is required",
    ),
    "repetitions for an actor pool": (
        HEAD + 'workload = "pd_generation"\nrepetitions = 2\n',
        "study 'bad': workload 'pd_generation' streams items (actor-pool pattern); 'repetitions' does not apply",
    ),
    # grids
    "grid axis not a list": (
        HEAD + 'workload = "laplace_mean"\n[params]\nn = 10\n[grid]\nepsilon = 1.0\n',
        "study 'bad' [grid] epsilon must be a non-empty list of values, got 1.0",
    ),
    "grid axis empty": (
        HEAD + 'workload = "laplace_mean"\n[params]\nn = 10\n[grid]\nepsilon = []\n',
        "study 'bad' [grid] epsilon must be a non-empty list of values, got []",
    ),
    "grid value twice": (
        HEAD + 'workload = "laplace_mean"\n[params]\nn = 10\n[grid]\nepsilon = [0.5, 1.0, 0.5]\n',
        "study 'bad' [grid] epsilon lists a value twice: [0.5, 1.0, 0.5]",
    ),
    # 1 and 1.0 are the same ε; they used to make two configurations with different keys.
    "grid value twice as int and float": (
        HEAD + 'workload = "laplace_mean"\n[params]\nn = 10\n[grid]\nepsilon = [1, 1.0]\n',
        "study 'bad' [grid] epsilon lists a value twice: [1, 1.0]",
    ),
    "grid axis also fixed": (
        HEAD + LAPLACE + "[grid]\nepsilon = [0.5]\n",
        "study 'bad': 'epsilon' is both a fixed [params] value and a [grid] axis; keep one",
    ),
    "grid over an unknown param": (
        HEAD + LAPLACE + "[grid]\neps = [0.5]\n",
        "study 'bad' params {'eps': 0.5}: unknown key(s) 'eps'; allowed keys: beta_a, beta_b, epsilon, lower, n, upper",
    ),
    "grid value invalid": (
        HEAD + 'workload = "laplace_mean"\n[params]\nn = 10\n[grid]\nepsilon = [1.0, 0]\n',
        "study 'bad' params {'epsilon': 0}: epsilon (0) must be a finite real number > 0",
    ),
    "dataset axis without a generated dataset": (
        HEAD + LAPLACE + '[grid]\n"dataset.n" = [5]\n',
        "study 'bad' [grid] dataset.n: only a generated [dataset] has parameters to vary",
    ),
    "grid_points above the grid size": (
        HEAD + "grid_points = 7\n" + 'workload = "laplace_mean"\n[params]\nn = 10\n[grid]\nepsilon = [0.5, 1.0]\n',
        "study 'bad' grid_points (7) must be at most the grid size (2)",
    ),
    "grid_points zero": (
        HEAD + "grid_points = 0\n" + LAPLACE, "study 'bad' grid_points (0) must be an int in [1, ",
    ),
    "grid_points without a seed": (
        'name = "bad"\ngrid_points = 1\n' + 'workload = "laplace_mean"\n[params]\nn = 10\n[grid]\nepsilon = [0.5, 1.0]\n',
        "study 'bad': grid_points samples the grid with the root seed; set 'seed'",
    ),
    # multi-study structure
    "single-study keys beside [[study]]": (
        HEAD + 'repetitions = 3\n[[study]]\nname = "s"\nworkload = "laplace_mean"\n',
        "spec: 'repetitions' belong inside each [[study]] when the spec declares several studies",
    ),
    "study a table instead of an array": (
        HEAD + '[study]\nname = "s"\n', "spec: 'study' must be a non-empty array of tables ([[study]])",
    ),
    "study without a name": (HEAD + '[[study]]\nworkload = "laplace_mean"\n', "study #1: 'name' (a non-empty string) is required"),
    "duplicate study names": (
        HEAD + '[[study]]\nname = "s"\nworkload = "cpu_burn"\ntrials = 1\n[[study]]\nname = "s"\nworkload = "cpu_burn"\ntrials = 1\n',
        "study names must be unique; 's' appears twice",
    ),
    # datasets
    "file workload without a dataset": (
        HEAD + 'workload = "column_mean"\n[params]\ncolumn = "x"\nepsilon = 1.0\nlower = 0.0\nupper = 1.0\nn = 3\n',
        "study 'bad': workload 'column_mean' needs a [dataset] (a generator or a file)",
    ),
    "unknown dataset generator": (
        HEAD + LAPLACE + '[dataset]\ngenerator = "beta_nope"\n',
        "[dataset]: unknown dataset generator 'beta_nope'; registered generators:",
    ),
    "dataset with path and generator": (
        HEAD + LAPLACE + '[dataset]\ngenerator = "g"\npath = "x.csv"\n',
        "[dataset]: give either 'path' (a file) or 'generator', not both",
    ),
    "dataset with neither": (HEAD + LAPLACE + "[dataset]\nrows = 3\n", "[dataset] needs either 'path' (a file with columns) or 'generator'"),
    "unknown generated-dataset key": (
        HEAD + LAPLACE + '[dataset]\ngenerator = "g"\nsize = 3\n',
        "[dataset]: unknown key(s) 'size'; allowed keys for a generated dataset: generator, params",
    ),
    "bad file format": (
        HEAD + LAPLACE + '[dataset]\npath = "data.xlsx"\n',
        "[dataset].format ('xlsx') must be one of parquet, csv",
    ),
}


@pytest.mark.parametrize("text, message", list(ERROR_CASES.values()), ids=list(ERROR_CASES))
def test_spec_errors_name_the_key_and_allowed_values(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SpecError, match=re.escape(message)):
        load_spec(path)


def test_spec_error_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown key"):
        load_spec(write(tmp_path, HEAD + "bogus = 1\n" + LAPLACE))


def test_missing_spec_file_and_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"spec file '.*nothere\.toml' does not exist"):
        load_spec(tmp_path / "nothere.toml")
    with pytest.raises(SpecError, match=r"spec\.toml: not valid TOML"):
        load_spec(write(tmp_path, "name = \n"))


# --- --set -----------------------------------------------------------------------------------


def test_set_top_level_key(tmp_path: Path) -> None:
    path = write(tmp_path, SINGLE)
    spec = load_spec(path, ["repetitions=5", "seed=99", "description=hello world"])
    assert {c.units for c in spec.configurations} == {5}
    assert spec.seed == 99
    assert spec.description == "hello world"  # not TOML: taken as a string
    assert spec.document["repetitions"] == 5
    assert load_spec(path).configurations[0].units == 20  # the file is untouched


def test_set_grid_axis(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SINGLE), ["grid.epsilon=[0.1]"])
    assert [c.grid_point for c in spec.configurations] == [{"epsilon": 0.1, "n": 100}, {"epsilon": 0.1, "n": 1000}]


def test_set_params_and_new_tables(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SINGLE), ["params.upper=2.0", "tracking.experiment=other", "budget.epsilon=1.0"])
    assert {c.params["upper"] for c in spec.configurations} == {2.0}
    assert spec.tracking.experiment == "other"
    assert spec.budget is not None and spec.budget.epsilon == 1.0


def test_set_one_study_of_a_multi_study_spec(tmp_path: Path) -> None:
    path = write(tmp_path, MULTI)
    spec = load_spec(path, ["study.trials_study.trials=5", "study.grid_study.grid.epsilon=[0.3]"])
    assert [c.units for c in spec.configurations] == [4, 5, 5, 5]
    assert spec.study("trials_study").units == 5
    assert [c.grid_point for c in spec.configurations if c.study == "grid_study"] == [{"epsilon": 0.3, "n": 100}]
    untouched = load_spec(path)
    assert [c.units for c in untouched.configurations] == [4, 4, 1000, 1000, 1000]


def test_set_study_key_without_study_prefix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        SpecError,
        match=re.escape("--set trials: this spec has several studies; address one as study.<name>.trials "
                        "(studies: grid_study, trials_study)"),
    ):
        load_spec(write(tmp_path, MULTI), ["trials=5"])


def test_set_unknown_study(tmp_path: Path) -> None:
    with pytest.raises(
        SpecError, match=re.escape("--set study.nope.trials: no study named 'nope'; studies: grid_study, trials_study")
    ):
        load_spec(write(tmp_path, MULTI), ["study.nope.trials=5"])
    with pytest.raises(SpecError, match=re.escape("no study named 'nope'; studies: none")):
        load_spec(write(tmp_path, SINGLE), ["study.nope.trials=5"])


@pytest.mark.parametrize("override", ["trials", "=5", " =5", ""])
def test_set_bad_format(tmp_path: Path, override: str) -> None:
    with pytest.raises(SpecError, match=re.escape(f"--set {override!r} must look like key=value")):
        load_spec(write(tmp_path, SINGLE), [override])


def test_set_through_a_non_table(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=re.escape("--set name.x: 'name' is not a table in the spec")):
        load_spec(write(tmp_path, SINGLE), ["name.x=1"])


def test_set_on_a_malformed_study_table_reports_a_spec_error(tmp_path: Path) -> None:
    # `[study]` (a table, not an array) used to crash --set with AttributeError.
    path = write(tmp_path, HEAD + '[study]\nname = "s"\nworkload = "cpu_burn"\n')
    with pytest.raises(SpecError, match=re.escape("no study named 's'; studies: none")):
        load_spec(path, ["study.s.trials=5"])
    with pytest.raises(SpecError, match="belong inside each"):
        load_spec(path, ["trials=5"])


def test_apply_override_keeps_quoted_grid_keys_together() -> None:
    document: dict = {"grid": {"dataset.n": [1]}, "params": {}}
    apply_override(document, "grid.dataset.n=[10, 20]")
    apply_override(document, "params.lower = -1.5")
    assert document == {"grid": {"dataset.n": [10, 20]}, "params": {"lower": -1.5}}
    fresh: dict = {}
    apply_override(fresh, "grid.dataset.n=[3]")  # no [grid] yet: the key is still "dataset.n"
    assert fresh == {"grid": {"dataset.n": [3]}}


# --- grid_points ------------------------------------------------------------------------------

SAMPLED = """
name = "sampled"
seed = {seed}
workload = "laplace_mean"
grid_points = {points}
[grid]
epsilon = [0.1, 0.2, 0.5, 1.0]
n = [10, 20, 50, 100, 200]
"""
FULL_GRID = [{"epsilon": e, "n": n} for e, n in itertools.product([0.1, 0.2, 0.5, 1.0], [10, 20, 50, 100, 200])]


def sampled(tmp_path: Path, seed: int, points: int = 5) -> list[dict]:
    spec = load_spec(write(tmp_path, SAMPLED.format(seed=seed, points=points), f"s{seed}-{points}.toml"))
    assert [c.id for c in spec.configurations] == [f"sampled-{i:03d}" for i in range(points)]
    return [dict(c.grid_point) for c in spec.configurations]


def test_grid_points_sampling_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    first = sampled(tmp_path, 1)
    assert sampled(tmp_path, 1) == first
    assert len(first) == 5
    # distinct points of the full grid, kept in grid order
    positions = [FULL_GRID.index(point) for point in first]
    assert positions == sorted(set(positions))


def test_grid_points_sampling_differs_across_seeds(tmp_path: Path) -> None:
    draws = {seed: tuple(map(canonical_params, sampled(tmp_path, seed))) for seed in (1, 2, 3)}
    assert len(set(draws.values())) == 3


def test_grid_points_equal_to_the_grid_size_keeps_every_point(tmp_path: Path) -> None:
    assert sampled(tmp_path, 5, points=20) == FULL_GRID


def test_grid_points_keeps_the_config_keys_of_the_full_grid(tmp_path: Path) -> None:
    full = load_spec(write(tmp_path, SAMPLED.format(seed=1, points=20)))
    keys = {canonical_params(c.grid_point): c.config_key for c in full.configurations}
    sample = load_spec(write(tmp_path, SAMPLED.format(seed=1, points=5), "five.toml"))
    for config in sample.configurations:
        assert config.config_key == keys[canonical_params(config.grid_point)]


# --- budgets ----------------------------------------------------------------------------------


def test_budget_below_a_planned_epsilon_fails_at_load_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workload = type(registry.get_workload("laplace_mean"))

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("a trial ran before the budget check")

    monkeypatch.setattr(workload, "run_trial", no_work)
    path = write(tmp_path, SINGLE + "[budget]\nepsilon = 0.5\n")
    with pytest.raises(
        BudgetExceededError,
        match=re.escape("study 'single' configuration {'epsilon': 1.0, 'n': 100}:") + ".*over the cap of 0.5",
    ):
        load_spec(path)


def test_budget_equal_to_the_largest_planned_epsilon_passes(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SINGLE + "[budget]\nepsilon = 1.0\n"))
    assert len(spec.configurations) == 6
    assert spec.new_ledger().epsilon_cap == 1.0


def test_budget_applies_to_every_study(tmp_path: Path) -> None:
    path = write(tmp_path, MULTI + "[budget]\nepsilon = 1.5\n")
    with pytest.raises(BudgetExceededError, match=re.escape("study 'trials_study' configuration {'epsilon': 2.0}")):
        load_spec(path)
    assert len(load_spec(path, ["study.trials_study.grid.epsilon=[0.5, 1.5]"]).configurations) == 4


# --- configuration keys -----------------------------------------------------------------------


def test_adding_a_grid_value_keeps_existing_config_keys(tmp_path: Path) -> None:
    path = write(tmp_path, SINGLE)
    small = load_spec(path, ["grid.epsilon=[0.1, 1.0]"])
    large = load_spec(path, ["grid.epsilon=[0.05, 0.1, 0.3, 1.0]", "grid.n=[100, 1000, 10]"])
    by_point = {canonical_params(c.grid_point): c for c in large.configurations}
    for config in small.configurations:
        match = by_point[canonical_params(config.grid_point)]
        assert match.config_key == config.config_key
        assert match.study_key == config.study_key
    # the indices (and so ids) moved, the keys did not
    assert [c.id for c in small.configurations] != [by_point[canonical_params(c.grid_point)].id for c in small.configurations]
    assert len({c.config_key for c in large.configurations}) == len(large.configurations) == 12


def test_config_key_depends_on_parameters_not_on_order(tmp_path: Path) -> None:
    path = write(tmp_path, SINGLE)
    base = {canonical_params(c.grid_point): c.config_key for c in load_spec(path).configurations}
    reordered = load_spec(path, ["grid.epsilon=[1.0, 0.5, 0.1]"])
    assert {canonical_params(c.grid_point): c.config_key for c in reordered.configurations} == base
    widened = load_spec(path, ["params.upper=2.0"])
    assert not set(base.values()) & {c.config_key for c in widened.configurations}
    config = load_spec(path).configurations[0]
    assert config.config_key == stable_key(canonical_params(dict(config.params)), canonical_params({}))


def test_study_key_depends_on_the_study_name(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MULTI))
    assert spec.study("grid_study").key != spec.study("trials_study").key
    assert spec.study("grid_study").key == stable_key("study", "grid_study")


# --- datasets in specs ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class _GenParams:
    n: int
    scale: float = 1.0


def _generate(params: _GenParams, rng: object) -> pd.DataFrame:  # pragma: no cover - never run
    raise AssertionError("specs never generate data")


@pytest.fixture
def fake_generator(monkeypatch: pytest.MonkeyPatch) -> str:
    registry.workload_names()  # load the built-ins first so the fake one is not overwritten
    generator = registry.DatasetGenerator(name="spec_test_uniform", Params=_GenParams, generate=_generate)
    monkeypatch.setitem(registry.GENERATORS._entries, generator.name, generator)
    return generator.name


def test_grid_over_dataset_generator_parameters(tmp_path: Path, fake_generator: str) -> None:
    spec = load_spec(write(tmp_path, HEAD + LAPLACE + f"""
[dataset]
generator = "{fake_generator}"
[dataset.params]
scale = 2.0
[grid]
"dataset.n" = [10, 20]
"""))
    assert isinstance(spec.studies[0].dataset, GeneratedDataset)
    assert [dict(c.dataset_params) for c in spec.configurations] == [{"scale": 2.0, "n": 10}, {"scale": 2.0, "n": 20}]
    assert spec.configurations[1].flat_params()["dataset.n"] == 20
    assert spec.configurations[0].params == spec.configurations[1].params
    assert spec.configurations[0].config_key != spec.configurations[1].config_key


def test_dataset_grid_axis_that_is_also_fixed_is_refused(tmp_path: Path, fake_generator: str) -> None:
    text = HEAD + LAPLACE + f'[dataset]\ngenerator = "{fake_generator}"\n[dataset.params]\nn = 5\n[grid]\n"dataset.n" = [10]\n'
    with pytest.raises(SpecError, match=re.escape("'n' is both a fixed [dataset.params] value and a [grid] axis 'dataset.n'")):
        load_spec(write(tmp_path, text))


def test_bad_dataset_generator_parameter(tmp_path: Path, fake_generator: str) -> None:
    text = HEAD + LAPLACE + f'[dataset]\ngenerator = "{fake_generator}"\n[dataset.params]\nm = 5\n'
    with pytest.raises(SpecError, match=re.escape("[dataset] params: unknown key(s) 'm'; allowed keys: n, scale")):
        load_spec(write(tmp_path, text))


def test_file_dataset_resolved_against_the_spec_folder(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    pd.DataFrame({"x": [0.1, 0.5, 0.9]}).to_csv(tmp_path / "data" / "x.csv", index=False)
    spec = load_spec(write(tmp_path, HEAD + """
        workload = "column_mean"
        [params]
        column = "x"
        lower = 0.0
        upper = 1.0
        n = 3
        [grid]
        epsilon = [0.5, 1.0]
        [dataset]
        path = "data/x.csv"
        [dataset.columns.x]
        type = "float"
        lower = 0.0
        upper = 1.0
    """))
    dataset = spec.studies[0].dataset
    assert isinstance(dataset, FileDataset)
    assert dataset.path == (tmp_path / "data" / "x.csv").resolve()
    assert dataset.format == "csv"
    assert len(spec.configurations) == 2
    assert math.isclose(float(dataset.load()["x"].sum()), 1.5)


def _path_spec(root: Path) -> Path:
    """``root/experiments/paths.toml`` naming ``data/x.csv`` beside it, with root/shared/y.csv too."""
    for folder, name, values in (("experiments/data", "x.csv", [0.1, 0.5]), ("shared", "y.csv", [0.2, 0.4])):
        (root / folder).mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"x": values}).to_csv(root / folder / name, index=False)
    return write(root / "experiments", """
        name = "paths"
        seed = 1

        [[study]]
        name = "file"
        workload = "column_mean"
        [study.params]
        column = "x"
        lower = 0.0
        upper = 1.0
        n = 2
        epsilon = 1.0
        [study.dataset]
        path = "data/x.csv"
        [study.dataset.columns.x]
        type = "float"
        lower = 0.0
        upper = 1.0

        [[study]]
        name = "param"
        workload = "column_mean_path"
        [study.params]
        column = "x"
        lower = 0.0
        upper = 1.0
        n = 2
        path = "data/x.csv"
        [study.grid]
        epsilon = [0.5, 1.0]

        [[study]]
        name = "grid"
        workload = "column_mean_path"
        [study.params]
        column = "x"
        lower = 0.0
        upper = 1.0
        n = 2
        epsilon = 1.0
        [study.grid]
        path = ["data/x.csv"]
    """, "paths.toml")


def test_set_paths_are_resolved_against_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34 item 5: a path given with --set is the user's, typed from the working directory; a
    path written in the spec file stays relative to the spec's folder."""
    spec_path = _path_spec(tmp_path)
    monkeypatch.chdir(tmp_path)
    plain = load_spec(spec_path)
    in_folder = (tmp_path / "experiments" / "data" / "x.csv").resolve()
    assert plain.study("file").dataset.path == in_folder
    assert [Path(c.params["path"]) for c in plain.configurations if c.study == "param"] == [in_folder] * 2

    spec = load_spec(spec_path, ["study.file.dataset.path=shared/y.csv", "study.param.params.path=shared/y.csv"])
    from_cwd = (tmp_path / "shared" / "y.csv").resolve()
    assert spec.study("file").dataset.path == from_cwd
    assert [Path(c.params["path"]) for c in spec.configurations if c.study == "param"] == [from_cwd] * 2
    # The logged document names the file relative to the spec's folder, as the file's own paths do.
    studies = {s["name"]: s for s in spec.document["study"]}
    assert studies["file"]["dataset"]["path"] == studies["param"]["params"]["path"] == "../shared/y.csv"
    # Grid values and inline tables are paths too; absolute paths and other values stay as given.
    grid = load_spec(spec_path, ["study.grid.grid.path=['shared/y.csv', 'experiments/data/x.csv']"])
    assert [Path(c.params["path"]) for c in grid.configurations if c.study == "grid"] == [from_cwd, in_folder]
    table = load_spec(spec_path, ["study.file.dataset={path = 'shared/y.csv', columns = {x = {type = 'float', "
                                  "lower = 0.0, upper = 1.0}}}"])
    assert table.study("file").dataset.path == from_cwd
    absolute = load_spec(spec_path, [f"study.param.params.path={from_cwd}"])
    assert {s["name"]: s for s in absolute.document["study"]}["param"]["params"]["path"] == str(from_cwd)
    # Naming the spec's own file from the working directory keeps its configurations' seeds.
    same = load_spec(spec_path, ["study.param.params.path=experiments/data/x.csv"])
    assert [c.config_key for c in same.configurations] == [c.config_key for c in plain.configurations]
    # From elsewhere, the same relative text names another file (or none): it is refused.
    monkeypatch.chdir(tmp_path / "experiments")
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(spec_path, ["study.file.dataset.path=shared/y.csv"])


def test_the_cluster_readme_recipe_loads_as_written(nvss_10k: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cluster/README.md §4's end-to-end recipe (issue 34 item 5): from the checkout's root,
    ``DATA=../shared/...`` and ``--set study.*.params.data=$DATA`` name the NVSS 10K sample (it was
    resolved against experiments/births/ and did not exist)."""
    root = QUICKSTART.parents[1]
    readme = (root / "cluster" / "README.md").read_text()
    recipe = readme[readme.index("### End to end on one machine"):]
    data = re.search(r"^DATA=(\S+)$", recipe, flags=re.M).group(1)
    command = re.search(r"^privlab run (\S+) (.*?)\n(?!\s)", recipe, flags=re.M | re.S)
    spec_file, rest = command.group(1), command.group(2).replace("\\\n", " ").replace("$DATA", data)
    overrides = re.findall(r"--set (\S+)", rest)
    assert len(overrides) == 6 and sum("params.data=" in o for o in overrides) == 2
    monkeypatch.chdir(root)
    spec = load_spec(spec_file, overrides)
    assert len(spec.configurations) == 3
    assert {Path(c.params["data"]) for c in spec.configurations} == {nvss_10k.resolve()}


# --- grid size limit (issue 15 item 7) ---------------------------------------------------------

def _grid_spec(extra: str = "") -> str:
    """A laplace_mean study whose grid has 1000 × 100 × 50 × 50 × 2 = 500,000,000 points."""
    return (f'name = "big"\nseed = 1\n{extra}workload = "laplace_mean"\n[grid]\n'
            f"epsilon = {[round(0.001 * i, 3) for i in range(1, 1001)]}\n"
            f"n = {list(range(10, 110))}\n"
            f"beta_a = {[0.5 * i for i in range(1, 51)]}\n"
            f"beta_b = {[0.5 * i for i in range(1, 51)]}\n"
            "upper = [1.0, 2.0]\n")


def test_a_huge_grid_is_refused_from_its_shape_before_anything_is_built(tmp_path: Path) -> None:
    import time

    started = time.perf_counter()
    with pytest.raises(SpecError, match=r"expands to 500,000,000 configurations \(grid 1000 × 100 × 50 × 50 × 2\), "
                                        r"which takes the spec over its limit of 100,000 \(\[execution\] "
                                        r"max_configurations\)"):
        load_spec(write(tmp_path, _grid_spec()))
    assert time.perf_counter() - started < 5.0  # a 10⁷ grid used to be built: ~27 minutes, 8 MB/s of memory


def test_the_configuration_limit_is_configurable_and_counts_every_study(tmp_path: Path) -> None:
    two_studies = """name = "two"
seed = 1
[execution]
max_configurations = 3
[[study]]
name = "a"
workload = "laplace_mean"
[study.params]
n = 10
[study.grid]
epsilon = [0.5, 1.0]
[[study]]
name = "b"
workload = "laplace_mean"
[study.params]
n = 10
[study.grid]
epsilon = [0.5, 1.0]
"""
    with pytest.raises(SpecError, match=r"study 'b' expands to 2 configurations .* limit of 3"):
        load_spec(write(tmp_path, two_studies))
    assert len(load_spec(write(tmp_path, two_studies.replace("= 3", "= 4"))).configurations) == 4


def test_grid_points_sample_a_huge_grid_without_building_it(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, _grid_spec("grid_points = 5\n")))
    assert len(spec.configurations) == 5
    again = load_spec(write(tmp_path, _grid_spec("grid_points = 5\n"), name="again.toml"))
    assert [c.params for c in spec.configurations] == [c.params for c in again.configurations]


def test_grid_point_decoding_follows_itertools_product_order() -> None:
    from privlab.platform.experiment.spec import _grid_point

    axes = [("a", [1, 2, 3]), ("b", ["x", "y"]), ("c", [0.5, 1.0, 2.0, 4.0])]
    expected = [dict(zip("abc", combo, strict=True)) for combo in itertools.product(*[v for _, v in axes])]
    assert [_grid_point(i, axes) for i in range(len(expected))] == expected


def test_a_file_parameter_keys_the_seeds_by_its_place_beside_the_spec_not_on_the_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The births grid's data named as the spec writes it, by an absolute path, or with ``--set``
    from another folder, in two checkouts in different folders: one set of configuration keys."""
    births = Path(__file__).resolve().parents[1] / "experiments" / "births"

    def keys(checkout: Path, data: str | None, *, cwd: Path | None = None, name: str = "x.csv") -> list[int]:
        spec_dir = checkout / "main" / "experiments" / "births"
        spec_dir.mkdir(parents=True, exist_ok=True)
        for file in ("grid.toml", "space.toml", "flow.toml"):
            text = (births / file).read_text()
            (spec_dir / file).write_text(re.sub(r'data = "[^"]*"', f'data = "../../../shared/{name}"', text))
        (checkout / "shared").mkdir(exist_ok=True)
        (checkout / "shared" / name).write_text("mother_age,parity,gestation_week,is_female,birth_weight,date_of_birth\n"
                                                "33,2,39,False,3490,2019-03-15\n34,3,31,True,1055,2019-07-15\n")
        monkeypatch.chdir(cwd or tmp_path)
        overrides = [f"study.{s}.grid_points=3" for s in ("privbayes_theta", "privbayes_degree")]
        overrides += [f"study.{s}.params.data={data}" for s in ("privbayes_theta", "privbayes_degree") if data]
        return [c.config_key for c in load_spec(spec_dir / "grid.toml", overrides).configurations]

    one, two = tmp_path / "one", tmp_path / "elsewhere" / "two"
    as_written = keys(one, None)
    assert len(set(as_written)) == 6
    assert keys(one, str(one / "shared" / "x.csv")) == as_written
    assert keys(two, str(two / "shared" / "x.csv")) == as_written
    assert keys(two, "shared/x.csv", cwd=two) == as_written  # relative to where --set was typed
    assert keys(two, str(two / "shared" / "y.csv"), name="y.csv") != as_written  # another file: other streams
