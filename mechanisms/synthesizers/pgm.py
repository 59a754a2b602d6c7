"""The bridge to Private-PGM (``mbi``): marginals, estimation, model size and sampling.

MST and AIM measure marginals with Gaussian noise and hand the noisy measurements to
Private-PGM, which finds the graphical model (a Markov random field over the domain's junction
tree) whose marginals best fit them (mirror descent on the L2 loss, McKenna, Sheldon & Miklau
2019). Everything here is post-processing of DP outputs except :func:`marginal_counts`, which
computes the exact statistic a mechanism then noises.

``mbi`` (with JAX on CPU) is an optional dependency, the ``pgm`` extra: :func:`require_mbi`
imports it on first use and turns its absence into a :class:`SpecError` that names the extra,
so a spec naming ``mst`` or ``aim`` fails before any budget is spent. JAX runs in float64 (the
estimates of counts of 10⁵ records stall in float32) without its persistent compilation cache.

Sampling does not use ``mbi``'s ``synthetic_data``, which draws from NumPy's global RNG:
:func:`sample_codes` draws each column, in the junction tree's order, from the model's
conditional given the columns already drawn (computed by ``mbi``'s inference), with the
caller's generator only.

References:
    McKenna, Sheldon & Miklau (2019), "Graphical-model based estimation and inference for
    differential privacy", ICML; the ``mbi`` 2.x package (Private-PGM).
"""

from __future__ import annotations

import functools
import importlib.util
import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from privlab.mechanisms.tabular.domain import CODE_DTYPE, Domain
from privlab.platform.core.errors import SchemaError, SpecError

__all__ = [
    "BYTES_PER_CELL",
    "estimate",
    "installed",
    "marginal_counts",
    "mbi_domain",
    "model_size_mb",
    "project",
    "require_mbi",
    "sample_codes",
    "simplex_projection",
]

BYTES_PER_CELL = 8
"""Private-PGM's model size counts 8 bytes (one float64) per cell of the junction tree's cliques."""

_GATHER_ELEMENTS = 1 << 22


@functools.cache
def _load() -> ModuleType | None:
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        import mbi
    except ImportError:
        return None
    return mbi


def installed() -> bool:
    """Whether Private-PGM and JAX are installed (found, not imported: importing JAX takes seconds)."""
    return all(importlib.util.find_spec(name) is not None for name in ("jax", "mbi"))


def require_mbi(who: str, *, load: bool = True) -> ModuleType | None:
    """The ``mbi`` module (``load=False``: only check that it is installed), or a
    :class:`SpecError` telling ``who``'s user to install the extra.

    Raises:
        SpecError: Private-PGM (``mbi``) or JAX is not installed.
    """
    mbi = _load() if load else (True if installed() else None)
    if mbi is None:
        raise SpecError(
            f"synthesizer {who!r} needs Private-PGM (the mbi package, with JAX on CPU), which is not "
            "installed; install privlab's pgm extra: pip install 'privlab[pgm]' (or '.[pgm]' in a checkout)"
        )
    return mbi if load else None


def mbi_domain(domain: Domain) -> Any:
    """The ``mbi.Domain`` of a privlab :class:`Domain` (same names and sizes, same order)."""
    return require_mbi("pgm").Domain(tuple(domain.names), tuple(domain.sizes))


def marginal_counts(codes: np.ndarray, columns: Sequence[int], sizes: Sequence[int]) -> np.ndarray:
    """Counts of each cell of the marginal over ``columns`` (row-major, first column most
    significant, as ``mbi``'s ``datavector``), float64.

    Privacy:
        The exact statistic; under replace-one one record leaves one cell and enters another,
        so its ℓ1 sensitivity is 2 and its ℓ2 sensitivity √2.
    """
    index = np.zeros(codes.shape[1], dtype=np.int64)
    for j in columns:
        index *= sizes[j]
        index += codes[j]
    cells = math.prod(sizes[j] for j in columns)
    return np.bincount(index, minlength=cells).astype(np.float64)


def model_size_mb(domain: Domain, cliques: Sequence[tuple[str, ...]]) -> float:
    """The size in MB (2**20 bytes) of the junction-tree model over ``cliques``, as Private-PGM
    counts it (``mbi.junction_tree.hypothetical_model_size``: 8 bytes per cell of each maximal
    clique of the triangulated graph). Public: depends on the domain and the cliques only."""
    mbi = require_mbi("pgm")
    return float(mbi.junction_tree.hypothetical_model_size(mbi_domain(domain), list(cliques)))


def estimate(
    domain: Domain,
    measurements: Sequence[tuple[tuple[str, ...], np.ndarray, float]],
    *,
    total: int,
    iters: int,
    warm_start: Any | None = None,
) -> Any:
    """The graphical model fitting ``(clique, noisy counts, σ)`` measurements (mirror descent,
    ``iters`` steps) with the public record count ``total`` as its known total.

    Post-processing: it reads only the noisy measurements and public facts.
    """
    mbi = require_mbi("pgm")
    linear = [mbi.LinearMeasurement(np.asarray(y, dtype=np.float64), tuple(clique), stddev=float(sigma))
              for clique, y, sigma in measurements]
    return mbi.estimation.MirrorDescent().estimate(
        mbi_domain(domain), linear, known_total=float(total), iters=int(iters), warm_start=warm_start)


def simplex_projection(noisy: np.ndarray, total: float) -> np.ndarray:
    """The Euclidean projection of ``noisy`` onto ``{x ≥ 0, Σx = total}`` (Duchi, Shalev-Shwartz,
    Singer & Chandra 2008: sort, find the threshold τ, clip ``noisy − τ`` at 0).

    Private-PGM's estimate from one-way measurements alone (each column measured once) is the
    product of these projections: the loss separates over the columns and every product of
    one-way marginals is in the marginal polytope, so each column's marginal is the point of
    its scaled simplex nearest to its noisy counts. Post-processing.
    """
    y = np.asarray(noisy, dtype=np.float64)
    ordered = np.sort(y)[::-1]
    cumulative = np.cumsum(ordered) - total
    ranks = np.arange(1, y.size + 1)
    last = np.nonzero(ordered - cumulative / ranks > 0)[0][-1]
    return np.maximum(y - cumulative[last] / (last + 1), 0.0)


def project(model: Any, clique: Sequence[str]) -> np.ndarray:
    """The model's marginal over ``clique`` (in that column order) as a flat float64 vector,
    scaled to the model's total.

    A clique inside one of the model's cliques is read from its marginals. Any other is
    summed out of the model's joint ``∝ exp(Σ_c θ_c)`` by one NumPy ``einsum`` over the
    potentials (each shifted by its maximum, a constant the normalisation removes), contracted
    in a greedy order: ``mbi``'s own variable elimination compiles a JAX program per clique,
    seconds each, which MST's and AIM's selections over hundreds of candidates cannot afford. When
    every term of the sum underflows (a large model with sharp potentials), ``mbi``'s
    elimination, which works in log space, answers instead.
    """
    clique = tuple(clique)
    if model.marginals.supports(clique):
        return np.asarray(model.project(clique).datavector(), dtype=np.float64)
    potentials = model.potentials
    sizes = dict(zip(model.domain.attributes, model.domain.shape, strict=True))
    letters = {name: _einsum_letter(i) for i, name in enumerate(model.domain.attributes)}
    operands: list[np.ndarray] = []
    subscripts: list[str] = []
    covered: set[str] = set()
    for factor_clique in potentials.cliques:
        factor = potentials.tables[factor_clique]
        values = np.asarray(factor.values, dtype=np.float64)
        operands.append(np.exp(values - values.max()))
        subscripts.append("".join(letters[a] for a in factor.domain.attributes))
        covered.update(factor.domain.attributes)
    for name in clique:
        if name not in covered:  # no potential mentions it: uniform in the model
            operands.append(np.ones(sizes[name]))
            subscripts.append(letters[name])
    with np.errstate(under="ignore"):
        joint = np.einsum(",".join(subscripts) + "->" + "".join(letters[a] for a in clique), *operands,
                          optimize="greedy")
    mass = float(joint.sum())
    if not (math.isfinite(mass) and mass > 0.0):
        # Every term underflowed (sharp potentials of a large model): mbi's own elimination works
        # in log space. Slower (a compiled program per clique), and only needed then.
        return np.asarray(model.project(clique).datavector(), dtype=np.float64)
    return (joint / mass * float(model.total)).ravel()


def _einsum_letter(i: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if i >= len(letters):
        raise SchemaError(f"the model has more than {len(letters)} columns; project supports at most that many")
    return letters[i]


def _draw(cdf: np.ndarray, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse CDF per record: the first code whose cumulative probability in its row exceeds u."""
    k = cdf.shape[1]
    out = np.empty(u.shape[0], dtype=CODE_DTYPE)
    block = max(1, _GATHER_ELEMENTS // k)
    for start in range(0, u.shape[0], block):
        stop = start + block
        out[start:stop] = np.minimum(np.count_nonzero(cdf[rows[start:stop]] <= u[start:stop, None], axis=1), k - 1)
    return out


def sample_codes(model: Any, domain: Domain, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` records drawn i.i.d. from the model, a ``(d, n)`` int64 array in domain order.

    Columns are drawn in the reverse of the junction tree's elimination order; each from its
    conditional given the already-drawn columns that share a junction-tree clique with it
    (the model's marginal over them and the column, rows normalised; a row with no mass is
    uniform). With the running intersection property this is the model's joint distribution.
    """
    mbi = require_mbi("pgm")
    names, sizes = domain.names, domain.sizes
    index = {name: j for j, name in enumerate(names)}
    out = np.zeros((len(names), n), dtype=CODE_DTYPE)
    tree, elimination = mbi.junction_tree.make_junction_tree(mbi_domain(domain), [tuple(c) for c in model.cliques])
    cliques = [set(c) for c in tree.nodes]
    drawn: list[str] = []
    for column in reversed(list(elimination)):
        near = set().union(*(c for c in cliques if column in c))
        parents = [p for p in drawn if p in near]
        size = sizes[index[column]]
        joint = project(model, (*parents, column)).reshape(-1, size)
        joint = np.clip(joint, 0.0, None)
        totals = joint.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            conditional = np.where(totals > 0, joint / np.where(totals > 0, totals, 1.0), 1.0 / size)
        cdf = np.cumsum(conditional, axis=1)
        cdf[:, -1] = 1.0
        rows = np.zeros(n, dtype=np.int64)
        for p in parents:
            rows *= sizes[index[p]]
            rows += out[index[p]]
        out[index[column]] = _draw(cdf, rows, rng.random(n))
        drawn.append(column)
    return out
