"""What ``compare``, ``shortlist`` and ``report`` answer about a births grid slice.

A seeded slice of experiments/births/grid.toml (12 grid points of each study, 2 attempts each,
on the public NVSS 10K sample) is run serially; then ``privlab compare`` (the table, CSV, and
``--metric accepted``), ``privlab shortlist`` and ``privlab report`` read it back. Each output,
with the run's id, the temporary folder and the wall time masked, must equal the fixture
tests/fixtures/births_slice_answers.json.gz: every word and every integer exactly, every other
number to one unit of its last printed digit (at least 1e-8 relative). The tolerance is for the
machine, not the code: the regression criteria's least squares go through OpenBLAS, whose kernel
is chosen for the CPU at run time, so their results differ in the last bits between CPU models
(``OPENBLAS_CORETYPE=Sandybridge`` shows it on one machine). The report's plots are not compared:
they draw the ``configurations.csv`` compared here, with the machine's fonts.

The slice names its data by an absolute path. Seeds key a file by its path relative to the
spec's folder, so the answers are the same from a checkout in any folder with the public data
beside it (as ``../shared/data``).

Rewrite the fixture with this module's ``__main__``:

    python tests/test_births_slice_answers.py
"""

from __future__ import annotations

import contextlib
import csv
import gzip
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
FIXTURE = ROOT / "tests" / "fixtures" / "births_slice_answers.json.gz"
SLICE = [f"study.{study}.{key}={value}" for study in ("privbayes_theta", "privbayes_degree")
         for key, value in (("grid_points", 12), ("repetitions", 2), ("params.data", str(NVSS_10K)))]
WALL_TIME = re.compile(r"(Wall time of the whole run|its last session took|compute time over all sessions was)"
                       r"[^\n]*")
RELATIVE_TO_CHECKOUT = re.compile(r"(?:\.\./)+[^\"\s]*?(experiments/births/)")
RUN_ID = re.compile(r"\b[0-9a-f]{32}\b")  # each configuration's run id (the CSV's run_id column)
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
RELATIVE_TOLERANCE = 1e-8


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
    from privlab.platform.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    if code != 0 and not refusal_ok:
        raise RuntimeError(f"privlab {' '.join(args)} exited {code}: {err.getvalue()}")
    return code, err.getvalue()


def slice_answers(folder: Path) -> dict[str, str]:
    """Run the slice in ``folder``; each masked text answer, by name."""
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
            if path.is_file() and path.suffix != ".png":
                answers[f"report/{path.relative_to(folder / 'report')}"] = path.read_bytes()
    finally:
        os.chdir(here)
    masked = {name: _mask(name, data, run_id=run_id, folder=str(folder)).decode() for name, data in answers.items()}
    if keep := os.environ.get("PRIVLAB_KEEP_ANSWERS"):  # to see what changed
        for name, text in masked.items():
            (Path(keep) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(keep) / name).write_text(text)
    return masked


def differences(expected: str, got: str) -> list[str]:
    """Where ``got`` departs from ``expected``: a word or integer that differs, or a number
    further than one unit of its last printed digit (and ``RELATIVE_TOLERANCE``) from the
    expected one. Runs of white space count as one space (a table's column widths follow its
    widest value)."""
    want_words, got_words = NUMBER.split(" ".join(expected.split())), NUMBER.split(" ".join(got.split()))
    want_numbers, got_numbers = NUMBER.findall(" ".join(expected.split())), NUMBER.findall(" ".join(got.split()))
    if want_words != got_words or len(want_numbers) != len(got_numbers):
        changed = next((f"{w!r} became {g!r}" for w, g in zip(want_words, got_words) if w != g), "a different length")
        return [f"the text changed: {changed}"]
    return [f"{want} became {have}" for want, have in zip(want_numbers, got_numbers) if not _close(want, have)]


def _close(want: str, have: str) -> bool:
    if want == have:
        return True
    if not re.search(r"[.eE]", want + have):
        return False  # integers (counts, indices, seeds) must match exactly
    a, b = float(want), float(have)
    mantissa, _, exponent = want.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    last_digit = 10.0 ** (int(exponent or 0) - decimals)
    return abs(a - b) <= max(last_digit * (1 + 1e-9), RELATIVE_TOLERANCE * max(abs(a), abs(b)))


@pytest.mark.slow  # 48 flows on the 10K sample, serially
@pytest.mark.usefixtures("nvss_10k")
def test_compare_shortlist_and_report_answer_as_before(tmp_path: Path) -> None:
    expected = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    answers = slice_answers(tmp_path)
    assert sorted(answers) == sorted(expected)
    changed = {name: found[:3] for name in sorted(expected) if (found := differences(expected[name], answers[name]))}
    assert not changed, f"these answers changed: {changed}"


def test_differences_hold_each_number_to_its_printed_precision() -> None:
    assert differences("a  0.1235 (n=2)\n", "a 0.1234 (n=2)") == []  # one unit of the last printed digit
    assert differences("x,1011.8399647358933", "x,1011.8399647356204") == []  # the machine's last bits
    assert differences("a 0.1235", "a 0.1233") == ["0.1235 became 0.1233"]
    assert differences("x,1011.8399647358933", "x,1011.84") == ["1011.8399647358933 became 1011.84"]
    assert differences("n=2", "n=3") == ["2 became 3"]
    assert differences("accepted 0", "rejected 0")[0].startswith("the text changed")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="privlab-births-answers-") as tmp:
        texts = slice_answers(Path(tmp).resolve())
    FIXTURE.write_bytes(gzip.compress(json.dumps(texts, indent=1, sort_keys=True).encode(), mtime=0))
    print(f"wrote {FIXTURE.relative_to(ROOT)}: {len(texts)} answers")
    sys.exit(0)
