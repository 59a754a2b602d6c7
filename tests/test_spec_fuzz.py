"""Every key of a run spec, fed random TOML values of every type (issue 46 item 2).

A seeded generator (no global state; the same cases every run) picks a key the quickstart's
spec may hold — every top-level, ``[budget]``, ``[tracking]`` and ``[execution]`` key, and each
study's own keys, every parameter of its workload and a grid over each — and a value of a random
TOML type: integers from 0 to 400 digits, floats from subnormal to inf and nan, booleans,
strings from empty to 600 characters (slashes, NUL, non-ASCII), dates and times, arrays (empty,
mixed, nested) and inline tables. Each case goes through the command line in process, as
``--set KEY=VALUE``: ``privlab validate`` must exit 0, 2 (bad input) or 3 (a configuration over
the budget), and a case it refuses must be refused by ``privlab run`` too, with the same code, a message, no traceback and nothing created (no
``mlflow.db``, no ``mlruns/``). The default suite runs 200 cases (about 10 s); the slow suite 10⁴.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from privlab.platform.cli.main import EXIT_BUDGET, EXIT_INPUT, EXIT_OK, main
from privlab.platform.experiment import registry
from privlab.platform.experiment.spec_keys import (BUDGET_KEYS, EXECUTION_KEYS, STUDY_KEYS, TOP_KEYS,
                                                   TRACKING_KEYS)

ROOT = Path(__file__).resolve().parents[1]


def _base_spec() -> str:
    """The quickstart without its plausible-deniability study (whose plan check alone takes
    seconds for some values: a budget question, not a parsing one)."""
    quickstart = (ROOT / "experiments" / "quickstart.toml").read_text()
    cut = re.sub(r"\[\[study\]\][^\[]*\nname = \"plausible_deniability\".*?(?=\n\[\[study\]\])", "", quickstart,
                 flags=re.S)
    assert "pd_generation" not in cut
    return cut


def _keys(spec: str) -> list[str]:
    """Every key a value can be given to (as ``--set`` spells it)."""
    import tomllib

    document = tomllib.loads(spec)
    keys = [k for k in sorted(TOP_KEYS) if k != "study"]
    keys += [f"{table}.{k}" for table, names in (("budget", BUDGET_KEYS), ("tracking", TRACKING_KEYS),
                                                 ("execution", EXECUTION_KEYS)) for k in sorted(names)]
    for study in document["study"]:
        prefix = f"study.{study['name']}"
        keys += [f"{prefix}.{k}" for k in sorted(STUDY_KEYS - {"name", "params", "grid"})]
        keys += [f"{prefix}.dataset.{k}" for k in ("path", "generator", "format", "params.n", "columns")]
        fields = [f.name for f in dataclasses.fields(registry.get_workload(study["workload"]).Params)]
        keys += [f"{prefix}.params.{name}" for name in fields] + [f"{prefix}.grid.{name}" for name in fields]
    return keys


HUGE = int("9" * 400)
INTEGERS = [0, 1, -1, 2, 7, 10**6, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63), 10**18, 10**30, HUGE, -HUGE]
FLOATS = ["0.0", "-0.0", "5e-324", "1e-300", "0.5", "1e10", "1e30", "1.7976931348623157e308", "inf", "-inf", "nan"]
STRINGS = ["", " ", "auto", "inf", "basic", "centre", "x" * 600, "é" * 300, "a/b", "..", ".", "ε\u0000", "\n",
           "laplace_mean", "bounded_normal", "5-11", "../../etc/passwd", "0" * 400, "/".join(["y" * 200] * 30),
           "x" * 300 + ".csv", "data\u0000.csv", "/dev/null", "/proc", "~/missing.csv"]
DATES = ["1979-05-27", "07:32:00", "1979-05-27T07:32:00Z", "1979-05-27T07:32:00"]


def _scalar(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return str(rng.choice(INTEGERS))
    if kind == 1:
        return str(rng.randint(-10**6, 10**6))
    if kind == 2:
        return rng.choice(FLOATS)
    if kind == 3:
        return rng.choice(["true", "false"])
    if kind == 4:
        return json.dumps(rng.choice(STRINGS), ensure_ascii=False)  # a TOML basic string
    return rng.choice(DATES)


def toml_value(rng: random.Random, depth: int = 0) -> str:
    """A random TOML value of any type, as text."""
    kind = rng.randrange(10)
    if kind < 7 or depth > 2:
        return _scalar(rng)
    if kind < 9:
        return "[" + ", ".join(toml_value(rng, depth + 1) for _ in range(rng.randrange(4))) + "]"
    items = {rng.choice(["n", "epsilon", "a", "generator", "path"]): toml_value(rng, depth + 1)
             for _ in range(rng.randrange(3))}
    return "{" + ", ".join(f"{k} = {v}" for k, v in items.items()) + "}"


@dataclasses.dataclass
class Outcome:
    validated: int = 0
    refused: int = 0


def _fuzz(workdir: Path, capsys: pytest.CaptureFixture[str], *, cases: int, seed: int) -> Outcome:
    spec = _base_spec()
    (workdir / "spec.toml").write_text(spec)
    keys = _keys(spec)
    rng = random.Random(seed)
    outcome = Outcome()
    for case in range(cases):
        setting = f"{rng.choice(keys)}={toml_value(rng)}"
        where = f"case {case}: --set {setting[:200]!r}"
        code = main(["validate", "spec.toml", "--set", setting])
        err = capsys.readouterr().err
        assert code in (EXIT_OK, EXIT_INPUT, EXIT_BUDGET), f"{where}: validate exited {code}: {err[-2000:]}"
        if code == EXIT_OK:
            outcome.validated += 1
            continue
        outcome.refused += 1
        assert err.startswith("privlab: ") and len(err) < 5_000, f"{where}: {err[:2000]}"
        refused = code
        code = main(["run", "spec.toml", "--serial", "--no-progress", "--set", setting])
        err_run = capsys.readouterr().err
        assert code == refused, f"{where}: run exited {code}: {err_run[-2000:]}"
        assert sorted(p.name for p in workdir.iterdir()) == ["spec.toml"], f"{where}: run created files"
    return outcome


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_spec_key_takes_any_toml_value_without_a_traceback(workdir: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    outcome = _fuzz(workdir, capsys, cases=200, seed=4601)
    assert outcome.refused > 100 and outcome.validated > 10  # both paths were exercised


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 10⁴ cases of validate (and run, when refused): about 8 minutes on 2 cores
def test_every_spec_key_takes_any_toml_value_without_a_traceback_10k(workdir: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    outcome = _fuzz(workdir, capsys, cases=10_000, seed=4602)
    assert outcome.refused > 5_000 and outcome.validated > 300


def test_the_generator_covers_every_key_and_type() -> None:
    """The default run's cases reach every kind of key and every TOML type."""
    spec = _base_spec()
    keys = _keys(spec)
    assert {"seed", "budget.epsilon", "execution.max_configurations", "tracking.experiment"} <= set(keys)
    assert "study.laplace_mean.params.n" in keys and "study.laplace_mean.grid.n" in keys
    rng = random.Random(4601)
    values = [toml_value(rng) for _ in range(300)]
    import tomllib

    kinds = {type(tomllib.loads(f"v = {v}")["v"]).__name__ for v in values}
    assert kinds == {"int", "float", "bool", "str", "date", "time", "datetime", "list", "dict"}
