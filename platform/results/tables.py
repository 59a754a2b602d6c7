"""Result tables for people: one aligned table per study, the same in ``privlab run`` and
``privlab compare``.

A row is one configuration (or facet), named by its id (``laplace_mean-000``,
``pmse_sensitivity-000.d1_cp01``), followed by the study's varying parameters as their own
columns, then each metric as ``mean [95% CI]`` (``rate [95% CI]`` for rates), derived
metrics, and ε. Where the workload states what theory expects of a metric
(:meth:`~privlab.platform.experiment.registry.Workload.expectations`), an ``expected`` column beside it
shows the value and a verdict: ``ok`` when the 95% interval is consistent with it, ``OFF``
when not.

Rows are plain mappings with the keys of a run summary's entries: ``id``, ``study``,
``workload``, ``params`` (flat: ``params.*``, ``dataset.*`` and facet parameters),
``metrics`` and, for a facet, ``facet``. Studies are shown in the order their rows come (the
spec's), a configuration's facets in the numeric order of the parameters that tell them apart.

A mean over fewer than :data:`MIN_CI_COUNT` values is shown with its ``n`` and no interval: the
t-interval of two values is ±12.7 standard errors (``0.3896 [-0.3477, 1.127]`` for a metric in
[0, 1]) and rests on a normality so few values cannot show. Rates keep their Wilson interval,
which never leaves [0, 1]. A table wider than ``width`` (the terminal) shows its first metrics
and names the rest, which ``privlab compare --format csv`` has.
"""

from __future__ import annotations

import math
import shlex
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

MAX_METRIC_COLUMNS = 14
"""A study with more metrics shows the first ones only, and says how to see the rest."""
MIN_CI_COUNT = 5
"""A mean over fewer values is shown with its n, without a 95% interval (module docstring)."""
SMALL_N_NOTE = ("(n=…): a mean of fewer than {min} values, shown without a 95% CI: a t-interval from so few is "
                "wider than the data and rests on a normality they cannot show; run more repetitions for one")
STATISTICS = {"sd", "min", "max", "p05", "p50", "p95", "count", "trials", "successes", "low", "high"}
VERDICT_NOTE = ("checks against theory: {checks} ({ok} ok, {off} OFF; about {chance:.1f} OFF expected by chance). "
                "expected = theory's value; ok when the 95% CI contains it (≥/≤: reaches it), OFF when not: "
                "a test at level 5%, so a correct mechanism is OFF about once in 20 checks")


def metric_order(key: str) -> tuple[str, str]:
    """Sort key keeping a metric's statistics together: ``in_event_d_rate`` before
    ``in_event_d_prime_rate``."""
    for statistic in sorted(STATISTICS | {"mean", "rate", "ci_low", "ci_high"}, key=len, reverse=True):
        if key.endswith(f"_{statistic}"):
            return key.removesuffix(f"_{statistic}"), key
    return key, key


def fmt(x: Any) -> str:
    """A cell: floats to 4 significant digits, NaN and None empty, integers as integers."""
    if x is None:
        return ""
    if isinstance(x, float):
        if math.isnan(x):
            return ""
        return f"{x:.4g}"
    return str(x)


def display_names(keys: Sequence[str]) -> dict[str, str]:
    """``params.epsilon`` → ``epsilon``, ``facet.depth`` → ``depth`` (the prefix kept when two
    keys would clash)."""
    short = {k: k.split(".", 1)[1] if k.startswith(("params.", "dataset.", "facet.")) else k for k in keys}
    counts: dict[str, int] = {}
    for name in short.values():
        counts[name] = counts.get(name, 0) + 1
    return {k: (name if counts[name] == 1 else k) for k, name in short.items()}


def varying_params(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The flat parameter keys whose values differ between ``rows``, by display name."""
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row["params"] if k not in keys]
    varying = [k for k in keys if len({repr(_plain(row["params"].get(k))) for row in rows}) > 1]
    names = display_names(varying)
    return sorted(varying, key=lambda k: names[k])


def _plain(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def expectations(row: Mapping[str, Any]) -> dict[str, Any]:
    """What the row's workload says theory expects of its metrics (``{}`` when nothing, or
    when the workload or its parameters are unknown here)."""
    from privlab.platform.experiment import registry
    from privlab.platform.core.errors import PrivlabError

    try:
        workload = registry.get_workload(row["workload"])
        if type(workload).expectations is registry.Workload.expectations:
            return {}  # states none: do not build (and validate) its parameters for nothing
        values = {k.removeprefix("params."): v for k, v in row["params"].items() if k.startswith("params.")}
        params = registry.build_params(workload.Params, values, where=str(row["id"]))
        found = dict(workload.expectations(params))
    except (PrivlabError, KeyError, TypeError, ValueError, OSError):
        return {}
    facet = row.get("facet") or ""
    if facet:
        found = {k.split("/", 1)[1] if k.startswith(f"{facet}/") else k: v for k, v in found.items()
                 if "/" not in k or k.startswith(f"{facet}/")}
    return found


def render_studies(rows: Sequence[Mapping[str, Any]], *, title_suffix: Mapping[str, str] | None = None,
                   experiment: str | None = None, width: int | None = None, max_rows: int | None = None) -> str:
    """One titled table per study, in the order studies first appear.

    Args:
        rows: The rows (module docstring).
        title_suffix: Text added to a study's title, by study.
        experiment: The MLflow experiment, named in the hint about metrics left out.
        width: The widest a table may be (the terminal's); None: no limit.
        max_rows: The most rows a study's table shows (a grid of 10⁴ configurations is no table
            to read in a terminal); a line after it says how many more there are and how
            ``privlab compare`` lists them. The checks against theory still count every row.
            None: every row.
    """
    studies: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        studies.setdefault(row["study"], []).append(row)
    blocks = []
    hidden_total = 0
    verdicts: list[str] = []
    small_n: list[bool] = []
    name = shlex.quote(experiment) if experiment else "EXPERIMENT"
    for study, members in studies.items():
        count = f"{len(members)} configuration{'s' if len(members) != 1 else ''}"
        extra = (title_suffix or {}).get(study, "")
        hidden: list[str] = []
        blocks.append(f"{study} ({count}{extra})\n" + render_study(members, verdicts=verdicts, hidden=hidden,
                                                                   width=width, small_n=small_n, max_rows=max_rows))
        if max_rows is not None and len(members) > max_rows:
            more = len(members) - max_rows
            blocks[-1] += "\n" + _fitted(
                f"… and {more:,} more row{'s' if more != 1 else ''}: `privlab compare {name} --study "
                f"{shlex.quote(study)}` lists them all, `--format csv --output FILE` writes them to a file", width)
        if hidden:
            hidden_total += len(hidden)
            blocks[-1] += "\n" + _fitted(
                f"… and {len(hidden)} more metric{'s' if len(hidden) != 1 else ''} "
                f"({', '.join(hidden[:3])}{', …' if len(hidden) > 3 else ''}): "
                f"`privlab compare {name} --study {shlex.quote(study)} --metric NAME` shows any of them, "
                f"`privlab compare {name} --study {shlex.quote(study)} --format csv` all of them", width)
    notes = []
    if any(small_n):
        notes.append(SMALL_N_NOTE.format(min=MIN_CI_COUNT))
    if verdicts:
        off = verdicts.count("OFF")
        notes.append(VERDICT_NOTE.format(checks=len(verdicts), ok=len(verdicts) - off, off=off,
                                         chance=0.05 * len(verdicts)))
    return "\n\n".join([*blocks, *(_fitted(note, width) for note in notes)])


def _fitted(text: str, width: int | None) -> str:
    """A note or hint wrapped to the terminal's width, never inside a word or a `command` (one
    to copy stays on one line)."""
    if width is None:
        return text
    parts = text.split("`")
    held = "`".join(part.replace(" ", "\xa0") if i % 2 else part for i, part in enumerate(parts))
    return textwrap.fill(held, width=max(width, 40), break_long_words=False,
                         break_on_hyphens=False).replace("\xa0", " ")


def render_study(rows: Sequence[Mapping[str, Any]], *, verdicts: list[str] | None = None,
                 hidden: list[str] | None = None, width: int | None = None,
                 small_n: list[bool] | None = None, max_rows: int | None = None) -> str:
    """One study's rows as an aligned table (see the module docstring); each verdict
    (``ok``/``OFF``) is appended to ``verdicts`` when given, shown or not. Past
    :data:`MAX_METRIC_COLUMNS` metrics, or past ``width`` characters, the rest are left out and
    their names appended to ``hidden`` when given. ``small_n`` gets True when a mean is shown
    without its interval. Only the first ``max_rows`` rows are shown (None: all)."""
    varying = varying_params(rows)
    rows = _facets_in_order(rows, varying)
    columns: list[tuple[str, list[str]]] = [("config", [str(r["id"]) for r in rows])]
    names = display_names(varying)
    for key in varying:
        columns.append((names[key], [fmt(_plain(r["params"].get(key))) for r in rows]))
    expected = [expectations(r) for r in rows]
    # by metric name: the same order wherever the rows come from (a summary, MLflow)
    metric_keys = sorted({k for row in rows for k in row["metrics"]}, key=metric_order)
    shown: set[str] = set()
    for key in metric_keys:
        if not key.endswith(("_mean", "_rate")) or key.startswith("eps_step_"):
            continue
        base = key.rsplit("_", 1)[0]
        low, high = f"{base}_ci_low", f"{base}_ci_high"
        cells = []
        for row in rows:
            m = row["metrics"]
            cell = fmt(m.get(key))
            if _too_few(m, key):
                cell += f" (n={int(m[f'{base}_count'])})"
                if small_n is not None:
                    small_n.append(True)
            elif _number(m.get(low)) and _number(m.get(high)):
                cell += f" [{fmt(m[low])}, {fmt(m[high])}]"
            cells.append(cell)
        columns.append((base, cells))
        shown.update({key, low, high})
        if any(base in e for e in expected):
            columns.append(("expected", [_verdict(e.get(base), r["metrics"], base, interval=not _too_few(r["metrics"], key))
                                         for e, r in zip(expected, rows)]))
    for key in metric_keys:
        statistic = key.rsplit("_", 1)[-1] if "_" in key else ""
        if key in shown or statistic in STATISTICS or key.startswith(("eps_step_", "delta_total", "timing_")):
            continue
        if key == "eps_total":
            continue
        columns.append((key, [fmt(r["metrics"].get(key)) for r in rows]))
    if any("eps_total" in r["metrics"] for r in rows):
        columns.append(("ε", [fmt(r["metrics"].get("eps_total")) for r in rows]))
    columns = [c for c in columns if c[0] == "config" or any(cell for cell in c[1])]
    fixed = 1 + len(varying)
    metric_columns = [c for c in columns[fixed:] if c[0] not in ("expected", "ε")]
    def span(shown: Sequence[tuple[str, list[str]]]) -> int:
        return sum(max(len(header), *(len(cell) for cell in cells)) for header, cells in shown) + 2 * (len(shown) - 1)

    keep = min(len(metric_columns), MAX_METRIC_COLUMNS)
    while True:
        cut = {name for name, _ in metric_columns[keep:]}
        kept = [column for i, column in enumerate(columns)
                if column[0] not in cut and not (column[0] == "expected" and columns[i - 1][0] in cut)]
        if width is None or keep <= 1 or span(kept) <= width:
            break
        keep -= 1  # wider than the terminal: leave out the last metric shown
    if hidden is not None:
        hidden += [name for name, _ in metric_columns[keep:]]
    if verdicts is not None:  # every check, shown or not: the columns a narrow terminal leaves out count too
        verdicts += [cell.rsplit(" ", 1)[1] for header, cells in columns if header == "expected"
                     for cell in cells if cell.endswith((" ok", " OFF"))]
    columns = kept
    shown_rows = len(rows) if max_rows is None else min(len(rows), max_rows)
    columns = [(header, cells[:shown_rows]) for header, cells in columns]
    widths = [max(len(header), *(len(cell) for cell in cells)) for header, cells in columns]
    lines = ["  ".join(h.ljust(w) for (h, _), w in zip(columns, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for i in range(shown_rows):
        lines.append("  ".join(cells[i].ljust(w) for (_, cells), w in zip(columns, widths)).rstrip())
    return "\n".join(lines)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x)


def _too_few(metrics: Mapping[str, Any], key: str) -> bool:
    """Whether mean ``key`` is over too few values for its t-interval to be shown."""
    if not key.endswith("_mean"):
        return False  # a rate's Wilson interval stays in [0, 1] and is shown for any n
    count = metrics.get(f"{key.removesuffix('_mean')}_count")
    return _number(count) and count < MIN_CI_COUNT


def _facets_in_order(rows: Sequence[Mapping[str, Any]], varying: Sequence[str]) -> list[Mapping[str, Any]]:
    """``rows`` with each configuration's facets in the numeric order of the varying
    parameters, left to right as the table shows them (``d1_cp001`` — cp 0.001 — before
    ``d1_cp01``; depth ``unlimited`` last); configurations stay where they are."""
    def config(row: Mapping[str, Any]) -> str:
        return str(row.get("config") or str(row["id"]).split(".", 1)[0])

    def key(row: Mapping[str, Any]) -> tuple[tuple[int, float, str], ...]:
        return tuple(_numeric(row["params"].get(k)) for k in varying)

    ordered: list[Mapping[str, Any]] = []
    i = 0
    while i < len(rows):
        j = i + 1
        while j < len(rows) and config(rows[j]) == config(rows[i]):
            j += 1
        ordered += sorted(rows[i:j], key=key) if j - i > 1 else rows[i:j]
        i = j
    return ordered


def _numeric(value: Any) -> tuple[int, float, str]:
    """A sort key ordering numbers (and numeric text) by value, "unlimited" and "inf" after
    every number, then other text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return 0, float(value), ""
    text = "" if value is None else str(value)
    if text.lower() in ("unlimited", "inf", "none", ""):
        return 0, math.inf, text
    try:
        return 0, float(text), ""
    except ValueError:
        return 1, 0.0, text


def _verdict(expectation: Any, metrics: Mapping[str, Any], base: str, *, interval: bool = True) -> str:
    if expectation is None:
        return ""
    low, high = metrics.get(f"{base}_ci_low"), metrics.get(f"{base}_ci_high")
    if not interval or not (_number(low) and _number(high)):
        return str(expectation)
    return f"{expectation} {'ok' if expectation.holds(float(low), float(high)) else 'OFF'}"
