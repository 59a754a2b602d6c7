"""Benchmark of the tracking store at grid-search scale: configuration runs per second, bytes
per configuration and per attempt, and ``privlab compare`` on 10⁴ configurations.

0. Configuration runs (issue 31): a real grid of small configurations (``laplace_mean``, 300
   repetitions, the issue's work A) runs serially into a fresh sqlite store; its store bytes per
   configuration are printed (less an empty store's: the database, every file, and the folders'
   own 4 KiB each, as ``du`` counts them; also the slope between two grid sizes, which leaves out
   what does not grow with the configurations). The configuration runs it logged are captured
   and written again into fresh stores, timed inside the tracker: one at a time through MLflow's
   client (as before), one per transaction, and in batches as the background writer forms them
   (``configuration_runs_per_second``). Then 10⁴ of them (renumbered) are written into one store
   with their parts, index and summary as a complete run, and ``privlab compare`` reads it in a
   new process (``compare_seconds_10k_configs``).

B. The births slice's store (``--births``; needs ../shared/data/nvss): the births grid search's
   10K slice (experiments/births/grid.toml, 12 grid points of each study, 2 attempts each, on
   the NVSS 10K sample: 24 configurations, ~470 statistics each) runs serially into a fresh
   store, and again with 6 grid points of each (12 configurations). Printed: bytes per
   configuration (database, files and folders less an empty store's, / 24:
   ``store_bytes_per_configuration_births``; the run's plots, reports and tables included) and
   what each further configuration adds (the slope 12 -> 24,
   ``store_bytes_per_further_configuration_births``), with the largest items.

E. A grid end to end (``--grid N``; the issue's 10⁴ is ``--grid 10000``): ``privlab run`` of
   ``laplace_mean`` over ε (100 values) × n (N / 100 values), 100 repetitions each, plots off,
   on 2 workers into a fresh sqlite store, as a user types it (a new process); its driver's
   peak memory is read from ``/proc`` while it runs (VmHWM), its tracking time from its summary
   (seconds inside MLflow/sqlite calls on the writer's thread). Then ``privlab compare`` over
   it in a new process, best of 3. Ends with ``grid_configurations``, ``grid_process_seconds``,
   ``grid_tracking_fraction`` (tracking seconds / process wall; target ≤ 0.10),
   ``grid_driver_peak_rss_mb`` and ``compare_seconds_grid``.

A synthetic workload stands in for the release flow (no flows are run): per attempt it reports
the metrics a ``release_flow`` attempt reports with the births settings (acceptance, and for
each of 8 criteria its pass/fail, DP value, exact value, sensitivity and seconds; 5 step
timings; ε), drawn from the attempt's own stream. Runs go through the real runner, serially,
into fresh sqlite stores.

1. Store growth: N configurations × K attempts, with per-attempt detail as a table (the
   default) and as one MLflow run per attempt (``[tracking] unit_runs = true``), at two K.
   Bytes are the sqlite file plus the artifact folder, less an empty store's. Printed: the
   bytes of one configuration (its run, result.json, ledger, reservoir sample) and the bytes
   each further attempt adds (the slope between the two K), per mode.
2. ``privlab compare`` (the CLI, writing its table to a file) on one real run of M
   configurations of one attempt each, from the run's index (``configurations.parquet``, the
   default for a complete run) and from its child runs (the search it did before), both timed
   in this run, and checked to print the same table. Writing 10⁴ configuration runs takes
   ~0.1–0.3 s each here (their aggregate metrics), so 10⁴ configurations are simulated: a
   parent run whose index holds the M real rows repeated to 10⁴ (renumbered ids), through
   ``Tracker`` like a finished run's, compared from its index.

The machine is shared: the load average is printed before and after.

    python benchmarks/tracking_scale.py --quick     # M = 200; about 3 minutes on 2 cores
    python benchmarks/tracking_scale.py             # M = 1,000
    python benchmarks/tracking_scale.py --births    # part B alone (about a minute)
    python benchmarks/tracking_scale.py --grid 10000  # part E alone (several minutes)

Ends with ``configuration_runs_per_second``, ``store_bytes_per_configuration`` and
``compare_seconds_10k_configs`` (part 0), ``store_bytes_per_attempt`` (what each attempt adds
with tables, part 1), ``compare_seconds_10k_configs_index_only`` (part 2: a simulated index,
``privlab compare`` in a new process; ``..._in_process`` without the new process) and the load
average.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import io
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pandas as pd

from privlab.platform.cli.main import main as cli
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.experiment.registry import MetricKind, Pattern, Workload, register_workload
from privlab.platform.experiment.spec import load_spec
from privlab.platform.results import compare
from privlab.platform.run.run_summary import logged_summary
from privlab.platform.run.runner import RunOptions, run_experiment
from privlab.platform.tracking.configuration_index import INDEX_PATH, index_bytes, read_index
from privlab.platform.tracking.tracker import ResultRunUpload, Tracker

CRITERIA = ("marginals_absolute", "marginals_relative", "birth_weight_mean", "gestation_week_mean",
            "parity_mean", "regression_coefficients", "regression_mae", "faithfulness")
STEPS = ("transform", "fit", "sample", "project", "flow")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SyntheticParams:
    index: int

    def __post_init__(self) -> None:
        if not isinstance(self.index, int) or self.index < 0:
            raise ValueError(f"index ({self.index!r}) must be an integer ≥ 0")


@register_workload
class SyntheticAttempts(Workload):
    """An attempt's worth of release-flow-shaped metrics, drawn at random (no flow runs)."""

    name = "synthetic_release_attempts"
    hidden = True
    pattern = Pattern.GRID
    Params = SyntheticParams
    unit_runs = True
    metrics: Mapping[str, MetricKind] = {
        "accepted": MetricKind.RATE,
        **{f"{c}_{m}": k for c in CRITERIA for m, k in (("passed", MetricKind.RATE), ("dp", MetricKind.VALUE),
                                                         ("exact", MetricKind.VALUE), ("sensitivity", MetricKind.VALUE),
                                                         ("timing_seconds", MetricKind.VALUE))},
        **{f"timing_{s}_seconds": MetricKind.VALUE for s in STEPS},
        "epsilon_flow": MetricKind.VALUE,
    }

    def run_trial(self, params: SyntheticParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        rng = source.rng
        values = {name: float(rng.random() < 0.5) if kind is MetricKind.RATE else float(rng.normal())
                  for name, kind in self.metrics.items()}
        return values | {"epsilon_flow": 4.99}


def spec_text(name: str, configurations: int, attempts: int, *, unit_runs: bool) -> str:
    return (f'name = "{name}"\nseed = 16\nworkload = "synthetic_release_attempts"\nrepetitions = {attempts}\n'
            f'[grid]\nindex = {list(range(configurations))}\n'
            f'[tracking]\nexperiment = "{name}"\nplots = false\nunit_runs = {str(unit_runs).lower()}\n'
            f'[execution]\nmax_configurations = {configurations}\n')


def store_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".lock")
               and p.suffix not in (".toml",))


@contextlib.contextmanager
def in_folder(folder: Path) -> Iterator[None]:
    here = Path.cwd()
    os.chdir(folder)  # MLflow writes artifacts under the working directory
    try:
        yield
    finally:
        os.chdir(here)


def grid_run(folder: Path, configurations: int, attempts: int, *, unit_runs: bool) -> tuple[int, float, dict]:
    """(store bytes less an empty store's, seconds, summary) of one serial run in a fresh store."""
    folder.mkdir()
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    with in_folder(folder):
        tracker = Tracker(uri)
        tracker.experiment_id("scale", create=True)
        empty = store_bytes(folder)
        spec_path = folder / "scale.toml"
        spec_path.write_text(spec_text("scale", configurations, attempts, unit_runs=unit_runs))
        began = time.perf_counter()
        summary = run_experiment(load_spec(spec_path), RunOptions(serial=True, tracking_uri=uri, progress=False))
        seconds = time.perf_counter() - began
    return store_bytes(folder) - empty, seconds, summary


def timed_compare(folder: Path, *, run_id: str, from_index: bool) -> tuple[float, int]:
    """Seconds of ``privlab compare scale --run RUN_ID --output FILE`` (and the table's bytes)."""
    out = folder / ("from-index.txt" if from_index else "from-children.txt")
    original = compare.read_index_table
    if not from_index:
        compare.read_index_table = lambda tracker, run_id: None  # type: ignore[assignment]
    try:
        began = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli(["compare", "scale", "--run", run_id, "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}",
                        "--output", str(out)])
        seconds = time.perf_counter() - began
    finally:
        compare.read_index_table = original  # type: ignore[assignment]
    if code != 0:
        raise SystemExit(f"privlab compare failed with exit code {code}")
    return seconds, out.stat().st_size


def fresh_process_compare(folder: Path, run_id: str) -> float:
    """Wall seconds of ``python -m privlab.platform.cli compare`` in a new process."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "privlab.platform.cli", "compare", "scale", "--run", run_id,
                    "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}", "--output", str(folder / "fresh.txt")],
                   check=True, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


def simulated_parent(folder: Path, run_id: str, configurations: int) -> str:
    """A complete parent run whose index repeats ``run_id``'s rows to ``configurations`` rows."""
    tracker = Tracker(f"sqlite:///{folder / 'mlflow.db'}")
    rows = read_index(tracker, run_id)
    assert rows is not None
    simulated = [dataclasses.replace(rows[i % len(rows)], config_id=f"scale-{i:05d}") for i in range(configurations)]
    parent = tracker.get_run(run_id)
    with in_folder(folder):
        large = tracker.start_parent_run(
            parent.info.experiment_id, name="simulated", params={}, description="simulated index",
            root_seed=16, mode="research", spec_name="scale", spec_sha256="-", command="tracking_scale.py",
            version="-", git_commit="-", driver={})
        tracker.mark_complete(large, {"configurations_done": float(configurations)})
        tracker.log_texts(large, {INDEX_PATH: index_bytes(simulated)})
        tracker.close_parent_run(large, "FINISHED")
    return large


SMALL_EPSILONS = [round(0.05 * i, 2) for i in range(1, 21)]


def small_spec(configurations: int) -> str:
    """The issue's work A: ``laplace_mean`` configurations of 300 repetitions (ε × n grid)."""
    sizes = [100 * (i + 1) for i in range(max(1, configurations // len(SMALL_EPSILONS)))]
    return ('name = "small"\nseed = 31\nworkload = "laplace_mean"\nrepetitions = 300\n'
            '[params]\nlower = 0.0\nupper = 1.0\n'
            f'[grid]\nepsilon = {SMALL_EPSILONS}\nn = {sizes}\n'
            '[budget]\nepsilon = 2.0\n[tracking]\nexperiment = "small"\n')


def disk_bytes(folder: Path) -> int:
    """Files' sizes plus 4 KiB per folder (what a folder takes on ext4), lock files left out."""
    files = store_bytes(folder)
    return files + 4096 * sum(1 for p in folder.rglob("*") if p.is_dir())


def small_grid(folder: Path, configurations: int) -> tuple[int, int, list[ResultRunUpload], dict]:
    """(store bytes, files only, bytes on disk) less an empty store's, the configuration runs it
    sent (deep copies, unsent) and the summary of a serial run of ``configurations`` small ones."""
    folder.mkdir(parents=True)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    captured: list[ResultRunUpload] = []
    send = Tracker.send_results

    def capture(self: Tracker, uploads: list[ResultRunUpload]) -> list[str]:
        captured.extend(copy.deepcopy([u for u in uploads if not u.finished]))
        return send(self, uploads)

    with in_folder(folder):
        Tracker(uri).experiment_id("small", create=True)
        empty_files, empty_disk = store_bytes(folder), disk_bytes(folder)
        spec_path = folder / "small.toml"
        spec_path.write_text(small_spec(configurations))
        Tracker.send_results = capture  # type: ignore[method-assign]
        try:
            summary = run_experiment(load_spec(spec_path), RunOptions(serial=True, tracking_uri=uri, progress=False))
        finally:
            Tracker.send_results = send  # type: ignore[method-assign]
    return store_bytes(folder) - empty_files, disk_bytes(folder) - empty_disk, captured, summary


def fresh_uploads(uploads: list[ResultRunUpload], experiment_id: str, parent_id: str, copies: int) -> list[ResultRunUpload]:
    """``copies`` × ``uploads``, unsent, renumbered (``small-c0001-003``) and under ``parent_id``."""
    out = []
    for copy_index in range(copies):
        for upload in uploads:
            fresh = dataclasses.replace(upload, experiment_id=experiment_id, tags=dict(upload.tags), run_id=None)
            config_id = f"{upload.config_id}-c{copy_index:04d}" if copies > 1 else upload.config_id
            fresh.tags.update({"privlab.config_id": config_id, "mlflow.parentRunId": parent_id})
            if copies > 1:
                entry = json.loads(upload.result)
                fresh.result = json.dumps(entry | {"id": config_id}, separators=(",", ":"))
            out.append(fresh)
    return out


def write_rate(folder: Path, uploads: list[ResultRunUpload], *, bulk: bool, batch: int, copies: int = 1
               ) -> tuple[float, Tracker, str, list[ResultRunUpload]]:
    """Configuration runs per second inside the tracker, writing ``uploads`` (× ``copies``) into a
    fresh store in batches of ``batch``; with the tracker, the parent run and the sent uploads."""
    folder.mkdir(parents=True)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    with in_folder(folder):
        tracker = Tracker(uri, bulk=bulk)
        experiment_id = tracker.experiment_id("small", create=True)
        parent = tracker.start_parent_run(
            experiment_id, name="replay", params={}, description="configuration runs written again", root_seed=31,
            mode="research", spec_name="small", spec_sha256="-", command="tracking_scale.py", version="-",
            git_commit="-", driver={})
        sent = fresh_uploads(uploads, experiment_id, parent, copies)
        tracker.seconds = 0.0
        for start in range(0, len(sent), batch):
            tracker.send_results(sent[start:start + batch])
    return len(sent) / tracker.seconds, tracker, parent, sent


def complete_replay(tracker: Tracker, parent: str, sent: list[ResultRunUpload], summary: dict) -> None:
    """Make ``parent`` a complete run of ``sent``: its index and summary.json, as a run ends."""
    from privlab.platform.tracking.configuration_index import IndexRow, run_params_of

    rows = []
    for upload in sent:
        entry = json.loads(upload.result)
        metrics = {k: float(v) for k, v in entry["metrics"].items()} | \
            {f"timing_{k}": float(v) for k, v in (upload.timing or {}).items()}
        rows.append(IndexRow(config_id=entry["id"], study=entry["study"], workload=entry["workload"],
                             run_id=upload.run_id or "", params=run_params_of(entry), metrics=metrics))
    logged = logged_summary(summary | {"run_id": parent})
    tracker.mark_complete(parent, {"configurations_done": float(len(sent))})
    tracker.log_texts(parent, {INDEX_PATH: index_bytes(rows), "summary.json": json.dumps(logged)})
    tracker.close_parent_run(parent, "FINISHED")


def configuration_runs(root: Path, small: int) -> dict[str, float]:
    """Part 0 (see the module's docstring); returns its figures."""
    figures: dict[str, float] = {}
    half = small // 2
    sizes = {}
    for n in (half, small):
        began = time.perf_counter()
        files, disk, captured, summary = small_grid(root / f"small-{n}", n)
        sizes[n] = (files, disk)
        print(f"  a real grid of {n} small configurations (serial): {time.perf_counter() - began:5.1f} s; store "
              f"{files / n:8,.0f} bytes per configuration (files), {disk / n:8,.0f} with the folders", flush=True)
    slope = (sizes[small][1] - sizes[half][1]) / (small - half)
    figures["store_bytes_per_configuration"] = sizes[small][1] / small
    figures["store_bytes_per_configuration_files"] = sizes[small][0] / small
    figures["store_bytes_per_further_configuration"] = slope
    print(f"  each further configuration adds {slope:,.0f} bytes (with the folders; slope {half} -> {small})")
    print(f"  the run sent {len(captured)} configuration runs (a batch forms while the writer writes)", flush=True)
    rates = {}
    for label, bulk, batch in (("MLflow's client, one run at a time (before)", False, 1),
                               ("one transaction per run", True, 1),
                               ("batches of 100 (the writer's batches)", True, 100)):
        rate, *_ = write_rate(root / f"rate-{bulk}-{batch}", captured, bulk=bulk, batch=batch)
        rates[(bulk, batch)] = rate
        print(f"  {label:<48} {rate:8.1f} configuration runs/s", flush=True)
    copies = max(1, 10_000 // len(captured))
    rate, tracker, parent, sent = write_rate(root / "rate-10k", captured, bulk=True, batch=200, copies=copies)
    print(f"  {len(sent):,} configuration runs into one store, batches of 200: {rate:8.1f} runs/s", flush=True)
    figures["configuration_runs_per_second"] = rates[(True, 100)]
    figures["configuration_runs_per_second_10k"] = rate
    figures["configuration_runs_per_second_mlflow_client"] = rates[(False, 1)]
    figures["configuration_runs_per_second_one_per_transaction"] = rates[(True, 1)]
    with in_folder(root / "rate-10k"):
        complete_replay(tracker, parent, sent, summary)
    folder = root / "rate-10k"
    fresh_compare(folder, "small", parent)  # writes Python's bytecode cache, as a user's first command does
    runs = [fresh_compare(folder, "small", parent) for _ in range(3)]
    figures["compare_seconds_10k_configs"] = min(wall for wall, _ in runs)
    figures["compare_cpu_seconds_10k_configs"] = min(cpu for _, cpu in runs)
    print(f"  privlab compare of {len(sent):,} real configuration runs, a new process: "
          f"{', '.join(f'{w:.2f} s ({c:.2f} s CPU)' for w, c in runs)}", flush=True)
    return figures


def fresh_compare(folder: Path, experiment: str, run_id: str) -> tuple[float, float]:
    """(wall, CPU) seconds of ``privlab compare`` (as a user types it) in a new process, with
    Python's bytecode cache on as a user has it (a warm-up run writes it first)."""
    import resource

    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "privlab.platform.cli", "compare", experiment, "--run", run_id,
                    "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}", "--output", str(folder / "fresh.txt")],
                   check=True, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


NVSS_10K = Path(__file__).resolve().parents[2] / "shared" / "data" / "nvss" / "birth_2019_nber_us_SINGLETON_SAMPLE10K.csv"
BIRTHS_GRID = Path(__file__).resolve().parents[1] / "experiments" / "births" / "grid.toml"


def births_slice_store(folder: Path, grid_points: int) -> tuple[int, dict[str, int]]:
    """(bytes on disk less an empty store's, the largest kinds of item) of the births slice with
    ``grid_points`` configurations of each study, 2 attempts each, run serially."""
    folder.mkdir(parents=True)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    sets = [f"study.{study}.{key}={value}" for study in ("privbayes_theta", "privbayes_degree")
            for key, value in (("grid_points", grid_points), ("repetitions", 2), ("params.data", str(NVSS_10K)))]
    with in_folder(folder):
        Tracker(uri).experiment_id("births-grid", create=True)
        empty = disk_bytes(folder)
        empty_database = (folder / "mlflow.db").stat().st_size
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli(["run", str(BIRTHS_GRID), "--serial", "--no-progress", "--tracking-uri", uri,
                        *sum((["--set", s] for s in sets), [])])
        if code != 0:
            raise RuntimeError(f"the births slice's run exited {code}")
    items: dict[str, int] = {"database": (folder / "mlflow.db").stat().st_size - empty_database}
    for path in (folder / "mlruns").rglob("*"):
        if path.is_file():
            kind = "result parts" if path.parent.name == "results" else path.name
            items[kind] = items.get(kind, 0) + path.stat().st_size
    return disk_bytes(folder) - empty, items


def births_store(root: Path) -> dict[str, float]:
    """Part B (see the module's docstring); returns its figures."""
    sizes = {}
    for grid_points in (6, 12):
        began = time.perf_counter()
        sizes[grid_points], items = births_slice_store(root / f"births-{grid_points}", grid_points)
        configurations = 2 * grid_points
        largest = ", ".join(f"{name} {size / configurations / 1e3:.1f}"
                            for name, size in sorted(items.items(), key=lambda kv: -kv[1])[:8])
        print(f"  {configurations} configurations x 2 attempts (serial, {time.perf_counter() - began:.1f} s): "
              f"{sizes[grid_points] / configurations:9,.0f} bytes per configuration; KB per configuration: {largest}",
              flush=True)
    slope = (sizes[12] - sizes[6]) / 12
    print(f"  each further configuration adds {slope:,.0f} bytes (slope 12 -> 24 configurations)")
    return {"store_bytes_per_configuration_births": sizes[12] / 24,
            "store_bytes_per_further_configuration_births": slope}


def grid_spec(configurations: int) -> str:
    """Part E's grid: ``laplace_mean`` over ε (100 values) × n (``configurations`` / 100 values)."""
    epsilons = [round(0.01 * i, 2) for i in range(1, 101)]
    sizes = [100 + 10 * i for i in range(max(1, configurations // len(epsilons)))]
    return ('name = "grid"\nseed = 31\nworkload = "laplace_mean"\nrepetitions = 100\n'
            '[params]\nlower = 0.0\nupper = 1.0\n'
            f'[grid]\nepsilon = {epsilons}\nn = {sizes}\n'
            f'[execution]\nmax_configurations = {max(configurations, 10_000)}\n'
            '[tracking]\nexperiment = "grid"\nplots = false\n')


def peak_rss_bytes(pid: int) -> int | None:
    """The process's peak resident set so far (``VmHWM``), None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def grid_end_to_end(folder: Path, configurations: int) -> dict[str, float]:
    """Part E (see the module's docstring); returns its figures."""
    folder.mkdir(parents=True)
    spec = folder / "grid.toml"
    spec.write_text(grid_spec(configurations))
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    command = [sys.executable, "-m", "privlab.platform.cli", "run", str(spec), "--workers", "2", "--no-progress",
               "--tracking-uri", uri, "--summary-json", str(folder / "summary.json")]
    began = time.perf_counter()
    process = subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    while process.poll() is None:
        peak = max(peak, peak_rss_bytes(process.pid) or 0)
        time.sleep(0.5)
    wall = time.perf_counter() - began
    if process.returncode != 0:
        raise RuntimeError(f"the grid's run exited {process.returncode}: {process.stderr.read()[-2000:]}")
    summary = json.loads((folder / "summary.json").read_text())
    timing = summary["timing"]
    phases = ", ".join(f"{name} {seconds:.1f}" for name, seconds in timing.get("phases", {}).items())
    print(f"  {len(summary['configurations']):,} configurations x 100 repetitions on 2 workers: process {wall:.1f} s, the run's own wall "
          f"{timing['wall_seconds']:.1f} s; phases (s): {phases}", flush=True)
    print(f"  tracking {timing['tracking_seconds']:.1f} s inside MLflow/sqlite calls "
          f"({timing['tracking_seconds'] / wall:.1%} of the process wall), the driver waited "
          f"{timing['tracking_blocked_seconds']:.1f} s on it; driver's peak memory {peak / 2**20:.0f} MB; "
          f"store {disk_bytes(folder) / configurations:,.0f} bytes per configuration", flush=True)
    runs = [fresh_compare(folder, "grid", summary["run_id"]) for _ in range(3)]
    print(f"  privlab compare in a new process: {', '.join(f'{w:.2f} s ({c:.2f} s CPU)' for w, c in runs)}", flush=True)
    return {"grid_configurations": float(configurations), "grid_process_seconds": wall,
            "grid_tracking_fraction": timing["tracking_seconds"] / wall, "grid_driver_peak_rss_mb": peak / 2**20,
            "compare_seconds_grid": min(w for w, _ in runs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200 real configurations for compare (1,000 without)")
    parser.add_argument("--configuration-runs-only", action="store_true", help="part 0 alone")
    parser.add_argument("--births", action="store_true", help="part B alone: the births slice's store")
    parser.add_argument("--grid", type=int, metavar="N", help="part E alone: a grid of N configurations end to end")
    args = parser.parse_args()
    if args.grid is not None:
        if args.grid < 100 or args.grid % 100:
            parser.error(f"--grid ({args.grid}) must be a multiple of 100 (ε has 100 values)")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
        print(f"\nE. a grid of {args.grid:,} configurations end to end", flush=True)
        with tempfile.TemporaryDirectory(prefix="privlab-tracking-scale-") as tmp:
            figures = grid_end_to_end(Path(tmp) / "grid", args.grid)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for name, value in figures.items():
            print(f"{name}: {value:.3f}")
        print(f"load_average_1min: {os.getloadavg()[0]:.2f}")
        return 0
    if args.births:
        if not NVSS_10K.is_file():
            print(f"part B needs the NVSS 10K sample ({NVSS_10K.name})", file=sys.stderr)
            return 2
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
        print("\nB. the births slice's store (24 configurations x 2 attempts, ~470 statistics each)", flush=True)
        with tempfile.TemporaryDirectory(prefix="privlab-tracking-scale-") as tmp:
            figures = births_store(Path(tmp))
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for name, value in figures.items():
            print(f"{name}: {value:.0f}")
        print(f"load_average_1min: {os.getloadavg()[0]:.2f}")
        return 0
    configurations, low, high = 20, 2, 20
    compared = 200 if args.quick else 1_000
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)", flush=True)
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="privlab-tracking-scale-") as tmp:
        root = Path(tmp)
        print("\n0. configuration runs: the issue's work A (laplace_mean, 300 repetitions)", flush=True)
        zero = configuration_runs(root / "zero", 200)
        if args.configuration_runs_only:
            print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            for name, value in zero.items():
                print(f"{name}: {value:.3f}")
            print(f"load_average_1min: {os.getloadavg()[0]:.2f}")
            return 0
        print(f"\n1. store growth: {configurations} configurations x K attempts, "
              f"{len(SyntheticAttempts.metrics)} metrics per attempt", flush=True)
        for unit_runs in (False, True):
            mode = "a run per attempt" if unit_runs else "tables (default)"
            sizes = {}
            for attempts in (low, high):
                size, seconds, summary = grid_run(root / f"store-{unit_runs}-{attempts}", configurations, attempts,
                                                  unit_runs=unit_runs)
                sizes[attempts] = size
                print(f"  {mode:<20} K={attempts:<3} {size / 1e6:8.2f} MB  {seconds:6.1f} s  "
                      f"({size / (configurations * attempts):9,.0f} bytes per attempt overall)", flush=True)
            per_attempt = (sizes[high] - sizes[low]) / (configurations * (high - low))
            per_configuration = sizes[low] / configurations - low * per_attempt
            print(f"  {mode:<20} each configuration {per_configuration:9,.0f} bytes, "
                  f"each further attempt {per_attempt:9,.0f} bytes", flush=True)
            results["runs" if unit_runs else "tables"] = per_attempt
            results[("runs" if unit_runs else "tables") + "_configuration"] = per_configuration
        print(f"  an attempt adds {results['runs'] / results['tables']:.0f}x fewer bytes with tables; "
              f"10^5 attempts at K=2: {(1e5 / 2 * results['tables_configuration'] + 1e5 * results['tables']) / 1e9:.2f} GB "
              f"with tables, {(1e5 / 2 * results['runs_configuration'] + 1e5 * results['runs']) / 1e9:.2f} GB "
              "with a run per attempt")

        print(f"\n2. privlab compare on one run of {compared:,} configurations x 1 attempt", flush=True)
        folder = root / "compare"
        size, seconds, summary = grid_run(folder, compared, 1, unit_runs=False)
        print(f"  the run: {seconds:.1f} s, store {size / 1e6:.1f} MB", flush=True)
        index_seconds, index_bytes = timed_compare(folder, run_id=summary["run_id"], from_index=True)
        children_seconds, children_bytes = timed_compare(folder, run_id=summary["run_id"], from_index=False)
        if (folder / "from-index.txt").read_bytes() != (folder / "from-children.txt").read_bytes():
            print("ERROR: compare from the index and from the child runs differ", file=sys.stderr)
            return 1
        print(f"  from the run's index    {index_seconds:7.2f} s")
        print(f"  from its child runs     {children_seconds:7.2f} s  (the same table, {index_bytes:,} bytes)")
        large = simulated_parent(folder, summary["run_id"], 10_000)
        large_seconds, large_bytes = timed_compare(folder, run_id=large, from_index=True)
        print(f"  10^4 configurations (the {compared:,} rows repeated): from the index {large_seconds:.2f} s "
              f"({large_bytes:,} bytes of table); from child runs, scaled linearly from {compared:,}: "
              f"{children_seconds * 10_000 / compared:.0f} s")
        fresh_seconds = fresh_process_compare(folder, large)
        print(f"  the same as a user runs it, `privlab compare` in a new process (Python, privlab and MLflow "
              f"imports included): {fresh_seconds:.2f} s")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"store_bytes_per_attempt: {results['tables']:.0f}")
    print(f"store_bytes_per_attempt_unit_runs: {results['runs']:.0f}")
    print(f"compare_seconds_10k_configs_in_process: {large_seconds:.3f}")
    print(f"compare_seconds_10k_configs_index_only: {fresh_seconds:.3f}")
    for name, value in zero.items():
        print(f"{name}: {value:.3f}")
    print(f"load_average_1min: {os.getloadavg()[0]:.2f}")
    return 0 if math.isfinite(fresh_seconds) else 1


if __name__ == "__main__":
    sys.exit(main())
