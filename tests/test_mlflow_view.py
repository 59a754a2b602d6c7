"""What a user browsing privlab's runs in MLflow's UI sees (issue 34, "First hour II", items 8–9).

Item 8: the parent's ``configurations_done = 23`` beside ``configurations = 16`` (facets counted
as runs), an ``eps_total`` that was the largest configuration's ε, metric names with spaces
(``eps_step_00_pd.entropy H_age_``), an empty ``privlab.driver`` tag and no ``mlflow.user`` /
``mlflow.source.*`` tags. Item 9: experiments opened in the GenAI view, two parent runs of one
spec both named ``quickstart``, an empty Dataset column, and ``privlab ui``'s defaults.
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privlab.platform.cli import ui_app, ui_command
from privlab.platform.cli.main import build_parser, main
from privlab.platform.experiment.spec import load_spec
from privlab.platform.run.configuration_log import _metric_safe
from privlab.platform.run.parent_run import run_name
from privlab.platform.run.runner import RunOptions, run_experiment
from privlab.platform.tracking.configuration_index import read_index
from privlab.platform.tracking.run_tags import DRIVER_TAG, EXPERIMENT_KIND, EXPERIMENT_KIND_TAG
from privlab.platform.tracking.tracker import Tracker

SAFE_NAME = re.compile(r"^[A-Za-z0-9_.\-/]+$")  # MLflow's characters, without space and colon


@pytest.fixture(scope="module")
def mini_store(tmp_path_factory: pytest.TempPathFactory, mini_spec_text: str) -> dict:
    folder = tmp_path_factory.mktemp("mlflow-view")
    spec = folder / "mini.toml"
    spec.write_text(mini_spec_text)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    summary = run_experiment(load_spec(spec, ["study.loss.trials=200"]),
                             RunOptions(serial=True, tracking_uri=uri, progress=False, command="privlab run mini.toml"))
    tracker = Tracker(uri)
    parent = tracker.get_run(summary["run_id"])
    children = tracker.child_runs(parent.info.experiment_id, parent.info.run_id)
    return {"uri": uri, "spec": spec, "summary": summary, "tracker": tracker, "parent": parent, "children": children,
            "folder": folder}


def _run(spec: Path, uri: str, *overrides: str) -> dict:
    """A serial run into the module's store (a new store's tables take seconds to create)."""
    return run_experiment(load_spec(spec, list(overrides)), RunOptions(serial=True, tracking_uri=uri, progress=False))


def test_the_parent_names_its_metrics_for_what_they_are(mini_store: dict) -> None:
    metrics, params = mini_store["parent"].data.metrics, mini_store["parent"].data.params
    assert metrics["eps_max_configuration"] == 1.0 == mini_store["summary"]["epsilon_total"]
    assert metrics["delta_max_configuration"] == 0.0
    assert not {"eps_total", "delta_total"} & set(metrics)  # not a total: configurations are alternatives
    assert metrics["configurations_done"] == float(params["configurations"]) == 5
    assert metrics["configuration_runs"] == len(mini_store["children"]) == 5


def test_a_facetted_study_counts_configurations_apart_from_runs(mini_store: dict, tmp_path: Path) -> None:
    # The pMSE Table-1 study: one executed configuration, eight facets (eight child runs).
    spec = tmp_path / "facets.toml"
    spec.write_text('name = "facets"\nseed = 3\n[[study]]\nname = "table1"\nworkload = "pmse_sensitivity"\n'
                    'trials = 4\n[study.params]\nn = 60\n[[study]]\nname = "mean"\nworkload = "laplace_mean"\n'
                    'repetitions = 2\n[study.params]\nlower = 0.0\nupper = 1.0\nn = 10\nepsilon = 1.0\n')
    summary = _run(spec, mini_store["uri"])
    parent = Tracker(mini_store["uri"]).get_run(summary["run_id"])
    assert parent.data.params["configurations"] == "2"
    assert parent.data.metrics["configurations_done"] == 2
    assert parent.data.metrics["configuration_runs"] == len(summary["configurations"]) == 9


def test_every_metric_and_param_name_uses_mlflows_characters_without_spaces(mini_store: dict) -> None:
    runs = [mini_store["parent"], *mini_store["children"]]
    names = [name for run in runs for name in (*run.data.metrics, *run.data.params)]
    assert [n for n in names if not SAFE_NAME.match(n)] == []
    # each step's ε is in the run's index (compare shows it) and its ledger tag, not an MLflow metric
    indexed = read_index(Tracker(mini_store["uri"]), mini_store["parent"].info.run_id)
    steps = [n for row in indexed for n in row.metrics if n.startswith("eps_step_")]
    assert "eps_step_00_pd.entropy_H_age" in steps  # the ledger's step "pd.entropy H(age)"
    assert not [n for run in mini_store["children"] for n in run.data.metrics if n.startswith("eps_step_")]
    assert all(SAFE_NAME.match(n) for n in steps)
    assert _metric_safe("pd.entropy H(country|bkt age)") == "pd.entropy_H_country_bkt_age"
    assert _metric_safe("a/b c:d") == "a_b_c_d" and _metric_safe("()") == "step"


def test_runs_carry_mlflows_standard_tags_and_no_empty_driver(mini_store: dict) -> None:
    parent = mini_store["parent"]
    for run in (parent, *mini_store["children"]):
        tags = run.data.tags
        assert tags["mlflow.user"] == getpass.getuser()
        assert tags["mlflow.source.name"] == str(mini_store["spec"])
        assert tags["mlflow.source.type"] == "LOCAL"
    assert DRIVER_TAG not in parent.data.tags  # released: the tag is gone, not left empty
    assert "privlab.git_commit" in parent.data.tags


def test_the_git_commit_is_a_source_tag_when_known(tmp_path: Path, mini_spec_text: str, mini_store: dict) -> None:
    folder = tmp_path / "checkout"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "mini.toml").write_text(mini_spec_text)
    git = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "add", "mini.toml"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "spec"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    summary = _run(folder / "mini.toml", mini_store["uri"], "study.loss.trials=20", "study.mean.repetitions=2",
                   "study.seeds.params.candidates=40")
    tags = Tracker(mini_store["uri"]).get_run(summary["run_id"]).data.tags
    assert tags["mlflow.source.git.commit"] == tags["privlab.git_commit"] == head


def test_experiments_open_in_the_runs_view(mini_store: dict) -> None:
    tracker = mini_store["tracker"]
    experiment = tracker.client.get_experiment(mini_store["parent"].info.experiment_id)
    assert experiment.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND == "custom_model_development"
    # An experiment made before privlab set the kind gets it on its next run.
    old = tracker.client.create_experiment("made-before")
    tracker.experiment_id("made-before", create=True)
    assert tracker.client.get_experiment(old).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND


def test_two_runs_of_one_spec_have_different_names(mini_store: dict) -> None:
    spec = load_spec(mini_store["spec"])
    first, second = run_name(spec, now=1_800_000_000.0), run_name(spec, now=1_800_000_061.0)
    assert first != second and first.startswith("mini 20") and re.search(r"\d\d:\d\d:\d\d$", first)
    changed = load_spec(mini_store["spec"], ["study.loss.trials=200"])
    assert run_name(changed, now=1_800_000_000.0) == first.replace("mini ", "mini [study.loss.trials=200] ")
    long = load_spec(mini_store["spec"], [f"study.loss.trials={200 + i}" for i in range(8)])
    assert re.fullmatch(r"mini \[set [0-9a-f]{8}\] .+", run_name(long, now=1_800_000_000.0))
    assert mini_store["parent"].info.run_name.startswith("mini [study.loss.trials=200] 20")


def test_the_data_each_run_read_is_a_dataset_input(mini_store: dict) -> None:
    # The mini spec's plausible-deniability study reads a table generated on the driver.
    (parent_input,) = mini_store["parent"].inputs.dataset_inputs
    dataset = parent_input.dataset
    assert dataset.name == "census_like_1500" and dataset.source_type == "code"
    assert re.fullmatch(r"[0-9a-f]{12}", dataset.digest)
    assert json.loads(dataset.source) == {"tags": {"generator": "census_like:1500"}}
    columns = json.loads(dataset.schema)["mlflow_colspec"]
    assert {c["name"] for c in columns} >= {"age", "workclass", "income"}
    assert json.loads(dataset.profile)["num_rows"] == 1500
    by_id = {run.data.tags["privlab.config_id"]: run for run in mini_store["children"]}
    assert [i.dataset.digest for i in by_id["seeds-000"].inputs.dataset_inputs] == [dataset.digest]
    assert by_id["mean-000"].inputs.dataset_inputs == []  # its data is drawn in each trial: nothing read


def test_a_file_dataset_input_names_the_file_and_its_sha256(tmp_path: Path, mini_store: dict) -> None:
    rng = np.random.default_rng(0)
    data = tmp_path / "people.parquet"
    pd.DataFrame({"age": rng.integers(17, 91, size=300), "hours": rng.uniform(0, 99, size=300)}).to_parquet(data)
    spec = tmp_path / "file.toml"
    spec.write_text(
        'name = "file"\nseed = 4\nworkload = "column_mean"\nrepetitions = 5\n'
        '[params]\ncolumn = "age"\nlower = 17.0\nupper = 90.0\nn = 300\n[grid]\nepsilon = [1.0, 2.0]\n'
        '[dataset]\npath = "people.parquet"\n'
        '[dataset.columns.age]\ntype = "integer"\nlower = 17\nupper = 90\n'
        '[dataset.columns.hours]\ntype = "float"\nlower = 0\nupper = 99\n'
    )
    summary = _run(spec, mini_store["uri"])
    tracker = Tracker(mini_store["uri"])
    parent = tracker.get_run(summary["run_id"])
    sha256 = hashlib.sha256(data.read_bytes()).hexdigest()
    (logged,) = parent.inputs.dataset_inputs
    assert (logged.dataset.name, logged.dataset.digest, logged.dataset.source_type) == ("people", sha256[:12], "local")
    assert json.loads(logged.dataset.source) == {"uri": str(data.resolve()), "files": {str(data.resolve()): sha256}}
    assert json.loads(logged.dataset.schema)["mlflow_colspec"] == [
        {"type": "long", "name": "age", "required": True}, {"type": "double", "name": "hours", "required": True}]
    children = tracker.child_runs(parent.info.experiment_id, parent.info.run_id)
    assert [[i.dataset.digest for i in c.inputs.dataset_inputs] for c in children] == [[sha256[:12]]] * 2


# -- privlab ui -----------------------------------------------------------------------------------

def _ui_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["ui", *argv])


def test_ui_defaults_are_loopback_a_free_port_and_one_worker_without_jobs() -> None:
    args = _ui_args()
    assert (args.host, args.port, args.open, args.experiment) == ("127.0.0.1", 0, False, None)
    command = ui_command.server_command("sqlite:////x/mlflow.db", host=args.host, port=5123, artifacts="/x/mlruns")
    assert command[1:4] == ["-m", "mlflow", "server"]
    joined = " ".join(command)
    assert "--host 127.0.0.1" in joined and "--port 5123" in joined and "--workers 1" in joined
    assert "--backend-store-uri sqlite:////x/mlflow.db" in joined and "--artifacts-destination /x/mlruns" in joined
    assert ui_command.server_environment()["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert ui_command.runs_view_url("http://127.0.0.1:5123/", "7") == \
        "http://127.0.0.1:5123/#/experiments/7/runs?workflowType=machine_learning"


def test_ui_refuses_a_missing_store_and_a_bad_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nothing" / "mlflow.db"
    assert main(["ui", "--tracking-uri", f"sqlite:///{missing}"]) == 2
    assert "no MLflow tracking store" in capsys.readouterr().err
    assert not missing.parent.exists()  # nothing created
    assert main(["ui", "--port", "70000", "--tracking-uri", f"sqlite:///{missing}"]) == 2
    assert "--port (70000) must be" in capsys.readouterr().err


@pytest.mark.parametrize(("uri", "fragment"), [
    ("ftp://example.org/runs", "MLflow cannot store runs at a ftp:// URI"),
    ("file:///{tmp}/missing-mlruns", "no MLflow tracking store at"),
    ("{tmp}/missing-folder-store", "no MLflow tracking store at"),
])
def test_ui_refuses_a_uri_run_refuses_in_our_words(tmp_path: Path, capsys: pytest.CaptureFixture[str], uri: str,
                                                  fragment: str) -> None:
    """Issue 46 item 4: these exited 4 with MLflow's own text (a model-registry message, a
    deprecation notice); `privlab run` refused them with exit 2."""
    assert main(["ui", "--tracking-uri", uri.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err and "mlflow" not in err.split(fragment)[0].lower()
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_ui_opens_the_experiment_of_the_latest_run_or_the_one_named(mini_store: dict, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    tracker = mini_store["tracker"]
    spec = tmp_path / "newest.toml"
    spec.write_text('name = "newest"\nseed = 3\nworkload = "laplace_mean"\nrepetitions = 2\n'
                    '[params]\nlower = 0.0\nupper = 1.0\nn = 10\nepsilon = 1.0\n')
    newest = tracker.get_run(_run(spec, mini_store["uri"])["run_id"]).info.experiment_id
    assert ui_command._experiment(tracker, None) == (newest, "newest")
    assert ui_command._experiment(tracker, "mini") == (mini_store["parent"].info.experiment_id, "mini")
    assert main(["ui", "--experiment", "no-such", "--tracking-uri", mini_store["uri"]]) == 2
    assert "experiments there: " in capsys.readouterr().err


def test_the_ui_page_defaults_to_the_machine_learning_view_unless_the_user_chose() -> None:
    """Issue 46: a configuration run opened from the runs view landed in MLflow's GenAI view
    ("quickstart › Evaluations"): the view is the browser's remembered choice, GenAI by default."""
    page = ui_app.with_default_view("<!doctype html><html><head><script src=main.js></script></head></html>")
    assert page.startswith("<!doctype html><html><head><script>try{if(localStorage.getItem(\"mlflow.workflowType_v1\")"
                           "===null)localStorage.setItem(\"mlflow.workflowType_v1\",JSON.stringify(\"machine_learning\"))")
    assert page.index("localStorage") < page.index("main.js")  # before MLflow reads it
    assert "--app-name" in ui_command.server_command("sqlite:///x/mlflow.db", host="127.0.0.1", port=1, artifacts=None)
    from importlib.metadata import entry_points

    assert any(e.name == "privlab" and e.value == "privlab.platform.cli.ui_app:create_app"
               for e in entry_points(group="mlflow.app"))


def test_an_experiment_names_its_default_metric_columns_for_the_ui(mini_store: dict) -> None:
    """Issue 46: MLflow's runs table showed no metric column until one was chosen; privlab ui
    starts a browser without table state of its own on each study's headline metric and ε."""
    import json

    from privlab.platform.experiment.spec import load_spec
    from privlab.platform.run.parent_run import default_columns

    quickstart = load_spec(Path(__file__).resolve().parents[1] / "experiments" / "quickstart.toml")
    assert default_columns(quickstart) == ["abs_error_mean", "rank_error_mean", "in_event_d_rate", "passed_rate",
                                           "violation_rate", "eps_configuration"]
    tracker = mini_store["tracker"]
    experiment = tracker.client.get_experiment(mini_store["parent"].info.experiment_id)
    columns = json.loads(experiment.tags["privlab.default_columns"])
    logged = {name for child in mini_store["children"] for name in child.data.metrics}
    assert columns[-1] == "eps_configuration" and set(columns) <= logged  # every default column is a metric
    script = ui_app.default_columns_script({"7": ["abs_error_mean", "eps_configuration"]})
    states = json.loads(script.split("const s=", 1)[1].split(";for", 1)[0])
    assert list(states) == ['MLflowLocalStorage-1.1-ExperimentPage-["7"]-ReactComponentState']
    assert json.loads(states[ui_app.ui_state_key("7")])["selectedColumns"][-2:] == [
        "metrics.`abs_error_mean`", "metrics.`eps_configuration`"]
    assert "localStorage.getItem(k)===null" in script  # a state the user made is kept


@pytest.mark.slow  # MLflow's server takes ~15 s to start on 2 cores
def test_ui_starts_mlflow_on_loopback_and_stops_it(mini_store: dict) -> None:
    """``privlab ui`` for real: it prints the runs view's address once the server answers, the
    server (2 processes) listens on 127.0.0.1 only, and SIGTERM (as Ctrl-C) stops all of it."""
    group: list[int] = []
    process = subprocess.Popen([sys.executable, "-m", "privlab.platform.cli", "ui", "--tracking-uri", mini_store["uri"]],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().strip()  # type: ignore[union-attr]
        experiment_id = mini_store["parent"].info.experiment_id
        assert re.fullmatch(rf"http://127\.0\.0\.1:\d+/#/experiments/{experiment_id}/runs\?workflowType="
                            r"machine_learning", url), (url, process.stderr.read() if process.poll() is not None else "")
        import urllib.request

        port = int(url.split(":")[2].split("/")[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
            assert response.status == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
            page = response.read().decode()  # issue 46: the machine-learning view is the browser's default
        assert ui_app.DEFAULT_VIEW in page and page.index(ui_app.DEFAULT_VIEW) == page.index("<script")  # first
        group = _server_group(process.pid)
        assert len(group) == 2, group  # mlflow server and one uvicorn worker: no job runner
        listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
        assert listening.strip() and all("127.0.0.1:" in line for line in listening.splitlines()), listening
    finally:
        process.terminate()
        code = process.wait(timeout=60)
    assert code == 0, process.stderr.read()  # type: ignore[union-attr]
    assert group and [pid for pid in group if _alive(pid)] == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _server_group(parent_pid: int) -> list[int]:
    """The processes of the ``mlflow server`` session ``privlab ui`` (``parent_pid``) started."""
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(parent_pid)], capture_output=True, text=True).stdout
    sessions = [int(p) for p in children.split()]
    if not sessions:
        return []
    members = subprocess.run(["ps", "-o", "pid=", "-s", ",".join(map(str, sessions))], capture_output=True,
                             text=True).stdout
    return [int(p) for p in members.split()]
