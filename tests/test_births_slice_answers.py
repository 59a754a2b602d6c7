"""What ``compare``, ``shortlist`` and ``report`` answer about a births grid slice is exactly what
they answered before configuration runs were logged in batches with their results in parts.

A seeded slice of experiments/births/grid.toml (12 grid points of each study, 2 attempts each,
on the public NVSS 10K sample) is run serially; then ``privlab compare`` (the table, CSV, and
``--metric accepted``), ``privlab shortlist`` and ``privlab report`` read it back. Each output,
with the run's id, the temporary folder and the wall time masked, must hash to what the same
commands printed with the per-run artifacts (``result.json``, ``reservoir.parquet``, a
``summary.json`` holding every entry): tests/fixtures/births_slice_answers.json, written by this
module's ``__main__`` on that code.

    python tests/test_births_slice_answers.py > tests/fixtures/births_slice_answers.json
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NVSS_10K = Path(__file__).resolve().parents[2] / "shared" / "data" / "nvss" / "birth_2019_nber_us_SINGLETON_SAMPLE10K.csv"
FIXTURE = ROOT / "tests" / "fixtures" / "births_slice_answers.json"
SLICE = [f"study.{study}.{key}={value}" for study in ("privbayes_theta", "privbayes_degree")
         for key, value in (("grid_points", 12), ("repetitions", 2), ("params.data", str(NVSS_10K)))]
WALL_TIME = re.compile(r"(Wall time of the whole run|its last session took|compute time over all sessions was)"
                       r"[^\n]*")
RELATIVE_TO_CHECKOUT = re.compile(r"(?:\.\./)+[^\"\s]*?(experiments/births/)")
RUN_ID = re.compile(r"\b[0-9a-f]{32}\b")  # each configuration's run id (the CSV's run_id column)


def _mask(name: str, data: bytes, *, run_id: str, folder: str) -> bytes:
    """What may differ between two runs of the same seeded slice: run ids, the folder, wall
    times, and (in CSV) the timing columns."""
    text = data.decode()
    text = text.replace(run_id, "<run>").replace(run_id[:8], "<run8>").replace(folder, "<tmp>")
    text = text.replace(str(ROOT), "<checkout>").replace(str(NVSS_10K.parent), "<nvss>")
    text = RELATIVE_TO_CHECKOUT.sub(r"<checkout>/\1", text)  # the shortlist's paths, relative to where it is
    text = RUN_ID.sub("<id>", WALL_TIME.sub(r"\1 <masked>", text))
    return (_without_timing(text) if name.endswith(".csv") else text).encode()


def _without_timing(text: str) -> str:
    """CSV tables (one per study, each after a ``# study:`` line) without their ``timing_*`` columns."""
    out, block = [], []

    def flush() -> None:
        if block:
            rows = list(csv.reader(block))
            keep = [i for i, column in enumerate(rows[0]) if not column.startswith("timing_")]
            buffer = io.StringIO()
            csv.writer(buffer, lineterminator="\n").writerows([[row[i] for i in keep] for row in rows])
            out.append(buffer.getvalue().rstrip("\n"))
            block.clear()

    for line in text.split("\n"):
        if line.startswith("# study:") or not line:
            flush()
            out.append(line)
        else:
            block.append(line)
    flush()
    return "\n".join(out)


def _cli(*args: str, refusal_ok: bool = False) -> tuple[int, str]:
    """(exit code, stderr) of a privlab command run in this process."""
    from privlab.platform.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    if code != 0 and not refusal_ok:
        raise RuntimeError(f"privlab {' '.join(args)} exited {code}: {err.getvalue()}")
    return code, err.getvalue()


def slice_answers(folder: Path) -> dict[str, str]:
    """Run the slice in ``folder``; the SHA-256 of each masked answer, by name."""
    here = Path.cwd()
    os.chdir(folder)
    try:
        uri = f"sqlite:///{folder / 'mlflow.db'}"
        _cli("run", str(ROOT / "experiments" / "births" / "grid.toml"), "--serial", "--no-progress",
             "--tracking-uri", uri, "--summary-json", str(folder / "summary.json"), *sum((["--set", s] for s in SLICE), []))
        run_id = json.loads((folder / "summary.json").read_text())["run_id"]
        answers: dict[str, bytes] = {}
        for name, args in {"compare.txt": [], "compare.csv": ["--format", "csv"],
                           "compare-accepted.txt": ["--metric", "accepted"],
                           "compare-accepted.csv": ["--metric", "accepted", "--format", "csv"]}.items():
            _cli("compare", "births-grid", "--tracking-uri", uri, "--output", str(folder / name), *args)
            answers[name] = (folder / name).read_bytes()
        for min_prob in ("0", "0.2"):
            out = folder / f"shortlist-{min_prob}.toml"
            code, err = _cli("shortlist", run_id, "--min-prob", min_prob, "--out", str(out), "--tracking-uri", uri,
                             refusal_ok=True)
            answers[out.name] = out.read_bytes() if code == 0 else f"exit {code}: {err}".encode()  # a refusal too
        _cli("report", run_id, "--out", str(folder / "report"), "--tracking-uri", uri)
        for path in sorted((folder / "report").rglob("*")):
            if path.is_file():
                answers[f"report/{path.relative_to(folder / 'report')}"] = path.read_bytes()
    finally:
        os.chdir(here)
    masked = {name: data if name.endswith(".png") else _mask(name, data, run_id=run_id, folder=str(folder))
              for name, data in answers.items()}
    if keep := os.environ.get("PRIVLAB_KEEP_ANSWERS"):  # to see what changed
        for name, data in masked.items():
            (Path(keep) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(keep) / name).write_bytes(data)
    return {name: hashlib.sha256(data).hexdigest() for name, data in masked.items()}


@pytest.mark.slow  # 48 flows on the 10K sample, serially
@pytest.mark.usefixtures("nvss_10k")
def test_compare_shortlist_and_report_answer_as_before(tmp_path: Path) -> None:
    expected = json.loads(FIXTURE.read_text())
    answers = slice_answers(tmp_path)
    assert sorted(answers) == sorted(expected)
    changed = sorted(name for name in expected if answers[name] != expected[name])
    assert not changed, f"these answers changed: {changed}"


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="privlab-births-answers-") as tmp:
        print(json.dumps(slice_answers(Path(tmp).resolve()), indent=2, sort_keys=True))
    sys.exit(0)
