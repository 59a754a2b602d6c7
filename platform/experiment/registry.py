"""Workloads and dataset generators, registered by name.

A mechanism adds a workload by defining a :class:`Workload` subclass in an adapter module
beside it (``workloads.py``), decorated with :func:`register_workload`, and listing that module
under the ``privlab.workloads`` entry-point group in ``pyproject.toml`` (third-party packages do
the same in theirs); the runner never changes. Dataset generators use the
``privlab.dataset_generators`` group; auditables (``privlab.auditables``) register workloads
too. See :mod:`privlab.platform.core.plugins`.

Three execution patterns exist (run by :mod:`privlab.platform.execution.worker_tasks` on :mod:`privlab.platform.execution.backends`):

* ``grid`` — each repetition of a configuration is one task (heavy units of work);
* ``trials`` — up to millions of cheap trials per configuration, batched into tasks;
* ``actor_pool`` — actors hold a large read-only state put once in the object store and
  consume a stream of work items with backpressure; outputs come back in item order.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from privlab.platform.core.errors import SpecError
from privlab.platform.core.errors import LedgerError
from privlab.platform.core.plugins import Registry, build
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import PositionalSplit, SplitPlan
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SeededSource



class Pattern(enum.StrEnum):
    GRID = "grid"
    TRIALS = "trials"
    ACTOR_POOL = "actor_pool"


class MetricKind(enum.StrEnum):
    VALUE = "value"  # a real number: mean, sd, 95% CI of the mean, min, max, quantiles
    RATE = "rate"  # a 0/1 outcome: rate with a 95% Wilson interval


@dataclasses.dataclass(frozen=True)
class Expectation:
    """What theory says the mean (or rate) of a metric is: ``relation`` ``value``.

    ``relation`` is ``"="`` (equals), ``">="`` (at least) or ``"<="`` (at most). A result is
    consistent with it when the metric's 95% confidence interval [low, high] contains
    ``value`` (``"="``), reaches it (``">="``: high ≥ value) or reaches down to it (``"<="``:
    low ≤ value): a two-sided test at level 5%, which a correct mechanism fails by chance in
    about one check in twenty.
    """

    value: float
    relation: str = "="

    def __post_init__(self) -> None:
        if self.relation not in ("=", ">=", "<="):
            raise ValueError(f"relation ({self.relation!r}) must be one of '=', '>=', '<='")

    def holds(self, low: float, high: float) -> bool:
        """Whether the interval [low, high] is consistent with the expectation."""
        if self.relation == ">=":
            return high >= self.value
        if self.relation == "<=":
            return low <= self.value
        return low <= self.value <= high

    def __str__(self) -> str:
        symbol = {"=": "=", ">=": "≥", "<=": "≤"}[self.relation]
        return f"{symbol} {self.value:.4g}"


def check_declared_partitions(workload: Workload, params: Any, ledger: Ledger, *, who: str) -> None:
    """Raise unless a trial's ``ledger`` holds exactly the partitions the workload plans
    (:meth:`Workload.partitions`), each with a split the trial drew, of the planned kind.

    Raises:
        LedgerError: the trial declared a partition it did not plan, left a planned one
            undeclared, or declared one with another kind of split or none drawn.
    """
    planned = [(parent, tuple(parts), plan.kind) for parent, parts, plan in workload.partitions(params)]
    declared = [(parent, tuple(parts), getattr(ledger.split_of(parent, parts), "kind", None))
                for parent, parts in ledger.partitions]
    drawn = all(isinstance(ledger.split_of(parent, parts), PositionalSplit) for parent, parts in ledger.partitions)
    if declared != planned or not drawn:
        raise LedgerError(f"{who} holds partitions {[(p, k) for p, _, k in declared]} but planned "
                          f"{[(p, k) for p, _, k in planned]}, each with a split the trial draws; a trial must declare "
                          "exactly its workload's partitions() with the splits it cut its data by")


class Workload(abc.ABC):
    """What a study computes for one configuration.

    Subclasses set ``name``, ``pattern``, ``Params`` (a frozen keyword-only dataclass
    validated in ``__post_init__``) and ``metrics``; grid and trials workloads implement
    :meth:`run_trial`, actor-pool workloads implement :class:`ActorPoolWorkload`'s methods.
    """

    name: ClassVar[str]
    pattern: ClassVar[Pattern]
    Params: ClassVar[type]
    metrics: ClassVar[Mapping[str, MetricKind]]
    #: Metrics computed from the aggregated ones by :meth:`derive` (names only, for specs).
    derived_metrics: ClassVar[tuple[str, ...]] = ()
    #: True when each trial receives a freshly generated dataset from the spec's generator.
    uses_dataset: ClassVar[bool] = False
    #: True to keep every unit's values (a repetition, e.g. one attempt of a release flow): a
    #: row each in the configuration's per-unit table (its row of the parent's result parts), and with
    #: ``[tracking] unit_runs = true`` also an MLflow run each, nested under the parent run.
    unit_runs: ClassVar[bool] = False
    #: True for diagnostic workloads that only tests and benchmarks use: they run like any
    #: other, but ``privlab workloads`` lists them only with ``--all``.
    hidden: ClassVar[bool] = False
    #: True when :meth:`report` reads the configurations' reservoir samples
    #: (``StudyResults.reservoirs``): a run keeps them only for such workloads, unless
    #: ``[tracking] reservoirs = "all"``.
    reads_reservoirs: ClassVar[bool] = False

    def plan(self, params: Any) -> list[PrivacyEvent]:
        """The DP steps one trial will charge, in order (checked against the budget up front
        and against what every trial actually charged). Empty for non-private workloads."""
        return []

    def partitions(self, params: Any) -> list[tuple[str, tuple[str, ...], SplitPlan]]:
        """The partitions each trial cuts its data into, each ``(parent scope, part scopes, plan)``
        with the :class:`~privlab.platform.dp.positional_split.SplitPlan` of the split it draws
        (e.g. a DiPriMe forest's trees, a permutation of positions). The runner composes them in
        parallel in the configuration's plan; each trial must declare them on its ledger with the
        split it drew (:meth:`privlab.platform.dp.ledger.Ledger.declare_partition`), which the
        runner checks (:func:`check_declared_partitions`). Default: none.

        Privacy:
            Parallel composition holds over the drawn split only as
            :mod:`privlab.platform.dp.positional_split` argues for its kind and the run's relation;
            the ledger refuses a plan whose kind does not hold.
        """
        return []

    def declare_partitions(self, params: Any, ledger: Ledger) -> Ledger:
        """Declare :meth:`partitions` as planned on ``ledger`` (fresh, nothing spent) and return
        it: the ledger is then the configuration's plan (``Ledger.is_plan``); each trial charges
        ``ledger.for_trial()`` and declares the splits it draws."""
        for parent, parts, plan in self.partitions(params):
            ledger.declare_partition(parent, parts, split=plan)
        return ledger

    def cost_class(self, params: Any) -> str:
        """A name shared by the configurations whose units cost about the same compute time.

        The runner learns the seconds a unit takes per study and class, to size batches and to
        estimate the time left; a study whose configurations differ in cost by orders of
        magnitude (a Metropolis chain beside a closed-form mechanism) names a class for each
        kind, so that neither borrows the other's cost. Default: one class per study.
        """
        return ""

    def warm_up(self, params: Any) -> None:
        """Pay in this process, before any unit is timed, what only a process's first unit would
        pay: compiling JIT kernels (numba), loading large tables. Default: nothing.

        The runner calls it on the driver for every configuration before the progress bar
        starts, and in a worker before each range of units it times, so it must return at
        once when repeated (cache what it did, e.g. with ``functools.cache``). A first unit
        that compiles would stall inside a study and price every unit left at its cost.
        """

    def data_key(self, params: Any) -> str | None:
        """A key naming the dataset :meth:`load_data` reads for ``params`` (None: no dataset).

        Workloads that read their own data (a file named in their parameters) return e.g. the
        path; the runner loads each key once on the driver, before anything is logged or run,
        puts the frame in the object store once and passes it to every trial as ``data``.
        """
        return None

    def load_data(self, params: Any) -> pd.DataFrame:
        """Load and validate the dataset named by :meth:`data_key` (errors name the problem)."""
        raise NotImplementedError(f"workload {self.name!r} names a dataset but does not implement load_data")

    def data_files(self, params: Any) -> tuple[str, ...]:
        """The files :meth:`load_data` reads the data from (not the files describing it: a
        space, a settings file); the run logs them, hashed, as the MLflow dataset its runs read.
        Default: none (the data is generated, or the workload does not say)."""
        return ()

    def metric_kinds(self, params: Any) -> Mapping[str, MetricKind]:
        """The metrics one trial returns for ``params``. Default: the class's ``metrics``.

        A workload whose metrics depend on its parameters (one per acceptance criterion a
        settings file declares, say) leaves ``metrics`` empty and overrides this; its studies
        then log every metric (a spec's ``metrics`` selection needs static names).
        """
        return self.metrics

    def run_metrics(self, params: Any) -> tuple[str, ...] | None:
        """The metrics a configuration's MLflow run shows (their logged statistics,
        ``[tracking] run_statistics``); the others are kept with every statistic in the run's
        result parts and index, which ``compare``, ``shortlist`` and the reports read. Default
        None: every metric of the configuration. A workload with many detail metrics per
        configuration names its headline ones: each MLflow metric value costs ~470 bytes of
        sqlite (a row of two tables and four indexes), most of a small configuration's store.
        """
        return None

    def facets(self, params: Any) -> Mapping[str, Mapping[str, Any]]:
        """Sub-configurations evaluated together inside every trial, ``label → their params``.

        A workload that computes several related configurations from the same random draws
        (common random numbers, e.g. eight tree settings read off one fit) names its metrics
        ``"{label}/{metric}"``; the summary, MLflow and ``privlab compare`` then show one entry
        per facet, with the metric named ``metric`` and the facet's params merged into the
        configuration's. Metrics without a label are shared by every facet. Default: none.
        """
        return {}

    def derive(self, params: Any, summary: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        """Metrics computed from the aggregated summary (e.g. an empirical ε from two rates)."""
        return {}

    def expectations(self, params: Any) -> Mapping[str, Expectation]:
        """What theory says some metrics' means or rates are, ``metric → Expectation``; the
        run's and ``privlab compare``'s tables show each beside the metric with a verdict.
        Default: none (results with no theoretical value to check)."""
        return {}

    def report(self, results: Any) -> Mapping[str, str | bytes]:
        """The study's results page: files (markdown, PNG) drawn from a finished run.

        ``results`` is a :class:`privlab.platform.results.reports.StudyResults`. The runner logs the
        files under ``report/<study>/`` on the parent run; ``privlab report RUN_ID`` redraws
        them later. The default draws nothing (the generic plots still are logged).
        """
        return {}

    def run_trial(
        self, params: Any, *, data: pd.DataFrame | None, source: SeededSource, ledger: Ledger
    ) -> Mapping[str, float]:
        """One trial (or repetition): returns one value per metric.

        ``source`` is the trial's own seeded source: DP mechanisms draw their noise from it, and
        simulation that is not DP noise (data, neighbours, candidates) draws from ``source.rng``,
        the same stream.
        """
        raise NotImplementedError(f"workload {self.name!r} does not implement run_trial")


class ActorPoolWorkload(Workload):
    """A workload whose items are processed by actors that share a large read-only state."""

    pattern = Pattern.ACTOR_POOL

    @abc.abstractmethod
    def item_count(self, params: Any) -> int:
        """How many work items the configuration streams (for progress and resume)."""

    @abc.abstractmethod
    def build_state(self, params: Any, *, data: pd.DataFrame | None, rng: np.random.Generator) -> Any:
        """The read-only state (put once in the object store and shared by every actor)."""

    @abc.abstractmethod
    def items(self, params: Any, *, rng: np.random.Generator) -> Iterator[Any]:
        """The stream of work items, produced lazily on the driver in a fixed order."""

    @abc.abstractmethod
    def process(self, state: Any, item: Any, *, source: SeededSource) -> Mapping[str, np.ndarray]:
        """Process one item with its own seeded source; returns per-record arrays, one per
        metric, of equal length."""


def _check_workload(name: str, cls: type[Workload]) -> None:
    for attribute in ("name", "pattern", "Params", "metrics"):
        if not hasattr(cls, attribute):
            raise TypeError(f"workload {cls.__qualname__} must define {attribute!r}")
    if not (dataclasses.is_dataclass(cls.Params) and cls.Params.__dataclass_params__.frozen):
        raise TypeError(f"{cls.__qualname__}.Params must be a frozen dataclass")


WORKLOADS: Registry[type[Workload]] = Registry(
    "workload", groups=("privlab.workloads", "privlab.auditables"), check=_check_workload)


def register_workload(cls: type[Workload]) -> type[Workload]:
    """Class decorator: register ``cls`` under ``cls.name`` (names are unique)."""
    _check_workload(getattr(cls, "name", ""), cls)
    return WORKLOADS.register(cls.name, cls)


@dataclasses.dataclass(frozen=True)
class DatasetGenerator:
    """A named synthetic-data generator: ``generate(params, rng) -> DataFrame``."""

    name: str
    Params: type
    generate: Callable[[Any, np.random.Generator], pd.DataFrame]


GENERATORS: Registry[DatasetGenerator] = Registry(
    "dataset generator", groups=("privlab.dataset_generators",), listed_as="registered generators",
    identity=lambda g: f"{g.generate.__module__}.{g.generate.__qualname__}")


def register_dataset_generator(
    name: str, params_type: type
) -> Callable[[Callable[[Any, np.random.Generator], pd.DataFrame]], Callable[..., pd.DataFrame]]:
    """Decorator registering a dataset generator with its frozen parameter dataclass."""

    def decorate(fn: Callable[[Any, np.random.Generator], pd.DataFrame]) -> Callable[..., pd.DataFrame]:
        GENERATORS.register(name, DatasetGenerator(name=name, Params=params_type, generate=fn))
        return fn

    return decorate


def get_workload(name: str) -> Workload:
    """A fresh instance of the workload registered as ``name``."""
    return WORKLOADS.get(name)()


def workload_names() -> list[str]:
    return WORKLOADS.names()


def get_dataset_generator(name: str) -> DatasetGenerator:
    return GENERATORS.get(name)


#: The one builder from spec tables (:func:`privlab.platform.core.plugins.build`), under the name workloads use.
build_params = build


def params_dict(params: Any) -> dict[str, Any]:
    """A parameter dataclass as a plain dict (for logging and keys)."""
    return dataclasses.asdict(params)


def check_metric_names(workload: Workload, requested: Sequence[str], *, where: str) -> tuple[str, ...]:
    allowed = list(workload.metrics) + list(workload.derived_metrics)
    if not workload.metrics:  # metrics depend on the parameters: log them all
        if requested:
            raise SpecError(f"{where}: workload {workload.name!r} decides its metrics from its parameters; "
                            "remove 'metrics' (every metric is logged)")
        return ()
    unknown = [m for m in requested if m not in allowed]
    if unknown:
        raise SpecError(
            f"{where}: unknown metric(s) {', '.join(map(repr, unknown))} for workload "
            f"{workload.name!r}; allowed metrics: {', '.join(allowed)}"
        )
    return tuple(requested) if requested else tuple(allowed)
