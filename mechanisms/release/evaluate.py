"""Research tools around the release flow: exact (non-DP) criterion values, and the shortlist.

* :func:`evaluate_candidate` computes every acceptance criterion's exact error measure between
  an original dataset and a candidate, both in the raw schema, after the configuration's
  transformation — for checking a flow and for tuning thresholds on public data. It is not DP
  and is refused in release mode. The candidate may have any number of records (a release
  publishes a DP record count, so its ``released.csv`` never has the original's cleaned size):
  criteria defined on proportions, means and regression fits (``any_size``) compare the two as
  they are; those that compare counts or match records one to one get the candidate resized to
  the original's size by :func:`resize_candidate`, a draw keyed by a stated seed.
* :func:`shortlist_from_summary` picks the configurations of a public-data grid search whose
  estimated acceptance probability reaches a floor (the paper's heuristic: 10%), to be taken to
  the private data (Hod & Canetti 2024, Section 4.10).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privlab.mechanisms.release.flow import FlowSettings
from privlab.mechanisms.synthesizers.base import hyperparameter_names
from privlab.mechanisms.tabular.space import resolve_transformation
from privlab.mechanisms.tabular.reader import read_raw_table as space_reader_table
from privlab.mechanisms.tabular.space import ReleaseSpace
from privlab.platform.core.errors import SpecError

#: The workload parameters that define a configuration of the release scheme: the transformation,
#: the synthesizer and its hyperparameters (any registered synthesizer's), the projection.
def configuration_keys() -> tuple[str, ...]:
    return ("transformation", "synthesizer", *hyperparameter_names(), "min_count")


def read_candidate(path: str | Path, *, space: ReleaseSpace, what: str) -> pd.DataFrame:
    """A candidate file read as the space reads its data (``[reader]``: ``na_values``, delimiter,
    whitespace and trailing-dot clean-ups), so that a raw data file of the space given as the
    candidate reads as it does as the original (ACS's ``"N"`` as missing, not 27,253 values
    "outside the declared categories"). A candidate privlab wrote (a release's ``released.csv``,
    a synthesizer's output) has a header even where the space's files have none: a first line
    naming every schema column is read as one.
    """
    options = space.reader
    if not options.header and _names_every_column(Path(path), options.delimiter, space.schema.names):
        options = dataclasses.replace(options, header=True, columns=None)
    return space_reader_table(path, schema=space.schema, options=options, what=what)


def _names_every_column(path: Path, delimiter: str, names: Sequence[str]) -> bool:
    """Whether the first line of a text file names every one of ``names``."""
    import gzip

    if not path.name.endswith((".csv", ".csv.gz", ".data", ".test", ".txt")) or not path.is_file():
        return False
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as stream:  # type: ignore[operator]
            first = stream.readline(1 << 20)
    except OSError:
        return False  # the reader says what is wrong with the file
    fields = {field.strip().strip('"') for field in first.rstrip("\r\n").split(delimiter)}
    return set(names) <= fields


#: The seed of :func:`resize_candidate` unless ``privlab evaluate --resize-seed`` gives another.
RESIZE_SEED = 0

#: How :func:`resize_candidate` resizes, in the words ``privlab evaluate`` prints.
RESIZE_METHOD = ("every candidate record repeated floor(n/m) times, plus a uniformly random (n mod m)-subset of "
                 "them drawn without replacement (n ≤ m: a uniform n-subset); m = candidate size, "
                 "n = original size after cleaning")


def resize_candidate(candidate: pd.DataFrame, n: int, *, seed: int = RESIZE_SEED) -> pd.DataFrame:
    """``candidate`` resized to exactly ``n`` records, deterministically for a given ``seed``.

    With ``m = len(candidate)`` and ``n = q·m + r`` (``0 ≤ r < m``): every record ``q`` times,
    plus a uniformly random ``r``-subset drawn without replacement from
    ``numpy.random.default_rng(seed)`` (:data:`RESIZE_METHOD`). Each record then appears
    ``⌊n/m⌋`` or ``⌈n/m⌉`` times, so the candidate's proportions move as little as a resize to
    ``n`` allows (by at most ``r/n`` for ``n < m``, in expectation not at all), unlike a
    with-replacement bootstrap. Equal sizes return the candidate unchanged (no draw).

    Raises:
        SpecError: ``n < 1`` or an empty candidate.
    """
    m = len(candidate)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SpecError(f"n ({n!r}) must be an int >= 1")
    if m == 0:
        raise SpecError("the candidate has no records; give a candidate with at least one record")
    if m == n:
        return candidate
    copies, rest = divmod(n, m)
    drawn = np.sort(np.random.default_rng(seed).permutation(m)[:rest])
    index = np.concatenate([np.tile(np.arange(m), copies), drawn])
    return candidate.iloc[index].reset_index(drop=True)


def evaluate_candidate(
    original: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    space: ReleaseSpace,
    settings: FlowSettings,
    transformation: str,
    resize_seed: int = RESIZE_SEED,
) -> dict[str, Any]:
    """Every criterion's exact error between ``original`` and ``candidate`` (raw schema).

    The original is cleaned with the space's raw constraints, as a flow does; the candidate is
    validated against the raw schema (a synthetic record must already satisfy it). Both are
    transformed with ``transformation``. The two may differ in size (a release's output has a
    DP record count): a criterion whose measure is defined on proportions, means or fits
    (``any_size``) compares them as they are; any other compares the candidate resized to the
    original's size ``n`` (:func:`resize_candidate` with ``resize_seed``).

    Returns:
        ``{"transformation", "n", "candidate_n", "resize", "criteria": [{name, kind, value,
        threshold, passed, candidate_n, resized}], "accepted"}``; ``resize`` is ``None`` when the
        sizes are equal, else ``{"to", "seed", "method", "criteria"}`` (the names resized for).

    Raises:
        SchemaError: A file breaks the schema.
        SpecError: The original has no records after cleaning, or the candidate has none.
    """
    chosen = resolve_transformation(space, transformation)
    cleaned = space.clean_raw(original, source="original")
    checked = space.schema.validate(candidate, source="candidate")
    r = chosen.apply(cleaned, source="original")
    s = chosen.apply(checked, source="candidate")
    if len(r) == 0:
        raise SpecError("the original has no records after cleaning with the raw constraints; check --original")
    resized = resize_candidate(s, len(r), seed=resize_seed)
    rows = []
    for criterion in settings.criteria:
        compared = s if criterion.any_size else resized
        value = float(criterion.error(r, compared, domain=chosen.domain))
        rows.append({"name": criterion.name, "kind": criterion.kind, "value": value,
                     "threshold": float(criterion.threshold), "passed": bool(value < criterion.threshold),
                     "candidate_n": len(compared), "resized": compared is not s})
    resize = None if len(s) == len(r) else {
        "to": len(r), "seed": resize_seed, "method": RESIZE_METHOD,
        "criteria": [row["name"] for row in rows if row["resized"]]}
    return {"transformation": chosen.id, "n": len(r), "candidate_n": len(s), "resize": resize, "criteria": rows,
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


def relative_to(target: str, folder: Path) -> str:
    """``target`` relative to ``folder`` when possible (so a shortlist moves with its repo)."""
    try:
        return os.path.relpath(target, folder)
    except ValueError:
        return target
