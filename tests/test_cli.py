"""The `privlab` command end to end: run → MLflow → compare / ledger, errors and exit codes."""

from __future__ import annotations

import argparse
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from privlab.platform.cli.commands import finished_summary
from privlab.platform.cli.main import main
from privlab.platform.tracking.configuration_index import SUMMARY_METRIC_NAMES, read_index
from privlab.platform.tracking.result_parts import read_results
from privlab.platform.tracking.sqlite_reader import SqliteStoreReader
from privlab.platform.tracking.tracker import Tracker


@pytest.fixture(scope="module")
def finished_store(tmp_path_factory: pytest.TempPathFactory, mini_spec_text: str) -> tuple[dict, str]:
    """One finished serial run of the mini spec in a store of its own, shared by the tests that
    only read it: its summary and the store's URI."""
    folder = tmp_path_factory.mktemp("finished")
    spec, summary_path = folder / "mini.toml", folder / "summary.json"
    spec.write_text(mini_spec_text)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    code = main(["run", str(spec), "--serial", "--no-progress", "--tracking-uri", uri,
                 "--summary-json", str(summary_path)])
    assert code == 0
    return json.loads(summary_path.read_text()), uri


@pytest.fixture
def finished_run(finished_store: tuple[dict, str]) -> dict:
    return finished_store[0]


@pytest.fixture
def finished_uri(finished_store: tuple[dict, str]) -> str:
    return finished_store[1]


def test_summary_json_has_the_observable_interface(finished_run: dict) -> None:
    summary = finished_run
    assert {"run_id", "experiment", "epsilon_total", "delta_total", "configurations", "timing"} <= set(summary)
    assert summary["experiment"] == "mini"
    assert summary["epsilon_total"] == 1.0  # the largest per-configuration ledger (ε = 1.0 configurations)
    assert summary["delta_total"] == 0.0
    entry = summary["configurations"][0]
    assert {"id", "params", "metrics"} <= set(entry)
    assert entry["params"]["params.epsilon"] == 0.5
    assert entry["metrics"]["eps_total"] == 0.5
    assert "wall_seconds" in summary["timing"] and "timing" not in entry["metrics"]
    assert [e["id"] for e in summary["configurations"]] == ["mean-000", "mean-001", "loss-000", "loss-001", "seeds-000"]


def test_summary_json_leaves_the_entries_to_the_parts_and_finished_summary_puts_them_back(
        finished_run: dict, finished_uri: str) -> None:
    # Its size no longer grows with the configurations (a births grid's was 835 KB), yet shortlist
    # and report read the whole summary as the run returned it, every timing included.
    run_id = finished_run["run_id"]
    for store in (Tracker(finished_uri), SqliteStoreReader.open(finished_uri)):
        logged = json.loads(store.read_text(run_id, "summary.json"))
        assert "configurations" not in logged and "configurations" not in logged["timing"]
        _, summary = finished_summary(store, run_id, hint="")
        assert summary["configurations"] == finished_run["configurations"]
        assert summary["timing"]["configurations"] == finished_run["timing"]["configurations"]
        assert {k: v for k, v in summary.items() if k not in ("tracking", "timing")} == \
            {k: v for k, v in finished_run.items() if k not in ("tracking", "timing")}


def test_mlflow_holds_parent_children_params_metrics_artifacts_and_tags(finished_run: dict, finished_uri: str) -> None:
    tracker = Tracker(finished_uri)
    parent = tracker.get_run(finished_run["run_id"])
    tags = parent.data.tags
    for key in ("privlab.version", "privlab.git_commit", "privlab.root_seed", "privlab.mode", "privlab.workers",
                "privlab.ray_nodes", "privlab.spec_sha256"):
        assert key in tags, key
    assert tags["privlab.root_seed"] == "7" and tags["privlab.mode"] == "research"
    # Issue 34 item 8: the parent's ε is the largest configuration's, named so (not a total);
    # configurations_done counts configurations as the `configurations` param does.
    assert parent.data.metrics["eps_max_configuration"] == 1.0 and "eps_total" not in parent.data.metrics
    assert parent.data.metrics["configurations_done"] == float(parent.data.params["configurations"]) == 5
    assert parent.data.metrics["configuration_runs"] == 5
    artifacts = set(tracker.list_artifacts(parent.info.run_id))
    assert {"results.parquet", "summary.json", "spec.toml", "plots"} <= artifacts
    plots = tracker.list_artifacts(parent.info.run_id, "plots")
    assert any(p.endswith("mean-abs_error.png") for p in plots)

    children = tracker.child_runs(parent.info.experiment_id, parent.info.run_id)
    assert len(children) == 5
    child = next(c for c in children if c.data.tags["privlab.config_id"] == "loss-001")
    assert child.data.params["params.epsilon"] == "1.0"
    metrics = child.data.metrics
    assert metrics["eps_configuration"] == 1.0 and "eps_total" not in metrics  # issue 46: the parent's name scheme
    assert child.info.run_name == "loss-001 epsilon=1.0"  # its id first, then what its study varies
    assert child.info.end_time - child.info.start_time >= 1  # its real span, not 0 ms
    assert 0.0 <= metrics["in_event_d_rate"] <= 1.0 and "in_event_d_ci_low" not in metrics
    # MLflow holds each metric's centre ([tracking] run_statistics = "centre", the default) and
    # ε; the ledger's detail (δ, each step's ε) is the run's ledger tag, and every statistic, the
    # timing and the ledger are in the parent run's result parts and its index.
    assert "in_event_d_trials" not in metrics and "in_event_d_successes" not in metrics
    assert not any(k.startswith(("eps_step_", "delta_total", "timing_")) for k in metrics)
    # The ledger whole is an artifact; the tag says what it totals and where it is (issue 46).
    assert child.data.tags["privlab.ledger"] == ("ε = 1 over 1 step(s) (laplace); every step, with its sensitivity "
                                                 "and noise scale: Artifacts › ledger.txt")
    ledger = tracker.read_text(child.info.run_id, "ledger.txt")
    assert ledger is not None and "count_release" in ledger and "laplace" in ledger
    assert child.data.params["params.epsilon"] == "1.0" and all(k.startswith("params.") for k in child.data.params)
    (stored,) = [row for row in read_results(tracker, parent.info.run_id).values() if row.run_id == child.info.run_id]
    result = stored.entry
    assert result["metrics"]["in_event_d_trials"] == 3000
    assert any(k.startswith("eps_step_00_") for k in result["metrics"]) and stored.timing["wall_seconds"] > 0
    assert {k: result["metrics"][SUMMARY_METRIC_NAMES.get(k, k)] for k in metrics} == metrics
    (indexed,) = [row for row in read_index(tracker, parent.info.run_id) if row.config_id == "loss-001"]
    assert indexed.metrics["in_event_d_trials"] == 3000 and indexed.metrics["in_event_d_rate"] == metrics["in_event_d_rate"]
    assert indexed.metrics["timing_wall_seconds"] == stored.timing["wall_seconds"]
    assert tracker.list_artifacts(child.info.run_id) == ["ledger.txt"]  # its ledger; results are in the parts


def test_compare_csv_table_parquet_and_plot(finished_run: dict, finished_uri: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "mini", "--format", "csv", "--tracking-uri", finished_uri]) == 0
    # issue 14 item 9: one CSV table per study (it was one table with every study's columns)
    tables = read_csv_tables(capsys.readouterr().out)
    # issue 34 item 11: in the spec's order, as `privlab run` prints them
    assert [list(t["config_id"]) for t in tables.values()] == [["mean-000", "mean-001"], ["loss-000", "loss-001"],
                                                                ["seeds-000"]]
    row = tables["mean"].set_index("config_id").loc["mean-001"]
    expected = next(e for e in finished_run["configurations"] if e["id"] == "mean-001")["metrics"]
    assert row["abs_error_mean"] == pytest.approx(expected["abs_error_mean"], rel=1e-12)

    assert main(["compare", "mini", "--metric", "abs_error", "--tracking-uri", finished_uri,
                 "--plot", str(tmp_path / "p.png")]) == 0
    table = capsys.readouterr().out
    assert "mean-000" in table and "abs_error" in table and "[" in table
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    out = tmp_path / "c.parquet"
    assert main(["compare", "mini", "--format", "parquet", "--output", str(out), "--tracking-uri", finished_uri]) == 0
    assert len(pd.read_parquet(out)) == 5
    assert main(["compare", "mini", "--format", "parquet", "--tracking-uri", finished_uri]) == 2
    assert "--output" in capsys.readouterr().err
    # issue 34 item 3: bad input (2, not 4), naming the closest metrics and the count, not all of them
    assert main(["compare", "mini", "--metric", "abs_eror", "--tracking-uri", finished_uri]) == 2
    err = capsys.readouterr().err
    assert "unknown metric 'abs_eror'; closest: abs_error" in err and "metric names recorded in 'mini'" in err
    assert "eps_step_" not in err and len(err) < 400


def read_csv_tables(text: str) -> dict[str, pd.DataFrame]:
    """`compare --format csv` output: one table per study, each after a `# study: NAME` line."""
    blocks = [b for b in text.split("# study: ") if b.strip()]
    return {b.split("\n", 1)[0]: pd.read_csv(io.StringIO(b.split("\n", 1)[1])) for b in blocks}


def test_ledger_command(finished_run: dict, finished_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", finished_run["run_id"], "--tracking-uri", finished_uri]) == 0
    text = capsys.readouterr().out
    assert "== loss-001 ==" in text and "laplace" in text and "count_release" in text
    # Issue 46: in the spec's order (mean, loss, seeds), as run and compare list them, not alphabetically.
    assert [line.strip("= ") for line in text.splitlines() if line.startswith("== ")] == [
        "mean-000", "mean-001", "loss-000", "loss-001", "seeds-000"]
    assert main(["ledger", finished_run["run_id"], "--json", "--tracking-uri", finished_uri]) == 0
    ledgers = json.loads(capsys.readouterr().out)
    assert set(ledgers) == {"mean-000", "mean-001", "loss-000", "loss-001", "seeds-000"}
    model = ledgers["seeds-000"]["events"]  # the DP model: m + m(m − 1) entropies and m count tables, m(m + 1) steps
    assert {e["step"] for e in model} == {"pd.structure", "pd.parameters"} and len(model) == 11 * 12
    # D_T and D_P are a positional split: each half's steps compose sequentially to exactly ε = 1.
    for step in ("pd.structure", "pd.parameters"):
        assert math.fsum(e["epsilon"] for e in model if e["step"] == step) == pytest.approx(1.0, rel=1e-12)
    [partition] = ledgers["seeds-000"]["partitions"]  # the configuration's plan: each trial draws its split
    assert partition == {"parent": "data", "parts": ["data/structure", "data/parameters", "data/seeds"],
                         "split": {"kind": "permuted", "planned": True}}
    event = ledgers["mean-000"]["events"][0]
    assert event["mechanism"] == "laplace" and event["epsilon"] == 0.5
    assert event["sensitivity"] == pytest.approx(1 / 50) and event["noise_scale"] == pytest.approx(1 / 50 / 0.5)
    assert main(["ledger", "0" * 32, "--tracking-uri", finished_uri]) == 2  # a wrong id is bad input (issue 46)


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        ('bogus = 1\n', 2, "unknown key(s) 'bogus'"),
        ('[budget]\nepsilon = 0.1\n', 3, "budget"),
    ],
)
def test_bad_specs_fail_before_work_with_clear_errors(tmp_path: Path, extra: str, code: int,
                                                      message: str, capsys: pytest.CaptureFixture[str]) -> None:
    tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = tmp_path / "bad.toml"
    spec.write_text('name = "bad"\nseed = 1\nworkload = "laplace_mean"\nrepetitions = 2\n' + extra
                    + '[params]\nepsilon = 0.5\nn = 10\n')
    assert main(["run", str(spec), "--serial", "--tracking-uri", tracking_uri]) == code
    assert message in capsys.readouterr().err
    assert not (tmp_path / "mlflow.db").exists(), "nothing may be written before the spec validates"


def test_missing_spec_unknown_workload_and_bad_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "none.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    spec = tmp_path / "s.toml"
    spec.write_text('name = "s"\nworkload = "no_such"\n')
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "unknown workload 'no_such'" in err and "laplace_mean" in err
    assert main(["validate", "experiments/quickstart.toml", "--set", "nonsense"]) == 2
    assert "key=value" in capsys.readouterr().err


def test_default_tracking_store_is_embedded_in_the_working_directory(
    mini_spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["run", str(mini_spec), "--serial", "--no-progress", "--set", "study.loss.trials=200"]) == 0
    assert (work / "mlflow.db").is_file()
    assert "privlab compare 'mini'" in capsys.readouterr().out


def test_console_script_help_and_subcommands() -> None:
    for args in ([], ["run"], ["compare"], ["ledger"], ["cluster"], ["validate"], ["workloads"]):
        result = subprocess.run([sys.executable, "-m", "privlab.platform.cli", *args, "--help"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert "usage: privlab" in result.stdout


def test_help_lists_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    # issue 34 items 2 and 3: 5 (not verified) and 6 (an audit's violation) were missing
    from privlab.platform.cli import commands

    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    codes = {value for name, value in vars(commands).items() if name.startswith("EXIT_") and isinstance(value, int)}
    for code in codes - {commands.EXIT_BUG}:
        assert f" {code} " in out, code
    assert "6 violation found (audit)" in out and "5 not verified (verify)" in out


def test_cluster_status_without_a_cluster_is_an_answer_not_a_failure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # issue 34 item 3: it exited 4 ("execution/tracking failure")
    assert main(["cluster", "status", "--state-dir", str(tmp_path / "none")]) == 0
    assert "no local cluster is running" in capsys.readouterr().out


def _subparsers(parser: argparse.ArgumentParser, path: str = "privlab"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {choice.dest for choice in action._choices_actions if choice.help}
            for name, sub in action.choices.items():
                assert name in helped, f"`{path} {name}` has no help line"
                yield from _subparsers(sub, f"{path} {name}")


def test_every_subcommand_and_argument_has_a_help_line() -> None:
    from privlab.platform.cli.main import build_parser

    missing = [f"{path}: {action.dest}" for path, parser in _subparsers(build_parser()) for action in parser._actions
               if not isinstance(action, argparse._SubParsersAction) and not action.help]
    assert missing == []


def test_help_renders_for_people_and_lists_every_file_a_command_writes(capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 34 item 12: raw reStructuredText and "a privlab.commands plug-in" in user help, and
    # `release --help` did not name transcript-seal.txt.
    from privlab.mechanisms.plausible_deniability.generation_run import BUNDLE_FILES
    from privlab.mechanisms.release import bundle
    from privlab.mechanisms.tabular import bundle_files
    from privlab.platform.cli.main import build_parser

    helps = {path: " ".join(parser.format_help().split()) for path, parser in _subparsers(build_parser())}
    for path, text in helps.items():
        assert "``" not in text and "plug-in" not in text and ":meth:" not in text, path
    for name in (*bundle.PUBLIC_FILES, bundle_files.CHECKSUMS, bundle.TRANSCRIPT):
        assert name in helps["privlab release"], name
    for name in (*BUNDLE_FILES, bundle_files.CHECKSUMS):
        assert name in helps["privlab pd-generate"], name
    assert main(["workloads", "--all"]) == 0
    out = capsys.readouterr().out
    assert "``" not in out and ":mod:" not in out and ":meth:" not in out and "module docstring" not in out


def test_validate_lists_the_configurations_in_aligned_columns(capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 34 item 12: "  laplace_mean-000  laplace_mean  laplace_mean[epsilon=0.1, n=100]  units=300"
    assert main(["validate", str(Path(__file__).resolve().parents[1] / "experiments" / "quickstart.toml")]) == 0
    first, header, *rows = capsys.readouterr().out.splitlines()
    assert first == "quickstart: valid; 16 configuration(s), 127,008 unit(s) of work"
    assert header.split() == ["config", "workload", "units", "grid", "point"]
    starts = [header.index(word) for word in ("workload", "grid point")]
    for row in rows:
        assert all(row[start - 2:start] == "  " and row[start] != " " for start in starts), row
        assert row[header.index("grid point") - 3] != " "  # units are right-aligned
    assert rows[0].split()[-2:] == ["epsilon=0.1,", "n=100"] and rows[-1].split()[-2:] == ["4,000", "-"]


def test_workloads_hides_test_only_workloads_and_describes_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    assert "crash_once" not in out.split("(2 test-only")[0] and "cpu_burn" not in out.split("(2 test-only")[0]
    assert "--all" in out
    # the whole description (not only its first line), the metrics with their kinds, the parameters
    assert "KL(M(D)‖M(D')) = ε + e^{−ε} − 1" in out
    assert "within_scale (rate)" in out and "theoretical_abs_error (derived)" in out
    assert "parameters: epsilon (required), n (required), lower=0.0" in out
    assert main(["workloads", "--all"]) == 0
    assert "crash_once  (trials pattern, test-only)" in capsys.readouterr().out
    from privlab.platform.experiment.registry import get_workload

    assert get_workload("crash_once").hidden  # still registered: tests and benchmarks run it


def test_compare_unknown_experiment_exits_2_and_lists_the_existing_ones(
        finished_run: dict, finished_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "no-such", "--tracking-uri", finished_uri]) == 2
    err = capsys.readouterr().err
    assert "no experiment named 'no-such'" in err and "'mini'" in err


def test_read_only_commands_do_not_create_a_store_in_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    for args in (["compare", "quickstart"], ["ledger", "0" * 32], ["runs"], ["report", "0" * 32, "--out", "r"],
                 ["shortlist", "0" * 32, "--out", "s.toml"]):
        assert main(args) == 2, args
        assert "no MLflow tracking store" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_wrong_run_id_is_bad_input_and_compare_names_the_run_it_shows(
        finished_run: dict, finished_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 46: a wrong run id exited 4 (an execution failure), and compare did not say which of
    the experiment's runs its tables were."""
    for args in (["ledger", "0" * 32], ["report", "0" * 32, "--out", str(tmp_path / "r")],
                 ["compare", "mini", "--run", "0" * 32], ["shortlist", "0" * 32, "--out", str(tmp_path / "s.toml")]):
        assert main([*args, "--tracking-uri", finished_uri]) == 2, args
        err = capsys.readouterr().err
        assert "0" * 32 in err and "Traceback" not in err, err
    assert not (tmp_path / "r").exists() and not (tmp_path / "s.toml").exists()
    assert main(["compare", "mini", "--tracking-uri", finished_uri]) == 0
    err = capsys.readouterr().err
    assert f"privlab: run {finished_run['run_id']} of 'mini', started " in err and "(its latest; --run ID" in err


def test_resume_of_an_unknown_run_changes_nothing_in_the_store(finished_uri: str, mini_spec: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30 item 5: exit 2 before the experiment is created or anything is written."""
    tracker = Tracker(finished_uri)
    experiments = tracker.experiment_names()
    spec = mini_spec.parent / "other.toml"
    spec.write_text(mini_spec.read_text().replace('experiment = "mini"', 'experiment = "other"'))
    assert main(["run", str(spec), "--serial", "--resume", "UNKNOWN", "--tracking-uri", finished_uri]) == 2
    assert "--resume UNKNOWN: no such run in the tracking store" in capsys.readouterr().err
    assert tracker.experiment_names() == experiments


def test_runs_lists_the_ids_the_ledger_hint_points_to(finished_run: dict, finished_uri: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "0" * 32, "--tracking-uri", finished_uri]) == 2
    assert "`privlab runs` lists run ids" in capsys.readouterr().err
    for args in (["runs"], ["runs", "mini"]):
        assert main([*args, "--tracking-uri", finished_uri]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split()[:3] == ["run", "id", "experiment"]
        assert lines[2].split()[:2] == [finished_run["run_id"], "mini"] and "complete" in lines[2]
    assert main(["ledger", finished_run["run_id"], "--tracking-uri", finished_uri]) == 0
    capsys.readouterr()
    assert main(["runs", "nope", "--tracking-uri", finished_uri]) == 2
    assert "'mini'" in capsys.readouterr().err


def _blocks(text: str) -> dict[str, list[str]]:
    """Study tables in printed output: title line `NAME (N configurations…)` → its lines."""
    blocks: dict[str, list[str]] = {}
    for chunk in text.split("\n\n"):
        lines = chunk.strip("\n").splitlines()
        if len(lines) > 3 and set(lines[2]) <= {"-", " "}:
            blocks[lines[0].split(" (")[0]] = lines[1:]
    return blocks


def test_run_and_compare_print_the_same_tables(mini_spec: Path, tracking_uri: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(mini_spec), "--serial", "--no-progress", "--tracking-uri", tracking_uri]) == 0
    ran = _blocks(capsys.readouterr().out)
    assert main(["compare", "mini", "--tracking-uri", tracking_uri]) == 0
    compared = _blocks(capsys.readouterr().out)
    assert list(ran) == list(compared) == ["mean", "loss", "seeds"] and ran == compared  # the spec's order
    mean = ran["mean"]
    assert mean[0].split()[:3] == ["config", "epsilon", "abs_error"]  # varying parameter as its own column
    assert mean[2].startswith("mean-000  0.5 ") and "[" in mean[2]  # the configuration id, as in compare
    # the quickstart's checks against theory: the expected value and a verdict beside the metric
    assert "= 1 ok" in mean[2] or "= 1 OFF" in mean[2]
    loss = ran["loss"]
    kl = 0.5 + math.exp(-0.5) - 1
    assert f"= {kl:.4g} " in loss[2]


def test_compare_orders_an_unfinished_run_as_its_spec(mini_spec: Path, tracking_uri: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # issue 34 item 11: a run that has not finished has no index; its child runs come from a search
    assert main(["run", str(mini_spec), "--serial", "--no-progress", "--tracking-uri", tracking_uri,
                 "--max-units", str(2 * 24 + 2 * 3000)]) == 0  # mean and loss done, seeds not started
    capsys.readouterr()
    assert main(["compare", "mini", "--tracking-uri", tracking_uri]) == 0
    assert list(_blocks(capsys.readouterr().out)) == ["mean", "loss"]


def test_compare_metric_plot_has_one_panel_per_study_with_the_metric(
        finished_run: dict, finished_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from privlab.platform.results import plots

    drawn: list[list] = []
    original = plots._draw
    monkeypatch.setattr(plots, "_draw", lambda ax, points, metric: (drawn.append(list(points)),
                                                                    original(ax, points, metric)))
    assert main(["compare", "mini", "--metric", "abs_error", "--plot", str(tmp_path / "a.png"),
                 "--tracking-uri", finished_uri]) == 0
    out, err = capsys.readouterr()
    assert "recorded by mean; not by loss, seeds" in err
    assert list(_blocks(out)) == ["mean"]  # no empty tables for the studies without the metric
    assert len(drawn) == 1  # one panel: the one study that records abs_error
    points = drawn[0]
    assert [sorted(grid) for grid, _ in points] == [["epsilon"], ["epsilon"]]  # only its varying parameter
    assert all(not math.isnan(v) for _, centre in points for v in centre)
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_csv_is_one_table_per_study_and_keeps_integers(
        finished_run: dict, finished_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "mini", "--format", "csv", "--tracking-uri", finished_uri]) == 0
    text = capsys.readouterr().out
    tables = read_csv_tables(text)
    assert not any(c.startswith(("in_event", "plausible")) for c in tables["mean"].columns)  # no other study's columns
    assert tables["mean"]["params.n"].tolist() == [50, 50] and ",50," in text and ",50.0," not in text
    assert tables["loss"]["in_event_d_trials"].tolist() == [3000, 3000]
    assert main(["compare", "mini", "--format", "csv", "--study", "loss", "--tracking-uri", finished_uri]) == 0
    only = pd.read_csv(io.StringIO(capsys.readouterr().out))  # one study: a plain CSV table
    assert list(only["config_id"]) == ["loss-000", "loss-001"]
    assert main(["compare", "mini", "--study", "nope", "--tracking-uri", finished_uri]) == 2
    assert "its studies: " in capsys.readouterr().err


def test_validate_knows_release_specs_and_the_other_toml_files(capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 14 item 4: `privlab validate experiments/births/release.toml` failed with unknown keys.
    births = Path(__file__).resolve().parents[1] / "experiments" / "births"
    assert main(["validate", str(births / "release.toml")]) == 0
    out = capsys.readouterr().out
    assert "valid release spec; total ε = 10 within budget 10" in out and "102 configuration(s)" in out
    for name, kind in [("shortlist.toml", "a shortlist"), ("space.toml", "a release space"),
                       ("flow.toml", "a flow settings file")]:
        assert main(["validate", str(births / name)]) == 2
        err = capsys.readouterr().err
        assert f"is {kind}, not an experiment or release spec; it is read by" in err
    assert main(["validate", str(births / "grid.toml")]) == 0  # experiment specs as before
    assert "births-grid: valid; 1440 configuration(s)" in capsys.readouterr().out
