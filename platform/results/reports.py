"""Study reports: the results pages (markdown tables and PNG figures) a workload draws.

A workload may override :meth:`privlab.platform.experiment.registry.Workload.report`; it receives a
:class:`StudyResults` — the aggregated entries of one study of a finished run, the reservoir
samples of its configurations and how the run was made — and returns files (``name → bytes or
text``). The runner logs them on the parent run under ``report/<study>/`` and, with
``privlab run --report-dir DIR``, also writes them to ``DIR/<study>/``. ``privlab report RUN_ID``
rebuilds them later from what the run logged, so a report can be redrawn (or a new workload
report applied) without recomputing anything.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privlab.platform.core.errors import SpecError
from privlab.platform.experiment import registry

REPORT_PREFIX = "report"
MARKER = ".privlab-report"


@dataclasses.dataclass(frozen=True, kw_only=True)
class StudyResults:
    """Everything a workload's report may use, for one study of one finished run."""

    study: str
    workload: str
    run_id: str
    experiment: str
    spec_name: str
    root_seed: int
    command: str | None
    entries: tuple[Mapping[str, Any], ...]
    reservoirs: Mapping[str, pd.DataFrame]
    timing: Mapping[str, Any]

    @property
    def units(self) -> int:
        """Trials or repetitions per configuration (the largest, if they differ)."""
        return max((int(e["units"]) for e in self.entries), default=0)

    def wall_time_sentence(self) -> str | None:
        """How long the run took, for a report's header (None when the run did not record it).

        ``timing["wall_seconds"]`` is the last session's: after a ``--resume`` the earlier
        sessions are not in it, so a resumed run states that and adds the compute time of all
        its configurations over every session (each configuration's, checkpointed across stops).
        """
        wall = self.timing.get("wall_seconds")
        if not isinstance(wall, (int, float)):
            return None
        workers = self.timing.get("workers", "?")
        if not self.timing.get("resumed"):
            return f"Wall time of the whole run: {wall / 60:.1f} min on {workers} worker(s)."
        compute = sum(float(t.get("compute_seconds", 0.0)) for t in self.timing.get("configurations", {}).values())
        return (f"The run was resumed: its last session took {wall / 60:.1f} min on {workers} worker(s); "
                f"its configurations' compute time over all sessions was {compute / 3600:.1f} h (summed over workers).")



def figure_png(figure: Any, *, dpi: float | None = None) -> bytes:
    """A finished matplotlib figure as PNG bytes (laid out tight, then closed): every results
    page's and plot's last step.

    The image is stored with a 256-colour palette (Pillow's fast octree, alpha kept): a plot of
    a few lines and markers looks the same, and takes about a quarter of the bytes of
    matplotlib's 32-bit RGBA, which matters when every run stores its pages.
    """
    import matplotlib.pyplot as plt
    from PIL import Image  # matplotlib's own dependency

    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", **({} if dpi is None else {"dpi": dpi}))
    plt.close(figure)
    buffer.seek(0)
    with Image.open(buffer) as image:
        palette = image.quantize(colors=256, method=Image.Quantize.FASTOCTREE)
    out = io.BytesIO()
    palette.save(out, format="PNG", optimize=True)
    return out.getvalue()

def build_reports(
    summary: Mapping[str, Any],
    reservoir_of: Callable[[str], pd.DataFrame | None],
    *,
    command: str | None,
) -> dict[str, bytes]:
    """Call each study's workload report; returns ``"<study>/<file>" → bytes``."""
    by_study: dict[str, list[Mapping[str, Any]]] = {}
    for entry in summary["configurations"]:
        by_study.setdefault(entry["study"], []).append(entry)
    files: dict[str, bytes] = {}
    for study, entries in by_study.items():
        workloads = {e["workload"] for e in entries}
        for workload_name in sorted(workloads):
            workload = registry.get_workload(workload_name)
            chosen = tuple(e for e in entries if e["workload"] == workload_name)
            reservoirs = {e["id"]: frame for e in chosen if (frame := reservoir_of(e["id"])) is not None}
            results = StudyResults(
                study=study, workload=workload_name, run_id=summary["run_id"], experiment=summary["experiment"],
                spec_name=summary["spec"], root_seed=int(summary["root_seed"]), command=command,
                entries=chosen, reservoirs=reservoirs, timing=summary.get("timing", {}),
            )
            for name, content in workload.report(results).items():
                if name.startswith("/") or ".." in Path(name).parts:
                    raise SpecError(f"report file name {name!r} of workload {workload_name!r} must stay inside its folder")
                files[f"{study}/{name}"] = content.encode() if isinstance(content, str) else bytes(content)
    return files


def write_report_dir(files: Mapping[str, bytes], out: Path) -> list[Path]:
    """Write report files under ``out`` atomically: all of them appear, or none do.

    ``out`` must be absent, empty, or a report folder written earlier (it holds a marker file),
    which is then replaced as a whole.
    """
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise SpecError(f"--report-dir {out} exists and is not a privlab report folder; choose a new or empty folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        written = []
        for name, content in files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            written.append(out / name)
        (staging / MARKER).write_text("written by privlab; replaced as a whole on the next write\n")
        if out.exists():
            retired = out.with_name(f".{out.name}-old-{os.getpid()}")
            out.rename(retired)
            staging.rename(out)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return written


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    """A frame as a parquet artifact's bytes (without its index; a small footer:
    :func:`~privlab.platform.tracking.result_parts.compact_parquet_bytes`)."""
    import pyarrow as pa

    from privlab.platform.tracking.result_parts import compact_parquet_bytes

    return compact_parquet_bytes(pa.Table.from_pandas(frame, preserve_index=False))


# Schema metadata that marks a reservoir artifact stored long (one row per kept value).
_LONG_LAYOUT = {b"privlab.layout": b"long"}
_METRICS_KEY = b"privlab.metrics"


def reservoir_frame(values: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """Each metric's reservoir sample as a column (shorter samples padded with NaN)."""
    return pd.DataFrame({name: pd.Series(np.asarray(kept, np.float64)) for name, kept in values.items()})


def parquet_frame(data: bytes | None) -> pd.DataFrame | None:
    """A reservoir artifact's bytes as a frame, a column per metric (None when absent). Reads
    the long layout (``(metric, value)`` rows, ``privlab.layout = long`` in the schema's metadata, the
    metrics' order in ``privlab.metrics``) of the reservoir artifacts runs logged before result parts
    wrote, and the wide one (a column per metric) of runs before those."""
    if not data:
        return None
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(data))
    metadata = table.schema.metadata or {}
    if metadata.get(b"privlab.layout") != b"long":
        return table.to_pandas()
    names = np.asarray(table.column("metric").to_pylist(), dtype=object)
    values = table.column("value").to_numpy()
    return reservoir_frame({name: values[names == name] for name in json.loads(metadata[_METRICS_KEY])})
