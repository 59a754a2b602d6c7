"""``privlab audit NAME``: a one-configuration spec for an auditable's workload, run by the runner."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privlab.platform.audit.audit_results import AuditResult, audit_result
from privlab.platform.audit.audit_statistics import check_confidence, smallest_informative_trials
from privlab.platform.audit.auditables import (
    DEFAULT_CONFIDENCE,
    WORKLOAD_PREFIX,
    Auditable,
    AuditKind,
    EpsilonAuditable,
    get_auditable,
)
from privlab.platform.core.errors import SpecError
from privlab.platform.experiment import registry

if TYPE_CHECKING:
    from privlab.platform.run.runner import RunOptions

@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditRequest:
    """A validated audit: the generated one-configuration spec and its ``--set`` overrides."""

    name: str
    spec_text: str
    overrides: tuple[str, ...]
    trials: int
    confidence: float

SPEC_TABLES = ("execution", "tracking")  # spec-level tables `--set` may address with a dotted key


def prepare_audit(name: str, *, settings: Sequence[str] = (), trials: int | None = None,
                  confidence: float = DEFAULT_CONFIDENCE, seed: int | None = None,
                  experiment: str | None = None) -> AuditRequest:
    """Validate an audit request completely (nothing runs, nothing is logged).

    Args:
        name: A registered auditable.
        settings: ``key=value`` strings (TOML values): ``key`` is a parameter of the auditable,
            or ``execution.*`` / ``tracking.*`` for the generated spec.
        trials: Neighbouring pairs (sensitivity) or runs per dataset (ε); default: the
            auditable's ``default_trials``.
        confidence: The confidence level of the reported interval or bound.
        seed: The root seed (default: fresh OS entropy, logged with the run).
        experiment: The MLflow experiment (default ``audit-<name>``).

    Raises:
        RegistryError: Unknown auditable (the message lists them).
        SpecError: Unknown parameter, bad value, bad trials, confidence or seed.
    """
    from privlab.platform.experiment.spec import MAX_UNITS, parse_spec
    from privlab.platform.experiment.spec_overrides import apply_override

    auditable = get_auditable(name)
    where = f"audit {name!r}"
    try:
        confidence = check_confidence(confidence)
    except ValueError as error:
        raise SpecError(f"{where}: --confidence: {error}") from None
    trials = auditable.default_trials if trials is None else trials
    if not isinstance(trials, int) or isinstance(trials, bool) or not 1 <= trials <= MAX_UNITS:
        raise SpecError(f"{where}: trials ({trials!r}) must be an integer between 1 and {MAX_UNITS:.0e}")
    if auditable.kind is AuditKind.EPSILON:
        assert isinstance(auditable, EpsilonAuditable)
        smallest = smallest_informative_trials(auditable.threshold_count, confidence)
        if trials < smallest:
            raise SpecError(f"{where}: trials ({trials}) cannot give any ε bound at confidence {confidence}: the "
                            f"smallest trial count that can give a bound is {smallest} (use --trials {smallest} or "
                            "more; a useful bound needs far more)")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise SpecError(f"{where}: seed ({seed!r}) must be a non-negative integer")
    allowed = [f.name for f in dataclasses.fields(auditable.Params)]
    overrides = []
    for setting in settings:
        key, sep, value = setting.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SpecError(f"--set {setting!r} must look like key=value (e.g. {allowed[0] if allowed else 'key'}=1.0)")
        key = key.removeprefix("params.")
        if "." in key:
            if key.split(".", 1)[0] not in SPEC_TABLES:
                raise SpecError(
                    f"--set {key}: {where} takes its parameters ({', '.join(allowed) or 'none'}) and "
                    f"{', '.join(t + '.*' for t in SPEC_TABLES)} settings; use --trials, --confidence and "
                    "--seed for those"
                )
            overrides.append(f"{key}={value}")
        elif key not in allowed:
            hint = f"; use --{key}" if key in ("trials", "confidence", "seed") else ""
            raise SpecError(f"{where}: unknown parameter {key!r}; parameters: {', '.join(allowed) or 'none'}{hint}")
        else:
            overrides.append(f"params.{key}={value}")
    text = _spec_text(auditable, trials=trials, confidence=confidence, seed=seed,
                      experiment=experiment or f"audit-{name}")
    import tomllib

    document = tomllib.loads(text)
    for override in overrides:
        apply_override(document, override)
    missing = [f.name for f in dataclasses.fields(auditable.Params)
               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               and f.name not in document["params"]]
    if missing:
        example = " ".join(f"--set {m}=VALUE" for m in missing)
        raise SpecError(f"{where}: missing required parameter(s) {', '.join(map(repr, missing))}; give {example} "
                        "(privlab has no default ε)")
    parse_spec(document, source=Path(f"{name}.toml"))  # every parameter and setting checked here
    return AuditRequest(name=name, spec_text=text, overrides=tuple(overrides), trials=trials, confidence=confidence)


def _spec_text(auditable: Auditable, *, trials: int, confidence: float, seed: int | None, experiment: str) -> str:
    kind = "sensitivity" if auditable.kind is AuditKind.SENSITIVITY else "ε"
    lines = [
        f"# Generated by `privlab audit {auditable.name}`.",
        f"name = {json.dumps('audit-' + auditable.name)}",
        f"description = {json.dumps(f'{kind} audit: {auditable.description}')}",
    ]
    if seed is not None:
        lines.append(f"seed = {seed}")
    lines += [
        f"workload = {json.dumps(WORKLOAD_PREFIX + auditable.name)}",
        f"trials = {trials}",
        "",
        "[params]",
        f"confidence = {confidence!r}",
        "",
        "[tracking]",
        f"experiment = {json.dumps(experiment)}",
        "plots = false  # one configuration: nothing to plot across; the reservoir keeps the distribution",
        'run_statistics = "all"  # one run: its quantiles and extremes in MLflow cost nothing that matters',
    ]
    return "\n".join(lines) + "\n"


def run_audit(request: AuditRequest, options: RunOptions) -> tuple[AuditResult, dict[str, Any]]:
    """Run a prepared audit with the runner (serial, local Ray or a cluster, as ``options`` say).

    Returns:
        The audit's findings and the runner's summary (``--summary-json``).

    Raises:
        RunInterrupted: Ctrl-C or ``stop_after_units``; resume with ``options.resume``.
        ExecutionError, TrackingError: As :func:`privlab.platform.run.runner.run_experiment`.
    """
    import tomllib

    from privlab.platform.run.runner import run_experiment
    from privlab.platform.experiment.spec import parse_spec
    from privlab.platform.experiment.spec_overrides import apply_override

    document = tomllib.loads(request.spec_text)
    for override in request.overrides:
        apply_override(document, override)
    spec = parse_spec(document, source=Path(f"audit-{request.name}.toml"), text=request.spec_text,
                      overrides=request.overrides)
    summary = run_experiment(spec, options)
    config = spec.configurations[0]
    params = registry.build_params(registry.get_workload(config.workload).Params, config.params, where=config.id)
    result = audit_result(get_auditable(request.name), params, summary["configurations"][0]["metrics"],
                          run_id=summary["run_id"],
                          experiment=summary["experiment"], root_seed=summary["root_seed"])
    return result, summary
