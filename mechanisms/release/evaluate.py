"""Research tools around the release flow: exact (non-DP) criterion values, and the shortlist.

* :func:`evaluate_candidate` computes every acceptance criterion's exact error measure between
  an original dataset and a candidate, both in the raw schema, after the configuration's
  transformation — for checking a flow and for tuning thresholds on public data. It is not DP
  and is refused in release mode.
* :func:`shortlist_from_summary` picks the configurations of a public-data grid search whose
  estimated acceptance probability reaches a floor (the paper's heuristic: 10%), to be taken to
  the private data (Hod & Canetti 2024, Section 4.10).
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from privlab.mechanisms.synthesizers.base import hyperparameter_names
from privlab.mechanisms.release.flow import FlowSettings, resolve_transformation
from privlab.mechanisms.tabular.space import ReleaseSpace
from privlab.platform.csv_fields import check_field_counts
from privlab.platform.errors import SchemaError, SpecError

#: The workload parameters that define a configuration of the release scheme: the transformation,
#: the synthesizer and its hyperparameters (any registered synthesizer's), the projection.
def configuration_keys() -> tuple[str, ...]:
    return ("transformation", "synthesizer", *hyperparameter_names(), "min_count")


def read_raw(path: str | Path, *, what: str) -> pd.DataFrame:
    """Read a raw-schema CSV (optionally gzipped) or parquet file, with errors that name it."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{what} file {str(path)!r} does not exist")
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.name.endswith((".csv", ".csv.gz")):
        check_field_counts(path, what=f"{what} file {str(path)!r}")
        return pd.read_csv(path)
    raise SpecError(f"{what} file {str(path)!r} must be .csv, .csv.gz or .parquet")


def evaluate_candidate(
    original: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    space: ReleaseSpace,
    settings: FlowSettings,
    transformation: str,
) -> dict[str, Any]:
    """Every criterion's exact error between ``original`` and ``candidate`` (raw schema).

    The original is cleaned with the space's raw constraints, as a flow does; the candidate is
    validated against the raw schema (a synthetic record must already satisfy it). Both are
    transformed with ``transformation``. The criteria require the same number of records.

    Returns:
        ``{"transformation", "n", "criteria": [{name, kind, value, threshold, passed}], "accepted"}``.

    Raises:
        SchemaError: A file breaks the schema, or the record counts differ after cleaning.
    """
    chosen = resolve_transformation(space, transformation)
    cleaned = space.clean_raw(original, source="original")
    checked = space.schema.validate(candidate, source="candidate")
    r = chosen.apply(cleaned, source="original")
    s = chosen.apply(checked, source="candidate")
    if len(r) != len(s):
        raise SchemaError(
            f"the candidate has {len(s)} records but the original has {len(r)} after cleaning with the raw "
            "constraints; the criteria compare datasets of the same size n"
        )
    rows = []
    for criterion in settings.criteria:
        value = float(criterion.error(r, s, domain=chosen.domain))
        rows.append({"name": criterion.name, "kind": criterion.kind, "value": value,
                     "threshold": float(criterion.threshold), "passed": bool(value < criterion.threshold)})
    return {"transformation": chosen.id, "n": len(r), "criteria": rows,
            "accepted": all(row["passed"] for row in rows)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShortlistEntry:
    """A configuration worth taking to the private data, with its public-data estimate."""

    config_id: str
    configuration: Mapping[str, Any]
    acceptance_rate: float
    ci_low: float
    ci_high: float
    attempts: int


def shortlist_from_summary(summary: Mapping[str, Any], *, min_prob: float) -> list[ShortlistEntry]:
    """The ``release_flow`` configurations whose estimated acceptance rate is ≥ ``min_prob``,
    best first (ties keep the grid order)."""
    if isinstance(min_prob, bool) or not isinstance(min_prob, (int, float)) or not 0 <= min_prob <= 1:
        raise SpecError(f"--min-prob ({min_prob!r}) must be a probability in [0, 1]")
    entries = [e for e in summary["configurations"] if e.get("workload") == "release_flow"]
    if not entries:
        raise SpecError(f"run {summary.get('run_id')} has no release_flow configurations; give a grid-search run")
    chosen = []
    for entry in entries:
        m = entry["metrics"]
        if m["accepted_rate"] >= min_prob:
            chosen.append(ShortlistEntry(
                config_id=entry["id"],
                configuration={k: v for k, v in workload_params(entry).items() if k in configuration_keys() and v is not None},
                acceptance_rate=float(m["accepted_rate"]), ci_low=float(m["accepted_ci_low"]),
                ci_high=float(m["accepted_ci_high"]), attempts=int(m.get("accepted_trials", m.get("accepted_count", 0))),  # _count: older runs
            ))
    return sorted(chosen, key=lambda e: -e.acceptance_rate)


def workload_params(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A summary entry's workload parameters (its ``params.*`` keys, unprefixed)."""
    return {k.removeprefix("params."): v for k, v in entry["params"].items() if k.startswith("params.")}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise SpecError(f"cannot write {value!r} to TOML")
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise SpecError(f"cannot write {value!r} to TOML")


def shortlist_toml(entries: Sequence[ShortlistEntry], *, run_id: str, min_prob: float,
                   space: str, settings: str) -> str:
    """The shortlist as TOML: the shared files, then one ``[[configuration]]`` per entry."""
    lines = [
        f"# Shortlist from grid-search run {run_id}: configurations whose estimated acceptance",
        f"# probability on public data is at least {min_prob:g} (Hod & Canetti 2024, Section 4.10).",
        "# Written by `privlab shortlist`; the release spec draws configurations uniformly from it.",
        f"space = {_toml_value(space)}",
        f"settings = {_toml_value(settings)}",
        "",
    ]
    for entry in entries:
        lines.append("[[configuration]]")
        lines.append(f"# {entry.config_id}: acceptance {entry.acceptance_rate:.3f} "
                     f"[{entry.ci_low:.3f}, {entry.ci_high:.3f}] over {entry.attempts} attempts")
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in entry.configuration.items())
        lines.append("")
    return "\n".join(lines)


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def relative_to(target: str, folder: Path) -> str:
    """``target`` relative to ``folder`` when possible (so a shortlist moves with its repo)."""
    try:
        return os.path.relpath(target, folder)
    except ValueError:
        return target
