"""Private-PGM models' marginals as privlab computes them (``pgm.project``) and samples them
(``pgm.sample_codes``), held to the model's joint computed densely on domains small enough to
enumerate.

A model's joint is ``∝ exp(Σ_c θ_c)``. After a few dozen AIM rounds its potentials span hundreds
of nats, and products of ``exp(θ_c − max θ_c)`` over a score of cliques fall below float64's
smallest number: an elimination that multiplies them in linear space loses whole slices of a
marginal (issue 47: from round 23 of an AIM fit on the ACS excerpt). These tests build such
models (random potentials of that range, and AIM's own models on the ACS excerpt, a domain of
3.6·10⁶ cells) and compare every projection with the dense joint, and the sampler's records
with the model's marginals.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from privlab.mechanisms.synthesizers import pgm

needs_mbi = pytest.mark.skipif(not pgm.installed(), reason="needs Private-PGM: pip install -e '.[pgm]'")


def _dense_log_joint(potentials: dict[tuple[str, ...], np.ndarray], names: tuple[str, ...],
                     sizes: tuple[int, ...]) -> np.ndarray:
    """``Σ_c θ_c`` over the whole domain (axes in ``names`` order)."""
    log_joint = np.zeros(sizes)
    for clique, values in potentials.items():
        axes = [names.index(a) for a in clique]
        aligned = np.transpose(values, np.argsort(axes))
        log_joint = log_joint + aligned.reshape([sizes[i] if i in axes else 1 for i in range(len(sizes))])
    return log_joint


def _dense_marginal(joint: np.ndarray, names: tuple[str, ...], clique: tuple[str, ...]) -> np.ndarray:
    """The normalised marginal of a normalised dense joint over ``clique``, in its column order."""
    summed = joint.sum(axis=tuple(i for i, a in enumerate(names) if a not in clique))
    kept = [a for a in names if a in clique]
    return np.transpose(summed, [kept.index(a) for a in clique]).ravel()


def _sharp_model(seed: int) -> tuple[object, np.ndarray, tuple[str, ...]]:
    """A Markov random field on 8 columns (5,184 cells) with 20 three-way cliques whose
    potentials are uniform on [−300, 0] (the range of AIM's after 23 rounds on the ACS excerpt),
    its marginals from the dense joint, and that joint."""
    mbi = pgm.require_mbi("test")
    import jax.numpy as jnp

    sizes = (3, 2, 3, 2, 4, 3, 3, 4)
    names = tuple(f"c{i}" for i in range(len(sizes)))
    domain = mbi.Domain(names, sizes)
    rng = np.random.default_rng(seed)
    chosen: set[tuple[int, ...]] = set()
    while len(chosen) < 20:
        chosen.add(tuple(sorted(int(i) for i in rng.choice(len(sizes), 3, replace=False))))
    cliques = [tuple(names[i] for i in c) for c in sorted(chosen)]
    potentials = {c: -300.0 * rng.random(domain.project(c).shape) for c in cliques}
    log_joint = _dense_log_joint(potentials, names, sizes)
    joint = np.exp(log_joint - log_joint.max())
    joint /= joint.sum()

    def vector(tables: dict) -> object:
        return mbi.CliqueVector(domain, tuple(cliques),
                                {c: mbi.Factor(domain.project(c), jnp.asarray(v)) for c, v in tables.items()})

    marginals = {c: _dense_marginal(joint, names, c).reshape(domain.project(c).shape) for c in cliques}
    model = mbi.MarkovRandomField(potentials=vector(potentials), marginals=vector(marginals), total=1.0)
    return model, joint, names


@needs_mbi
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_every_projection_of_a_sharp_model_is_its_dense_marginal(seed: int) -> None:
    """Every 2- and 3-way marginal the model's cliques do not hold (eliminated over the
    potentials) equals the dense joint's to 1e-12 in ℓ1. The float64 product of
    exp(θ − max θ) factors got between 8 and 23 of the 36 three-way marginals wrong on these
    models, with an ℓ1 error of 2 (disjoint supports)."""
    model, joint, names = _sharp_model(seed)
    eliminated = 0
    for k in (2, 3):
        for clique in itertools.combinations(names, k):
            if model.marginals.supports(clique):
                continue
            eliminated += 1
            got = pgm.project(model, clique)
            assert np.abs(got - _dense_marginal(joint, names, clique)).sum() < 1e-12, clique
    assert eliminated >= 30


@needs_mbi
@pytest.mark.parametrize("seed", [0, 3])
def test_sampled_records_follow_a_sharp_models_marginals(seed: int) -> None:
    """20,000 records sampled from the model: every 3-way marginal of the records is within
    sqrt(cells/n) in ℓ1 of the dense model's (the expected ℓ1 error of i.i.d. draws is below
    it; the sampler's stratified draws do better). A sampler whose conditionals come from wrong
    projections is off by up to 2."""
    from privlab.mechanisms.tabular.domain import ColumnDomain, Domain

    model, joint, names = _sharp_model(seed)
    sizes = joint.shape
    domain = Domain(tuple(ColumnDomain(name=name, labels=tuple(f"v{j}" for j in range(size)))
                          for name, size in zip(names, sizes, strict=True)))
    n = 20_000
    records = pgm.sample_codes(model, domain, n, np.random.default_rng(seed))
    for clique in itertools.combinations(range(len(names)), 3):
        cells = math.prod(sizes[c] for c in clique)
        counts = pgm.marginal_counts(records, clique, sizes) / n
        expected = _dense_marginal(joint, names, tuple(names[c] for c in clique))
        assert np.abs(counts - expected).sum() <= math.sqrt(cells / n), clique


class _StopFit(Exception):
    """Raised by the instrumented estimate to end an AIM fit after the rounds under test."""


@needs_mbi
@pytest.mark.slow  # an AIM fit on the ACS excerpt to round 26 with dense checks (5-10 CPU minutes)
@pytest.mark.timeout(2400)
def test_aims_projections_on_acs_match_the_dense_joint_at_every_round(
        acs_national: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AIM at ε = 1 on the ACS excerpt (13 columns, 3.6·10⁶ cells, enumerable) to round 26: at
    every round, every projection AIM asks of its model (candidates' scores, the annealing check,
    the warm start) that the model's cliques do not hold equals the dense joint's marginal to
    1e-9 in ℓ1; then records sampled from the last model have an all-3-way error within 0.02 of
    the model's own. With the float64 elimination the projections went wrong from round 23
    (issue 47) and the records' error was ten times the model's."""
    from privlab.mechanisms.release.flow import resolve_transformation
    from privlab.mechanisms.release.workloads import _cleaned
    from privlab.mechanisms.synthesizers.base import synthesizer_from_spec
    from privlab.mechanisms.tabular.space import load_release_space
    from privlab.platform.dp.ledger import Ledger
    from privlab.platform.dp.randomness import SeededSource

    space_path = Path(__file__).resolve().parents[1] / "experiments" / "acs" / "space.toml"
    transformation = resolve_transformation(
        load_release_space(space_path), "age=decades,marital-status=grouped,education=grouped,income=coarse")
    frame = transformation.apply(_cleaned(str(space_path), str(acs_national)), source="ACS excerpt")
    domain = transformation.domain
    names, sizes = tuple(domain.names), tuple(domain.sizes)
    project, estimate = pgm.project, pgm.estimate
    state: dict[str, object] = {"rounds": 0, "checked": 0, "model": None, "joint": None}

    def joint_of(model: object) -> np.ndarray:
        if state["model"] is not model:
            tables = {tuple(c): np.asarray(model.potentials.tables[c].values, dtype=np.float64)  # type: ignore[attr-defined]
                      for c in model.potentials.cliques}  # type: ignore[attr-defined]
            log_joint = _dense_log_joint(tables, names, sizes)
            joint = np.exp(log_joint - log_joint.max())
            state["model"], state["joint"] = model, joint / joint.sum()
        return state["joint"]  # type: ignore[return-value]

    def checked_project(model: object, clique: tuple[str, ...]) -> np.ndarray:
        got = project(model, clique)
        if not model.marginals.supports(tuple(clique)):  # type: ignore[attr-defined]
            want = _dense_marginal(joint_of(model), names, tuple(clique))
            error = float(np.abs(got / got.sum() - want).sum())
            assert error < 1e-9, f"round {state['rounds']}: projection {clique} off by {error:.3g} in ℓ1"
            state["checked"] += 1  # type: ignore[operator]
        return got

    def counted_estimate(*args: object, **kwargs: object) -> object:
        if state["rounds"] == 26:
            raise _StopFit(kwargs["warm_start"])
        state["rounds"] += 1  # type: ignore[operator]
        return estimate(*args, **kwargs)

    monkeypatch.setattr(pgm, "project", checked_project)
    monkeypatch.setattr(pgm, "estimate", counted_estimate)
    ledger = Ledger(epsilon_cap=1.0, delta_cap=1e-9, accountant="zcdp", delta_slack=1e-9)
    with pytest.raises(_StopFit) as stopped:
        synthesizer_from_spec("aim", {}, where="test").fit(
            frame, domain=domain, epsilon=1.0, ledger=ledger, source=SeededSource(np.random.default_rng(2026)))
    assert state["checked"] > 1000
    model = stopped.value.args[0]
    joint = joint_of(model)
    codes = frame[list(names)].to_numpy(dtype=np.int64).T
    records = pgm.sample_codes(model, domain, codes.shape[1], np.random.default_rng(7))
    model_error, records_error = [], []
    for clique in itertools.combinations(range(len(names)), 3):
        real = pgm.marginal_counts(codes, clique, sizes) / codes.shape[1]
        model_error.append(np.abs(real - _dense_marginal(joint, names, tuple(names[c] for c in clique))).sum())
        records_error.append(np.abs(real - pgm.marginal_counts(records, clique, sizes) / codes.shape[1]).sum())
    assert np.mean(records_error) <= np.mean(model_error) + 0.02, (np.mean(records_error), np.mean(model_error))
