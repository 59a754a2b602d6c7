"""A pd-generate bundle of two neighbouring inputs (one record added) carries no value that
differs by the record count, apart from the synthetic records and the fields the noise sets
(issue 30 item 9; the release's version is tests/test_release.py's neighbours test).

Before the fix, summary.json published ``split_sizes``, the exact sizes of D_T, D_P, D_S and
the test set, summing to the number of complete records.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privlab.mechanisms.plausible_deniability.census_like import census_like
from privlab.mechanisms.plausible_deniability.dataset import CodedTable
from privlab.mechanisms.plausible_deniability.generation_params import GenerationParams
from privlab.mechanisms.plausible_deniability.generation_run import generate, write_bundle

N = 400  # D; its neighbour D' holds the same records and one more
DATA_FILES = {"released.csv", "released.parquet", "SHA256SUMS"}
NOISE_FIELDS = {"released", "pass_rate", "structure", "seconds"}  # set by the DP draws or the clock


def _bundle(tmp_path: Path, name: str, table: CodedTable, **extra: object) -> Path:
    params = GenerationParams(toy_records=N, model_epsilon=1.0, k=10, gamma=2.0, epsilon0=1.0, t=1, omega="1-3",
                              max_plausible=20, candidates=60, batch=30, **extra)  # type: ignore[arg-type]
    generation = generate(params, table, rng=np.random.default_rng(5))
    out = tmp_path / name
    write_bundle(out, params, generation, seed=5, config_id="c0")
    return out


def _published(out: Path) -> dict[str, object]:
    """Every non-data file of the bundle, summary.json without its noise-dependent fields."""
    files: dict[str, object] = {}
    for path in sorted(out.iterdir()):
        if path.name in DATA_FILES:
            continue
        if path.name == "summary.json":
            files[path.name] = {k: v for k, v in json.loads(path.read_text()).items() if k not in NOISE_FIELDS}
        else:
            files[path.name] = path.read_text()
    return files


@pytest.fixture(scope="module")
def neighbours() -> tuple[CodedTable, CodedTable]:
    codes, domain = census_like(N + 1, np.random.default_rng(11))
    smaller = CodedTable(codes=codes.iloc[:N].reset_index(drop=True), domain=domain)
    return smaller, CodedTable(codes=codes, domain=domain)


def test_with_public_records_no_published_file_differs_between_neighbours(
        tmp_path: Path, neighbours: tuple[CodedTable, CodedTable]) -> None:
    d, d_prime = (_bundle(tmp_path, name, table, public_records=350) for name, table in zip(("d", "n"), neighbours))
    published, other = _published(d), _published(d_prime)
    assert set(published) == {"config.toml", "ledger.json", "ledger.txt", "privacy-statement.md", "summary.json"}
    for name in published:
        assert published[name] == other[name], f"{name} differs between neighbouring inputs"
    split = published["summary.json"]["split"]  # type: ignore[index]
    assert split == {"fractions": {"structure": 0.19, "parameters": 0.19, "seeds": 0.49}, "public_records": 350,
                     "sizes": {"structure": 66, "parameters": 66, "seeds": 171}}
    assert "fixed by the spec" in published["privacy-statement.md"]  # type: ignore[operator]


def test_without_public_records_only_the_disclosed_sensitivities_differ(
        tmp_path: Path, neighbours: tuple[CodedTable, CodedTable]) -> None:
    # |D_T| = floor(0.19 n): 75 for n = 399, 76 for its neighbour n = 400.
    d = neighbours[0]
    smaller = CodedTable(codes=d.codes.iloc[:N - 1].reset_index(drop=True), domain=d.domain)
    bundles = [_bundle(tmp_path, name, table) for name, table in (("a", smaller), ("b", d))]
    published, other = (_published(b) for b in bundles)
    for name in ("summary.json", "config.toml", "privacy-statement.md"):
        assert published[name] == other[name], f"{name} differs between neighbouring inputs"
    summary = json.loads((bundles[0] / "summary.json").read_text())
    assert "split_sizes" not in summary and summary["split"]["sizes"] is None
    assert "count can be recovered" in published["privacy-statement.md"]  # type: ignore[operator]
    # The residual the statement discloses: the entropies' sensitivity Δ_H(|D_T|), nothing else.
    events = [json.loads((b / "ledger.json").read_text())["events"] for b in bundles]
    differing_steps = set()
    for first, second in zip(*events, strict=True):
        differing = {key for key in first if first[key] != second[key]}
        assert differing <= {"sensitivity", "noise_scale"}, differing
        if differing:
            differing_steps.add(first["step"])
    assert differing_steps == {"pd.structure"}
