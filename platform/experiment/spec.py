"""Experiment specs: TOML files that declare a run completely, validated before any work.

A spec has one study (workload, params, grid, repetitions or trials at the top level) or
several (``[[study]]`` tables, each with a unique ``name``)::

    name = "laplace-check"
    description = "Empirical error of the Laplace mechanism"
    seed = 20261122                    # root seed; omitted -> fresh OS entropy, logged
    workload = "laplace_mean"
    repetitions = 200                  # grid pattern; trials pattern uses `trials`
    metrics = ["abs_error"]            # optional subset of the workload's metrics
    grid_points = 4                    # optional: random sample of 4 grid points
    [params]                           # fixed workload parameters
    lower = 0.0
    [grid]                             # lists -> Cartesian product
    epsilon = [0.1, 1.0]
    "dataset.n" = [100, 1000]          # a grid over the dataset generator's parameters
    [dataset]                          # generator + params, or path + columns (schema)
    generator = "beta"
    [budget]                           # cap per configuration (each is a candidate release)
    epsilon = 1.0
    [tracking]
    experiment = "laplace-check"
    [execution]
    batch_size = "auto"

``--set key=value`` edits the document before validation (dotted keys; ``study.NAME.key``
addresses one study of a multi-study spec). Every problem is a :class:`SpecError` naming the
key and the allowed values.

Relative file paths (``[dataset] path`` and the workload parameters marked as files) are
resolved against the spec's folder when the spec file writes them, and against the working
directory when ``--set`` gives them: a path typed on the command line is the user's.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from privlab.platform.core.errors import LedgerError, PrivlabError, SpecError
from privlab.platform.core.toml_files import MAX_DEPTH, nesting_depth, read_toml
from privlab.platform.core.validation import (BOOLEAN, ConstraintSpec, InstanceOf, Interval, Options, Text,
                                              check_path_text, closest, shown, validate_parameters)
from privlab.platform.dp.accountants import SELECTABLE as SELECTABLE_ACCOUNTANTS
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.seeding import canonical_params, grid_sampling_generator, stable_key
from privlab.platform.experiment import registry
from privlab.platform.experiment.datasets import FileDataset, GeneratedDataset, dataset_from_spec
from privlab.platform.experiment.registry import Pattern
from privlab.platform.experiment.spec_keys import BUDGET_KEYS, EXECUTION_KEYS, STUDY_KEYS, TOP_KEYS, TRACKING_KEYS
from privlab.platform.experiment.spec_overrides import apply_override, rebase_override_paths

MAX_EXPERIMENT_NAME = 500  # MLflow refuses longer experiment names (mlflow.utils.validation)
MODES = ("research",)
RUN_STATISTICS = ("centre", "summary", "all")
RESERVOIRS = ("reports", "all")
MAX_UNITS = 10**10
MAX_SEED = 2**128 - 1  # a root seed may be the 128-bit OS entropy a run without one logged


@dataclasses.dataclass(frozen=True, kw_only=True)
class BudgetSpec:
    epsilon: float
    delta: float = 0.0
    accountant: str = "basic"
    delta_slack: float | None = None

    def ledger(self) -> Ledger:
        return Ledger(
            epsilon_cap=self.epsilon,
            delta_cap=self.delta,
            accountant=self.accountant,
            delta_slack=self.delta_slack,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrackingSpec:
    experiment: str
    uri: str | None = None
    artifacts: bool = True
    plots: bool = True
    checkpoint_interval_s: float = 30.0
    # How long a run rides out a tracking server that cannot be reached before it stops with
    # its results kept for the resume (platform/tracking/tracking_outage.py, platform/run/outbox.py).
    outage_wait_s: float = 120.0
    # Per-unit detail of a ``unit_runs`` workload (each release-flow attempt): always a parquet
    # table on its configuration's run; with ``unit_runs = true`` also one MLflow run per unit.
    unit_runs: bool = False
    # Which statistics of each metric a configuration run logs as MLflow metrics: "centre" (its
    # mean or rate), "summary" (also the 95% interval that `privlab compare` shows) or "all" (also
    # sd, min, max, quantiles, counts). Every statistic is always in the run's result parts and
    # the run's index, which `privlab compare` reads.
    run_statistics: str = "centre"
    # Which configurations keep their reservoir sample (each metric's kept per-trial values):
    # "reports" (those whose workload's results page reads it) or "all".
    reservoirs: str = "reports"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExecutionSpec:
    batch_size: int | None = None  # None = auto (sized so a task takes target_task_seconds)
    target_task_seconds: float = 1.0
    max_retries: int = 3
    max_in_flight_per_worker: int = 2
    # Configurations a spec may expand to; counted from the grid's shape before any is built.
    max_configurations: int = 100_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class Study:
    name: str
    workload: str
    pattern: Pattern
    units: int  # repetitions (grid), trials (trials) or items (actor pool) per configuration
    metrics: tuple[str, ...]
    dataset: FileDataset | GeneratedDataset | None
    key: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class Configuration:
    """One point of a study's grid: what a child run in MLflow records."""

    id: str
    study: str
    index: int
    workload: str
    params: Mapping[str, Any]  # all workload parameters (fixed + grid point)
    dataset_params: Mapping[str, Any]  # generator parameters (fixed + grid point)
    grid_point: Mapping[str, Any]  # only the varying keys
    study_key: int
    config_key: int
    units: int

    def flat_params(self) -> dict[str, Any]:
        flat = {f"params.{k}": v for k, v in self.params.items()}
        flat.update({f"dataset.{k}": v for k, v in self.dataset_params.items()})
        return flat

    def label(self) -> str:
        point = ", ".join(f"{k}={v}" for k, v in self.grid_point.items())
        return f"{self.study}[{point}]" if point else self.study


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExperimentSpec:
    name: str
    description: str
    seed: int | None
    mode: str
    studies: tuple[Study, ...]
    configurations: tuple[Configuration, ...]
    budget: BudgetSpec | None
    tracking: TrackingSpec
    execution: ExecutionSpec
    source: Path
    document: Mapping[str, Any]  # the resolved TOML document (after --set)
    text: str = ""  # the spec as written (before --set), logged as spec.toml
    overrides: tuple[str, ...] = ()  # the --set values applied to it, as given

    @property
    def sha256(self) -> str:
        return hashlib.sha256(canonical_params(self.document).encode()).hexdigest()

    def study(self, name: str) -> Study:
        return next(s for s in self.studies if s.name == name)

    def new_ledger(self) -> Ledger:
        if self.budget is None:
            return Ledger(epsilon_cap=None)
        return self.budget.ledger()


def load_spec(path: str | Path, overrides: Sequence[str] = ()) -> ExperimentSpec:
    """Read, override and validate a spec; nothing runs until this has succeeded.

    A relative path in the file is resolved against the spec's folder; one given by an
    override, against the working directory (:func:`rebase_override_paths`).
    """
    path = Path(path)
    document, text = read_toml(path, what="spec file")
    written = [apply_override(document, override) for override in overrides]
    for owner, parts in written:
        rebase_override_paths(owner, parts, spec_dir=path.resolve().parent, cwd=Path.cwd())
    return parse_spec(document, source=path, text=text, overrides=overrides)


def _unknown(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SpecError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed keys: {', '.join(sorted(allowed))}{closest(unknown, allowed)}"
        )


def _table(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(f"{where} must be a table, got {type(value).__name__}")
    return dict(value)


UNITS = Interval(numbers.Integral, 1, MAX_UNITS, closed="both")
"""A count of repetitions, trials, grid points or configurations."""

BUDGET_CONSTRAINTS: dict[str, list[ConstraintSpec]] = {
    "epsilon": [Interval(numbers.Real, 0, None, closed="neither")],
    "delta": [Interval(numbers.Real, 0, 1, closed="both")],
    "accountant": [Options(str, SELECTABLE_ACCOUNTANTS)],
    "delta_slack": [Interval(numbers.Real, 0, 1, closed="right")],
}
TRACKING_CONSTRAINTS: dict[str, list[ConstraintSpec]] = {
    "experiment": [Text()], "uri": [InstanceOf(str, "a string")],
    "artifacts": [BOOLEAN], "plots": [BOOLEAN], "unit_runs": [BOOLEAN],
    "checkpoint_interval_s": [Interval(numbers.Real, 0, None, closed="left")],
    "outage_wait_s": [Interval(numbers.Real, 0, None, closed="left")],
    "run_statistics": [Options(str, RUN_STATISTICS)], "reservoirs": [Options(str, RESERVOIRS)],
}
EXECUTION_CONSTRAINTS: dict[str, list[ConstraintSpec]] = {
    "batch_size": [Options(str, ("auto",)), UNITS],
    "target_task_seconds": [Interval(numbers.Real, 0, None, closed="neither")],
    "max_retries": [Interval(numbers.Integral, 0, None, closed="left")],
    "max_in_flight_per_worker": [UNITS], "max_configurations": [UNITS],
}
TOP_CONSTRAINTS: dict[str, list[ConstraintSpec]] = {
    "seed": [Interval(numbers.Integral, 0, None, closed="left", largest=MAX_SEED)], "mode": [Options(str, MODES)]}
TOP_HINTS = {"mode": "release runs use `privlab release`, not `privlab run`"}


def _check_table(table: Mapping[str, Any], constraints: Mapping[str, Sequence[ConstraintSpec]], where: str, *,
                 hints: Mapping[str, str] | None = None) -> None:
    """Check the keys of a spec table that have declared constraints (every mistake a
    :class:`SpecError` starting with ``where``; absent keys take their defaults)."""
    validate_parameters(constraints, {key: table[key] for key in constraints if key in table},
                        value_error=SpecError, type_error=SpecError, prefix=f"{where} " if where else "", hints=hints)


def _units(value: Any, where: str, key: str) -> int:
    _check_table({key: value}, {key: [UNITS]}, where)
    return int(value)


def _numeric_identity(value: Any) -> Any:
    """``1.0`` and ``1`` are the same grid value (TOML and Python compare them equal)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def parse_spec(document: Mapping[str, Any], *, source: Path, text: str = "",
               overrides: Sequence[str] = ()) -> ExperimentSpec:
    if nesting_depth(document) > MAX_DEPTH:  # before anything recurses over it (deepcopy, JSON)
        raise SpecError(f"spec: tables or arrays nest more than {MAX_DEPTH} levels deep (with --set values); "
                        "no spec needs that many, check it")
    document = copy.deepcopy(dict(document))
    _unknown(document, TOP_KEYS, "spec")
    name = document.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpecError("spec: 'name' (a non-empty string) is required")
    description = document.get("description", "")
    if not isinstance(description, str):
        raise SpecError("spec: 'description' must be a string")
    _check_table(document, TOP_CONSTRAINTS, "", hints=TOP_HINTS)
    seed = document.get("seed")
    mode = document.get("mode", "research")
    budget = _parse_budget(document.get("budget"))
    tracking = _parse_tracking(document.get("tracking"), default_experiment=name)
    execution = _parse_execution(document.get("execution"))

    spec_dir = source.resolve().parent
    default_dataset = document.get("dataset")
    if "study" in document:
        single = sorted((STUDY_KEYS - {"name", "description", "dataset"}) & set(document))
        if single:
            raise SpecError(
                f"spec: {', '.join(map(repr, single))} belong inside each [[study]] when the "
                "spec declares several studies"
            )
        raw_studies = document["study"]
        if not isinstance(raw_studies, list) or not raw_studies:
            raise SpecError("spec: 'study' must be a non-empty array of tables ([[study]])")
    else:
        raw_studies = [{k: v for k, v in document.items() if k in STUDY_KEYS} | {"name": name}]

    studies: list[Study] = []
    configurations: list[Configuration] = []
    seen: set[str] = set()
    for position, raw in enumerate(raw_studies):
        raw = _table(raw, f"study #{position + 1}")
        study_name = raw.get("name")
        if not isinstance(study_name, str) or not study_name.strip():
            raise SpecError(f"study #{position + 1}: 'name' (a non-empty string) is required")
        if study_name in seen:
            raise SpecError(f"study names must be unique; {study_name!r} appears twice")
        seen.add(study_name)
        if "dataset" not in raw and default_dataset is not None:
            raw["dataset"] = default_dataset
        study, configs = _parse_study(raw, spec_dir=spec_dir, seed=seed, budget=budget,
                                      room=execution.max_configurations - len(configurations),
                                      limit=execution.max_configurations, single="study" not in document)
        studies.append(study)
        configurations.extend(configs)

    return ExperimentSpec(
        name=name,
        description=description,
        seed=seed,
        mode=mode,
        studies=tuple(studies),
        configurations=tuple(configurations),
        budget=budget,
        tracking=tracking,
        execution=execution,
        source=source,
        document=document,
        text=text,
        overrides=tuple(overrides),
    )


def _parse_budget(raw: Any) -> BudgetSpec | None:
    if raw is None:
        return None
    table = _table(raw, "[budget]")
    _unknown(table, BUDGET_KEYS, "[budget]")
    if "epsilon" not in table:
        raise SpecError("[budget]: 'epsilon' is required (privlab has no default ε)")
    _check_table(table, BUDGET_CONSTRAINTS, "[budget]")
    accountant = table.get("accountant", "basic")
    slack = table.get("delta_slack")
    if accountant != "basic" and slack is None:
        what = "δ'' of Dwork & Roth Thm 3.20" if accountant == "advanced" else "the δ at which it reads its ε"
        raise SpecError(f"[budget]: accountant {accountant!r} needs delta_slack ({what})")
    budget = BudgetSpec(
        epsilon=float(table["epsilon"]),
        delta=float(table.get("delta", 0.0)),
        accountant=accountant,
        delta_slack=None if slack is None else float(slack),
    )
    try:  # the ledger's own checks (δ < 1, δ'' ≤ δ for advanced) are spec problems here
        budget.ledger()
    except LedgerError as error:
        raise SpecError(f"[budget]: {error}") from None
    return budget


def _parse_tracking(raw: Any, *, default_experiment: str) -> TrackingSpec:
    table = _table(raw, "[tracking]")
    _unknown(table, TRACKING_KEYS, "[tracking]")
    _check_table(table, TRACKING_CONSTRAINTS, "[tracking]")
    experiment = table.get("experiment", default_experiment)
    if len(experiment) > MAX_EXPERIMENT_NAME:
        where = "[tracking] experiment" if "experiment" in table else "the spec's name (the default experiment)"
        raise SpecError(f"{where} is {len(experiment):,} characters long; MLflow accepts experiment names of at "
                        f"most {MAX_EXPERIMENT_NAME}: set a shorter [tracking] experiment")
    return TrackingSpec(
        experiment=experiment,
        uri=table.get("uri"),
        artifacts=table.get("artifacts", True),
        plots=table.get("plots", True),
        unit_runs=table.get("unit_runs", False),
        run_statistics=table.get("run_statistics", "centre"),
        reservoirs=table.get("reservoirs", "reports"),
        checkpoint_interval_s=float(table.get("checkpoint_interval_s", 30.0)),
        outage_wait_s=float(table.get("outage_wait_s", 120.0)),
    )


def _parse_execution(raw: Any) -> ExecutionSpec:
    table = _table(raw, "[execution]")
    _unknown(table, EXECUTION_KEYS, "[execution]")
    _check_table(table, EXECUTION_CONSTRAINTS, "[execution]")
    batch = table.get("batch_size", "auto")
    return ExecutionSpec(
        batch_size=None if batch == "auto" else batch,
        target_task_seconds=float(table.get("target_task_seconds", 1.0)),
        max_retries=table.get("max_retries", 3),
        max_in_flight_per_worker=table.get("max_in_flight_per_worker", 2),
        max_configurations=table.get("max_configurations", 100_000),
    )


def _grid_point(index: int, axes: Sequence[tuple[str, list[Any]]]) -> dict[str, Any]:
    """The ``index``-th point of the Cartesian product of ``axes`` in ``itertools.product`` order."""
    values: list[Any] = []
    for _, choices in reversed(axes):
        index, position = divmod(index, len(choices))
        values.append(choices[position])
    return dict(zip([key for key, _ in axes], reversed(values), strict=True))


PATH_COMPONENT_BYTES = 255  # the longest file or folder name Linux and macOS file systems take
_NOT_IN_NAMES = frozenset("/\\") | {chr(c) for c in range(32)} | {"\x7f"}


def _check_study_name(name: str, workload: type[registry.Workload], *, where: str, single: bool) -> None:
    """A study's name names files and folders of the run's results (``<study>-<metric>.png``,
    the report's ``<study>/`` pages): refuse one that cannot be a path component, before any
    work (a 600-character name used to fail on its plots after every configuration had run).

    Raises:
        SpecError: the name is ``.`` or ``..``, holds ``/``, ``\\`` or a control character, or
            is too long for ``<study>-<metric>.png`` to fit :data:`PATH_COMPONENT_BYTES`.
    """
    what = "the spec's name (its study's name)" if single else "the study's name"
    if name in (".", "..") or any(c in _NOT_IN_NAMES for c in name):
        raise SpecError(f"{where}: {what} names files and folders of the results (plots, report pages), so it cannot "
                        "be '.' or '..' nor hold '/', '\\' or control characters; rename it")
    suffix = max(len(f"-{metric}.png".encode()) for metric in (*workload.metrics, *workload.derived_metrics, ""))
    limit = PATH_COMPONENT_BYTES - suffix
    size = len(name.encode())
    if size > limit:
        raise SpecError(f"{where}: {what} is {size:,} bytes long (UTF-8); it names the results' files "
                        f"('<name>-<metric>.png', at most {PATH_COMPONENT_BYTES} bytes), so with workload "
                        f"{workload.name!r}'s metrics it may take at most {limit} bytes; shorten it")


def _parse_study(
    raw: dict[str, Any], *, spec_dir: Path, seed: int | None, budget: BudgetSpec | None, room: int, limit: int,
    single: bool = False,
) -> tuple[Study, list[Configuration]]:
    name = raw["name"]
    where = f"study {name!r}" if len(name) <= 60 else f"study {name[:40]!r}… ({len(name):,} characters)"
    _unknown(raw, STUDY_KEYS, where)
    workload_name = raw.get("workload")
    if not isinstance(workload_name, str):
        raise SpecError(
            f"{where}: 'workload' is required; registered workloads: "
            f"{', '.join(registry.workload_names())}"
        )
    try:
        workload = registry.get_workload(workload_name)
    except PrivlabError as error:
        raise SpecError(f"{where}: {error}") from None
    _check_study_name(name, workload, where=where, single=single)

    pattern = workload.pattern
    if pattern is Pattern.GRID:
        if "trials" in raw:
            raise SpecError(f"{where}: workload {workload_name!r} runs repetitions (grid pattern); use 'repetitions', not 'trials'")
        units = _units(raw.get("repetitions", 1), where, "repetitions")
    elif pattern is Pattern.TRIALS:
        if "repetitions" in raw:
            raise SpecError(f"{where}: workload {workload_name!r} runs trials (trials pattern); use 'trials', not 'repetitions'")
        if "trials" not in raw:
            raise SpecError(f"{where}: 'trials' (trials per configuration) is required")
        units = _units(raw["trials"], where, "trials")
    else:
        for key in ("repetitions", "trials"):
            if key in raw:
                raise SpecError(f"{where}: workload {workload_name!r} streams items (actor-pool pattern); '{key}' does not apply")
        units = 0  # set per configuration from the workload's item count

    metrics = raw.get("metrics", [])
    if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
        raise SpecError(f"{where}: 'metrics' must be a list of metric names")
    metric_names = registry.check_metric_names(workload, metrics, where=where)

    dataset = None
    dataset_base: dict[str, Any] = {}
    if raw.get("dataset") is not None:
        dataset = dataset_from_spec(_table(raw["dataset"], f"{where} [dataset]"), spec_dir=spec_dir, where="[dataset]")
        if isinstance(dataset, GeneratedDataset):
            try:
                generator = registry.get_dataset_generator(dataset.generator)
            except PrivlabError as error:
                raise SpecError(f"[dataset]: {error}") from None
            dataset_base = dict(dataset.params)
    elif workload.uses_dataset:
        raise SpecError(f"{where}: workload {workload_name!r} needs a [dataset] (a generator or a file)")

    base = _table(raw.get("params"), f"{where} [params]")
    grid = _table(raw.get("grid"), f"{where} [grid]")
    axes: list[tuple[str, list[Any]]] = []
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SpecError(f"{where} [grid] {key} must be a non-empty list of values, got {shown(values)}")
        if len({canonical_params({"v": _numeric_identity(v)}) for v in values}) != len(values):
            raise SpecError(f"{where} [grid] {key} lists a value twice: {values!r}")
        if key.startswith("dataset."):
            if not isinstance(dataset, GeneratedDataset):
                raise SpecError(f"{where} [grid] {key}: only a generated [dataset] has parameters to vary")
            if key.removeprefix("dataset.") in dataset_base:
                raise SpecError(
                    f"{where}: {key.removeprefix('dataset.')!r} is both a fixed [dataset.params] value "
                    f"and a [grid] axis {key!r}; keep one"
                )
        elif key in base:
            raise SpecError(f"{where}: {key!r} is both a fixed [params] value and a [grid] axis; keep one")
        axes.append((key, values))

    # Count from the grid's shape first: a 10⁷-point grid must be refused, not built.
    grid_size = math.prod(len(values) for _, values in axes)
    study_key = stable_key("study", name)
    sample = raw.get("grid_points")
    if sample is not None:
        sample = _units(sample, where, "grid_points")
        if sample > grid_size:
            raise SpecError(f"{where} grid_points ({sample}) must be at most the grid size ({grid_size})")
        if seed is None:
            raise SpecError(f"{where}: grid_points samples the grid with the root seed; set 'seed'")
    count = grid_size if sample is None else sample
    if count > room:
        shape = " × ".join(str(len(values)) for _, values in axes) or "1"
        raise SpecError(
            f"{where} expands to {count:,} configurations (grid {shape}{'' if sample is None else ', sampled'}), "
            f"which takes the spec over its limit of {limit:,} ([execution] max_configurations); sample the grid "
            "with grid_points, split the spec, or raise the limit")
    if sample is None:
        points = [dict(zip([k for k, _ in axes], combo, strict=True)) for combo in itertools.product(*[v for _, v in axes])]
    else:
        chosen = grid_sampling_generator(seed, study_key).choice(grid_size, size=sample, replace=False)
        points = [_grid_point(int(i), axes) for i in sorted(chosen)]

    probe_ledger = budget.ledger() if budget is not None else Ledger(epsilon_cap=None)
    configurations = []
    for index, point in enumerate(points):
        params_values = dict(base) | {k: v for k, v in point.items() if not k.startswith("dataset.")}
        # Seeds are keyed by the parameters as written (file paths relative to the spec's folder),
        # so a spec gives the same results from any checkout; file parameters are then resolved.
        written = seed_key_params(workload.Params, registry.params_dict(registry.build_params(
            workload.Params, _paths_relative_to_spec(workload.Params, params_values, spec_dir),
            where=f"{where} params {point or ''}".rstrip())))
        params = registry.build_params(workload.Params, _resolve_paths(workload.Params, params_values, spec_dir),
                                       where=f"{where} params {point or ''}".rstrip())
        data_values = dataset_base | {k.removeprefix("dataset."): v for k, v in point.items() if k.startswith("dataset.")}
        if isinstance(dataset, GeneratedDataset):
            registry.build_params(generator.Params, data_values, where=f"[dataset] params {point or ''}".rstrip())
        # Budget check before any work: what one trial will charge must fit the cap.
        plan = workload.plan(params)
        try:
            workload.declare_partitions(params, probe_ledger.fresh()).check_plan(plan)
        except PrivlabError as error:
            raise type(error)(f"{where} configuration {point}: {error}") from None
        config_units = units if pattern is not Pattern.ACTOR_POOL else workload.item_count(params)  # type: ignore[attr-defined]
        full_params = registry.params_dict(params)
        configurations.append(
            Configuration(
                id=f"{name}-{index:03d}",
                study=name,
                index=index,
                workload=workload_name,
                params=full_params,
                dataset_params=data_values,
                grid_point=point,
                study_key=study_key,
                config_key=stable_key(canonical_params(written), canonical_params(data_values)),
                units=config_units,
            )
        )
    study = Study(
        name=name, workload=workload_name, pattern=pattern, units=units,
        metrics=metric_names, dataset=dataset, key=study_key,
    )
    return study, configurations


def seed_key_params(params_type: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters a configuration's seeds are keyed by: all of them, except a field declared
    ``metadata={"seed_key": "when_set"}`` while it is unset (None), a field declared
    ``metadata={"seed_key": "unless_default"}`` while it holds its default, and a field declared
    ``metadata={"seed_key": "never"}`` (how the work is cut up, e.g. a batch size, which a
    workload guarantees does not change its results).

    A workload's ``Params`` can thus gain an optional field without changing the seeds of every
    spec written before it existed.
    """
    fields = dataclasses.fields(params_type)
    when_set = {f.name for f in fields if f.metadata.get("seed_key") == "when_set"}
    defaults = {f.name: f.default for f in fields if f.metadata.get("seed_key") == "unless_default"}
    never = {f.name for f in fields if f.metadata.get("seed_key") == "never"}
    return {k: v for k, v in values.items() if k not in never and not (k in when_set and v is None)
            and not (k in defaults and v == defaults[k])}


def _paths_relative_to_spec(params_type: type, values: Mapping[str, Any], spec_dir: Path) -> dict[str, Any]:
    """``values`` with each absolute file parameter written relative to the spec's folder, as
    the seeds see it: where a checkout and its data lie must not change a configuration's
    streams, so ``/a/shared/x.csv`` from a spec in ``/a/main/exp`` keys as ``../../shared/x.csv``,
    the same as that relative path written in the spec or given with ``--set`` from any folder."""

    def relative(value: str) -> str:
        if not Path(value).is_absolute():
            return value
        try:
            return os.path.relpath(Path(value).resolve(), spec_dir.resolve())
        except ValueError:  # another drive (Windows): no relative path exists
            return value

    return _with_paths_mapped(params_type, values, relative)


def _resolve_paths(params_type: type, values: Mapping[str, Any], spec_dir: Path) -> dict[str, Any]:
    """Resolve the parameters a workload marks as files (``field(metadata={"path": True})``, a
    path or a list of paths) relative to the spec's folder, as ``[dataset] path`` is; one the
    values leave out is None."""
    absent = {f.name: None for f in dataclasses.fields(params_type) if f.metadata.get("path")}
    return _with_paths_mapped(params_type, absent | dict(values), lambda value: value if Path(value).is_absolute()
                              else str((spec_dir / value).resolve()))


def _with_paths_mapped(params_type: type, values: Mapping[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    """``values`` with ``change`` applied to each non-empty path a field marked
    ``metadata={"path": True}`` holds (a path or a list of paths); other values as they are."""

    def one(value: Any) -> Any:
        return change(value) if isinstance(value, str) and value else value

    out = dict(values)
    for field in dataclasses.fields(params_type):
        if field.metadata.get("path") and field.name in out:
            value = out[field.name]
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str) and text:  # before any file operation can fail on it
                    check_path_text(text, f"params.{field.name} ({shown(text)})")
            out[field.name] = [one(v) for v in value] if isinstance(value, list) else one(value)
    return out
