"""The shortlist: the public configurations a release chooses among, and the files they name.

Written by ``privlab shortlist`` from a public-data grid search; read by the release, which
checks that every configuration fits the space, the synthesizer and the criteria, and that the
flow settings spend exactly the spec's declared split.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from privlab.mechanisms.release.flow import FlowConfiguration, FlowSettings, load_settings
from privlab.mechanisms.release.spec import ReleaseSpec, read_toml
from privlab.mechanisms.synthesizers.base import hyperparameter_names, synthesizer_names
from privlab.mechanisms.tabular.space import resolve_transformation
from privlab.mechanisms.tabular.space import ReleaseSpace, load_release_space
from privlab.platform.core.errors import SpecError

_CONFIGURATION_KEYS = ("transformation", "synthesizer", "min_count")  # the rest: the synthesizer's hyperparameters


@dataclasses.dataclass(frozen=True, kw_only=True)
class Shortlist:
    """The public shortlist and the files it names."""

    path: Path
    space_path: Path
    settings_path: Path
    space: ReleaseSpace
    settings: FlowSettings
    configurations: tuple[FlowConfiguration, ...]


def _configuration(table: Any, where: str) -> FlowConfiguration:
    if not isinstance(table, dict):
        raise SpecError(f"{where} must be a table")
    if "transformation" not in table or "synthesizer" not in table:
        raise SpecError(f"{where}: transformation and synthesizer are required")
    if table["synthesizer"] not in synthesizer_names():
        raise SpecError(f"{where}: synthesizer ({table['synthesizer']!r}) must be one of "
                        f"{', '.join(synthesizer_names())}")
    allowed = (*_CONFIGURATION_KEYS, *hyperparameter_names(table["synthesizer"]))
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    min_count = table.get("min_count", 0)
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count == 1 or min_count < 0:
        raise SpecError(f"{where}: min_count ({min_count!r}) must be 0 (no projection) or an integer >= 2")
    try:
        return FlowConfiguration(
            transformation=table["transformation"], synthesizer=table["synthesizer"],
            synthesizer_params=tuple((k, table[k]) for k in hyperparameter_names(table["synthesizer"]) if k in table),
            min_count=min_count or None)
    except SpecError as error:
        raise SpecError(f"{where}: {error}") from None


def load_shortlist(path: Path) -> Shortlist:
    """Read the shortlist TOML written by ``privlab shortlist`` and everything it names.

    Raises:
        SpecError: The file is missing (run the grid search and ``privlab shortlist`` first),
            invalid, empty, or a configuration does not fit the space or the criteria.
    """
    if not path.is_file():
        raise SpecError(
            f"shortlist {str(path)!r} does not exist. Run the public-data grid search first "
            "(privlab run GRID_SPEC, with the release_flow configurations of this space), then write the shortlist "
            f"with `privlab shortlist RUN_ID --min-prob 0.1 --out {path}`")
    document = read_toml(path, "shortlist")
    unknown = sorted(set(document) - {"space", "settings", "configuration"})
    if unknown:
        raise SpecError(f"{path}: unknown key(s) {', '.join(unknown)}; allowed: configuration, settings, space")
    for key in ("space", "settings"):
        if not isinstance(document.get(key), str):
            raise SpecError(f"{path}: {key} must name a file (relative to the shortlist)")
    tables = document.get("configuration", [])
    if not isinstance(tables, list) or not tables:
        raise SpecError(f"{path}: the shortlist has no [[configuration]]; private selection needs at least one. "
                        "Rerun `privlab shortlist` with a lower --min-prob or run more grid attempts")
    space_path, settings_path = path.parent / document["space"], path.parent / document["settings"]
    space = load_release_space(space_path)
    settings = load_settings(settings_path)
    configurations = tuple(_configuration(t, f"{path} configuration {i + 1}") for i, t in enumerate(tables))
    for i, configuration in enumerate(configurations):
        where = f"{path} configuration {i + 1}"
        try:
            transformation = resolve_transformation(space, configuration.transformation)
            configuration.build_synthesizer(where=f"{where}: synthesizer {configuration.synthesizer!r}")
            for criterion in settings.criteria:
                criterion.check_domain(transformation.domain)
        except SpecError as error:
            raise SpecError(f"{where}: {error}") from None
    return Shortlist(path=path, space_path=space_path, settings_path=settings_path, space=space,
                     settings=settings, configurations=configurations)


def check_split(spec: ReleaseSpec, settings: FlowSettings, settings_path: Path) -> None:
    """The settings' ε must be the spec's declared split (so the budget check was exact)."""
    for label, declared, actual in (("generation", spec.epsilon_generation, settings.epsilon_generation),
                                    ("acceptance", spec.epsilon_acceptance, settings.epsilon_acceptance)):
        if not math.isclose(declared, actual, rel_tol=1e-12, abs_tol=1e-15):
            raise SpecError(f"{spec.path}: epsilon.{label} = {declared:g} but the flow settings {settings_path} "
                            f"give ε_{label} = {actual:g}; make them agree")
