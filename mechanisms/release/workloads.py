"""``release_flow``: the public-data grid search over a release scheme's configuration space.

Each repetition of a configuration is one attempt — one full flow (transform, fit, sample,
filter, project, DP acceptance criteria) — logged as its own MLflow run with every
criterion's DP value, exact value (research mode only), pass/fail, the timings and ε. The
configuration's aggregate gives the estimated acceptance probability with a 95% Wilson
interval and per-criterion pass rates, which ``privlab compare`` tabulates and ``privlab
shortlist`` turns into the configurations worth taking to the private data (Hod & Canetti
2024, Section 4.10).

Spec parameters (``[params]`` or ``[grid]``): ``space``, ``settings`` and ``data`` (files,
relative to the spec), ``transformation`` (a possibly partial transformation id),
``synthesizer`` and its hyperparameters (the keys of its ``Params``, e.g. ``epsilon_split``, ``theta``,
``degree``, ``score`` for PrivBayes), ``min_count`` (0: no projection).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from privlab.mechanisms.release.flow import (
    FlowConfiguration,
    FlowSettings,
    check_criteria,
    load_settings,
    planned_events,
    run_flow,
)
from privlab.mechanisms.synthesizers.base import hyperparameter_names, synthesizer_names
from privlab.mechanisms.tabular.space import ReleaseSpace, load_release_space, resolve_transformation
from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import ConstrainedParams, InstanceOf, Interval, Options, Text, Unconstrained
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import SeededSource
from privlab.platform.experiment.registry import MetricKind, Pattern, Workload, register_workload

@dataclasses.dataclass(frozen=True, kw_only=True)
class _FlowParamsBase(ConstrainedParams):
    space: str = dataclasses.field(metadata={"path": True})
    settings: str = dataclasses.field(metadata={"path": True})
    data: str = dataclasses.field(metadata={"path": True})
    transformation: str = ""
    synthesizer: str = "privbayes"
    min_count: int = 0

    _parameter_constraints: ClassVar = {
        "space": [Text("a file path")],
        "settings": [Text("a file path")],
        "data": [Text("a file path")],
        "transformation": [InstanceOf(str, "a transformation id")],
        "synthesizer": [Unconstrained()],  # a registered name: the flow says which exist
        "min_count": [Options(numbers.Integral, (0,), description="0 (no projection)"),
                      Interval(numbers.Integral, 2, None, closed="left")],
    }
    _type_error: ClassVar = SpecError
    _undeclared_fields_allowed: ClassVar = True  # every synthesizer's hyperparameters, checked together

    def _check_together(self) -> None:
        stray = [k for k in SYNTHESIZER_KEYS if getattr(self, k) is not None
                 and k not in hyperparameter_names(self.synthesizer)] if self.synthesizer in synthesizer_names() else []
        if stray:
            raise ValueError(f"{', '.join(stray)} ({', '.join(repr(getattr(self, k)) for k in stray)}) must be "
                             f"hyperparameter(s) of synthesizer {self.synthesizer!r}; it takes "
                             f"{', '.join(hyperparameter_names(self.synthesizer)) or 'none'}")

    def configuration(self) -> FlowConfiguration:
        hyper = tuple((k, getattr(self, k)) for k in hyperparameter_names(self.synthesizer)
                      if getattr(self, k) is not None)
        return FlowConfiguration(transformation=self.transformation, synthesizer=self.synthesizer,
                                 synthesizer_params=hyper, min_count=self.min_count or None)


#: Every registered synthesizer's hyperparameter names: a grid may set those of its synthesizer.
SYNTHESIZER_KEYS = hyperparameter_names()
#: The hyperparameters the workload had before they came from the registry: always in the seed
#: key, as they were; any other joins it only when set, so earlier specs keep their seeds.
_KEYED_SINCE_THE_START = ("epsilon_split", "theta", "degree", "score")

#: The workload's parameters: the files, the transformation, the synthesizer, ``min_count``, and
#: one optional field per hyperparameter of any registered synthesizer (built from the registry,
#: so a synthesizer plug-in's settings reach grids and shortlists with no change here).
ReleaseFlowParams = dataclasses.make_dataclass(
    "ReleaseFlowParams",
    [(key, Any, dataclasses.field(default=None, metadata={} if key in _KEYED_SINCE_THE_START
                                  else {"seed_key": "when_set"}))
     for key in SYNTHESIZER_KEYS],
    bases=(_FlowParamsBase,), frozen=True, kw_only=True)
ReleaseFlowParams.__module__ = __name__  # picklable by reference, like a class written here


@functools.lru_cache(maxsize=8)
def _space(path: str) -> ReleaseSpace:
    return load_release_space(path)


@functools.lru_cache(maxsize=8)
def _settings(path: str) -> FlowSettings:
    return load_settings(path)


@functools.lru_cache(maxsize=4)
def _cleaned(space_path: str, data_path: str) -> pd.DataFrame:
    path = Path(data_path)
    if not path.is_file():
        raise SpecError(f"data ({data_path!r}) does not exist; give the path of the (public) raw data file")
    space = _space(space_path)
    return space.clean_raw(space.read_raw(path, what=f"data file {str(path)!r}"), source=path.name)


def flow_inputs(params: Mapping[str, Any]) -> tuple[ReleaseSpace, FlowSettings, str]:
    """The space, settings and transformation id of a release_flow configuration's params."""
    built = ReleaseFlowParams(**{k: v for k, v in params.items()
                                 if k in {f.name for f in dataclasses.fields(ReleaseFlowParams)}})
    return _space(built.space), _settings(built.settings), built.transformation


def metric_name(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_")


@register_workload
class ReleaseFlow(Workload):
    """One attempt of the release flow per repetition, on public data (research mode)."""

    name = "release_flow"
    pattern = Pattern.GRID
    Params = ReleaseFlowParams
    metrics: Mapping[str, MetricKind] = {}  # one set per criterion the settings declare
    unit_runs = True

    def data_key(self, params: ReleaseFlowParams) -> str:
        return f"{params.space}|{params.data}"

    def data_files(self, params: ReleaseFlowParams) -> tuple[str, ...]:
        return (params.data,)

    def load_data(self, params: ReleaseFlowParams) -> pd.DataFrame:
        frame = _cleaned(params.space, params.data)
        self._check(params, frame)
        return frame

    def _check(self, params: ReleaseFlowParams, frame: pd.DataFrame) -> None:
        """Everything that can be wrong with a configuration, found before any work."""
        space, settings = _space(params.space), _settings(params.settings)
        transformation = resolve_transformation(space, params.transformation)
        params.configuration().build_synthesizer(where=f"synthesizer {params.synthesizer!r}")
        check_criteria(settings.criteria, transformation.domain)
        del frame

    def metric_kinds(self, params: ReleaseFlowParams) -> dict[str, MetricKind]:
        kinds = {"accepted": MetricKind.RATE}
        for criterion in _settings(params.settings).criteria:
            name = metric_name(criterion.name)
            kinds |= {f"{name}_passed": MetricKind.RATE, f"{name}_dp": MetricKind.VALUE,
                      f"{name}_exact": MetricKind.VALUE, f"{name}_sensitivity": MetricKind.VALUE,
                      f"timing_{name}_seconds": MetricKind.VALUE}
        for step in ("transform", "fit", "sample", "project", "flow"):
            kinds[f"timing_{step}_seconds"] = MetricKind.VALUE
        kinds["epsilon_flow"] = MetricKind.VALUE
        return kinds

    def run_metrics(self, params: ReleaseFlowParams) -> tuple[str, ...]:
        """Acceptance, each criterion's pass rate and the flow's ε split: what a configuration
        run shows in MLflow; each criterion's DP and exact values and sensitivity are in the
        run's result parts and index (``privlab compare --metric``)."""
        criteria = [metric_name(criterion.name) for criterion in _settings(params.settings).criteria]
        return ("accepted", *(f"{name}_passed" for name in criteria), "epsilon_flow", "epsilon_generation",
                "epsilon_acceptance")

    def plan(self, params: ReleaseFlowParams) -> list[PrivacyEvent]:
        space = _space(params.space)
        n = len(_cleaned(params.space, params.data))
        return planned_events(params.configuration(), _settings(params.settings), space=space, n=n)

    def run_trial(self, params: ReleaseFlowParams, *, data: pd.DataFrame | None, source: SeededSource,
                  ledger: Ledger) -> Mapping[str, float]:
        if data is None:
            raise SpecError("release_flow needs its data (the runner passes the file named by 'data')")
        settings = _settings(params.settings)
        outcome = run_flow(data, space=_space(params.space), configuration=params.configuration(),
                           settings=settings, source=source, ledger=ledger)
        result: dict[str, float] = {"accepted": float(outcome.accepted)}
        for criterion_result in outcome.results:
            name = metric_name(criterion_result.name)
            exact = criterion_result.true_value
            result |= {f"{name}_passed": float(criterion_result.passed), f"{name}_dp": criterion_result.dp_value,
                       f"{name}_exact": math.nan if exact is None else float(exact),
                       f"{name}_sensitivity": criterion_result.sensitivity,
                       f"timing_{name}_seconds": outcome.seconds[f"criterion:{criterion_result.name}"]}
        for step in ("transform", "fit", "sample", "project"):
            result[f"timing_{step}_seconds"] = outcome.seconds[step]
        result["timing_flow_seconds"] = math.fsum(outcome.seconds.values())
        result["epsilon_flow"] = settings.epsilon_flow
        return result

    def report(self, results: Any) -> dict[str, str | bytes]:
        from privlab.mechanisms.release.report import study_report

        return study_report(results)

    def derive(self, params: ReleaseFlowParams, summary: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        return {"epsilon_generation": _settings(params.settings).epsilon_generation,
                "epsilon_acceptance": _settings(params.settings).epsilon_acceptance}
