"""Workloads and dataset generators, registered by name.

A mechanism issue adds a workload by defining a :class:`Workload` subclass in its own module
decorated with :func:`register_workload` and listing the module in ``BUILTIN_MODULES``; the
runner never changes. Third-party packages register through the ``privlab.workloads`` entry
point group (each entry point names a module to import).

Three execution patterns exist (see :mod:`privlab.platform.execution`):

* ``grid`` — each repetition of a configuration is one task (heavy units of work);
* ``trials`` — up to millions of cheap trials per configuration, batched into tasks;
* ``actor_pool`` — actors hold a large read-only state put once in the object store and
  consume a stream of work items with backpressure; outputs come back in item order.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import importlib
import importlib.metadata
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from privlab.platform.errors import RegistryError, SpecError
from privlab.platform.ledger import Ledger, PrivacyEvent

BUILTIN_MODULES: tuple[str, ...] = (
    "privlab.platform.workloads.generators",
    "privlab.platform.workloads.quickstart",
    "privlab.platform.workloads.testing",
    "privlab.platform.workloads.audits",
    "privlab.mechanisms.pmse.studies",
    "privlab.mechanisms.pmse.utility_studies",
    "privlab.mechanisms.release.workloads",
)
ENTRY_POINT_GROUP = "privlab.workloads"


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
    #: True to log every unit (a repetition, e.g. one attempt of a release flow) as its own
    #: MLflow run, nested under the parent run, besides the configuration's aggregate.
    unit_runs: ClassVar[bool] = False
    #: True for diagnostic workloads that only tests and benchmarks use: they run like any
    #: other, but ``privlab workloads`` lists them only with ``--all``.
    hidden: ClassVar[bool] = False

    def plan(self, params: Any) -> list[PrivacyEvent]:
        """The DP steps one trial will charge, in order (checked against the budget up front
        and against what every trial actually charged). Empty for non-private workloads."""
        return []

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

    def metric_kinds(self, params: Any) -> Mapping[str, MetricKind]:
        """The metrics one trial returns for ``params``. Default: the class's ``metrics``.

        A workload whose metrics depend on its parameters (one per acceptance criterion a
        settings file declares, say) leaves ``metrics`` empty and overrides this; its studies
        then log every metric (a spec's ``metrics`` selection needs static names).
        """
        return self.metrics

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

        ``results`` is a :class:`privlab.platform.reports.StudyResults`. The runner logs the
        files under ``report/<study>/`` on the parent run; ``privlab report RUN_ID`` redraws
        them later. The default draws nothing (the generic plots still are logged).
        """
        return {}

    def run_trial(
        self, params: Any, *, data: pd.DataFrame | None, rng: np.random.Generator, ledger: Ledger
    ) -> Mapping[str, float]:
        """One trial (or repetition): returns one value per metric."""
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
    def process(self, state: Any, item: Any, *, rng: np.random.Generator) -> Mapping[str, np.ndarray]:
        """Process one item; returns per-record arrays, one per metric, of equal length."""


_WORKLOADS: dict[str, type[Workload]] = {}
_GENERATORS: dict[str, DatasetGenerator] = {}
_loaded = False


def register_workload(cls: type[Workload]) -> type[Workload]:
    """Class decorator: register ``cls`` under ``cls.name`` (names are unique)."""
    for attribute in ("name", "pattern", "Params", "metrics"):
        if not hasattr(cls, attribute):
            raise TypeError(f"workload {cls.__qualname__} must define {attribute!r}")
    if not (dataclasses.is_dataclass(cls.Params) and cls.Params.__dataclass_params__.frozen):
        raise TypeError(f"{cls.__qualname__}.Params must be a frozen dataclass")
    existing = _WORKLOADS.get(cls.name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise RegistryError(f"workload name {cls.name!r} is already registered by {existing}")
    _WORKLOADS[cls.name] = cls
    return cls


@dataclasses.dataclass(frozen=True)
class DatasetGenerator:
    """A named synthetic-data generator: ``generate(params, rng) -> DataFrame``."""

    name: str
    Params: type
    generate: Callable[[Any, np.random.Generator], pd.DataFrame]


def register_dataset_generator(
    name: str, params_type: type
) -> Callable[[Callable[[Any, np.random.Generator], pd.DataFrame]], Callable[..., pd.DataFrame]]:
    """Decorator registering a dataset generator with its frozen parameter dataclass."""

    def decorate(fn: Callable[[Any, np.random.Generator], pd.DataFrame]) -> Callable[..., pd.DataFrame]:
        _GENERATORS[name] = DatasetGenerator(name=name, Params=params_type, generate=fn)
        return fn

    return decorate


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        importlib.import_module(entry_point.value)


def get_workload(name: str) -> Workload:
    """A fresh instance of the workload registered as ``name``."""
    _load_builtins()
    try:
        return _WORKLOADS[name]()
    except KeyError:
        raise RegistryError(
            f"unknown workload {name!r}; registered workloads: {', '.join(workload_names())}"
        ) from None


def workload_names() -> list[str]:
    _load_builtins()
    return sorted(_WORKLOADS)


def get_dataset_generator(name: str) -> DatasetGenerator:
    _load_builtins()
    try:
        return _GENERATORS[name]
    except KeyError:
        raise RegistryError(
            f"unknown dataset generator {name!r}; registered generators: "
            f"{', '.join(sorted(_GENERATORS))}"
        ) from None


def build_params(params_type: type, values: Mapping[str, Any], *, where: str) -> Any:
    """Construct a frozen parameter dataclass, turning every problem into a SpecError.

    ``where`` names the spec location (e.g. ``study 'laplace' params``) for the message.
    """
    fields = {f.name: f for f in dataclasses.fields(params_type)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise SpecError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed keys: {', '.join(sorted(fields))}"
        )
    missing = sorted(
        name
        for name, f in fields.items()
        if name not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    )
    if missing:
        raise SpecError(f"{where}: missing required key(s) {', '.join(map(repr, missing))}")
    try:
        return params_type(**values)
    except ValueError as error:  # the dataclass's own validation names the key
        raise SpecError(f"{where}: {error}") from None
    except TypeError as error:  # e.g. a str compared with a float: name the key ourselves
        raise SpecError(f"{where}: {_wrong_types(params_type, values) or error}") from None


_KINDS_OF = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}


def _wrong_types(params_type: type, values: Mapping[str, Any]) -> str:
    """``key (value) must be a T`` for values whose type contradicts a plain annotation (``""`` if none).

    Only consulted after construction failed, so it never changes which parameters are accepted;
    it names the key that a bare ``TypeError`` (e.g. comparing a str with a float) does not.
    """
    problems = []
    for field in dataclasses.fields(params_type):
        if field.name not in values:
            continue
        annotation = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
        kinds = _KINDS_OF.get(annotation.replace(" | None", ""))
        value = values[field.name]
        if kinds is None or (value is None and annotation.endswith("| None")):
            continue
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            kind = "a number" if float in kinds else f"a {kinds[0].__name__}"
            problems.append(f"{field.name} ({value!r}) must be {kind}")
    return "; ".join(problems)


def describe_params(params_type: type, *, none: str = "None") -> list[str]:
    """``name=default`` (``name (required)`` without one) for each field of a parameter dataclass.

    ``none`` is how a ``None`` default reads (e.g. ``"unlimited"`` for a depth).
    """
    described = []
    for field in dataclasses.fields(params_type):
        if field.default is not dataclasses.MISSING:
            described.append(f"{field.name}={none if field.default is None else repr(field.default)}")
        elif field.default_factory is not dataclasses.MISSING:
            described.append(f"{field.name}={field.default_factory()!r}")
        else:
            described.append(f"{field.name} (required)")
    return described


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
