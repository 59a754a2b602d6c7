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

Compilation, not arithmetic, is what an estimate costs on tables like ACS: JAX compiles a
program for each measurement structure (seconds), and AIM has a new structure every round.
:func:`estimate` therefore compiles one program per structure whose size does not grow with
the number of measurements (:func:`l2_loss`, :func:`mirror_descent`), and keeps only the
latest; :func:`project` answers the mechanisms' many marginal queries in NumPy, where ``mbi``
compiles a program per query. Measured alternatives (benchmarks/RESULTS.md): XLA's optimisation
flags do not shorten the compiles; disabling JIT makes every step dispatch op by op (far
slower).

Sampling does not use ``mbi``'s ``synthetic_data``, which draws from NumPy's global RNG:
:func:`sample_codes` draws each column, in the junction tree's order, from the model's
conditional given the columns already drawn (stratified within each group of equal parents),
with the caller's generator only.

References:
    McKenna, Sheldon & Miklau (2019), "Graphical-model based estimation and inference for
    differential privacy", ICML; the ``mbi`` 2.x package (Private-PGM).
"""

from __future__ import annotations

import dataclasses
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
    "merge_repeated",
    "mirror_descent",
    "installed",
    "l2_loss",
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


def merge_repeated(
    measurements: Sequence[tuple[tuple[str, ...], np.ndarray, float]],
) -> list[tuple[tuple[str, ...], np.ndarray, float]]:
    """One measurement per clique: repeated Gaussian measurements ``yᵢ`` (noise σᵢ) of the
    same marginal become their inverse-variance weighted mean ``ȳ = Σ σᵢ⁻² yᵢ / Σ σᵢ⁻²`` with
    ``σ = (Σ σᵢ⁻²)^(-1/2)``, in the order of each clique's first measurement; a clique measured
    once is passed through unchanged.

    ``Σᵢ ‖(μ − yᵢ)/σᵢ‖² = ‖(μ − ȳ)/σ‖² + const``, so Private-PGM's L2 loss, its gradient and
    its Lipschitz constant are the same: ``(ȳ, σ)`` is a sufficient statistic. The merged list
    keeps the estimate's compiled program as small as the number of distinct cliques and its
    structure unchanged when a clique is measured again. Post-processing.
    """
    groups: dict[tuple[str, ...], list[tuple[np.ndarray, float]]] = {}
    for clique, y, sigma in measurements:
        groups.setdefault(tuple(clique), []).append((np.asarray(y, dtype=np.float64), float(sigma)))
    merged = []
    for clique, group in groups.items():
        if len(group) == 1:
            merged.append((clique, *group[0]))
            continue
        precisions = np.array([sigma ** -2.0 for _, sigma in group])
        mean = np.einsum("i,ij->j", precisions, np.stack([y for y, _ in group])) / precisions.sum()
        merged.append((clique, mean, float(precisions.sum() ** -0.5)))
    return merged


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

    The loss is Private-PGM's L2 loss (:func:`l2_loss`: repeated measurements of a clique
    merged, the same loss, in a form whose compiled program does not grow with the number of
    measurements), minimised by :func:`mirror_descent`: Private-PGM's mirror descent with its
    Armijo line search, one compiled program per measurement structure.

    Post-processing: it reads only the noisy measurements and public facts.
    """
    return mirror_descent().estimate(mbi_domain(domain), l2_loss(domain, measurements), known_total=float(total),
                                     iters=int(iters), warm_start=warm_start)


def l2_loss(domain: Domain, measurements: Sequence[tuple[tuple[str, ...], np.ndarray, float]]) -> Any:
    """Private-PGM's L2 loss ``L(μ) = ½ Σ_M ‖(P_M μ − y_M)/σ_M‖²`` of the measurements (after
    :func:`merge_repeated`) as an ``mbi.MarginalLossFn`` whose compiled form does not grow with
    the number of measurements.

    ``mbi``'s own loss (``marginal_loss.from_linear_measurements``) traces one projection per
    measurement, so the program compiled for an estimate grows with every measurement. Here
    the model's marginals, one table per maximal measured clique ``C``, are read as one flat
    vector; measurement ``M`` is summed out of the table of its smallest containing clique (the
    clique ``mbi`` projects it from) by a gather and a segment sum whose index vectors are data,
    not program. The value, the gradient and the Lipschitz constant (``mbi``'s, from the
    measurements' σ and domains) are the same; only the order of floating-point sums differs.
    Post-processing.
    """
    mbi = require_mbi("pgm")
    merged = merge_repeated(measurements)
    cliques = [tuple(c) for c in mbi.clique_utils.maximal_subset([c for c, _, _ in merged])]
    sizes = dict(zip(domain.names, domain.sizes, strict=True))
    offsets = np.cumsum([0] + [math.prod(sizes[a] for a in c) for c in cliques])
    sources, targets, values, precisions = [], [], [], []
    cells = 0
    for clique, y, sigma in merged:
        parent = min((c for c in cliques if set(clique) <= set(c)), key=lambda c: math.prod(sizes[a] for a in c))
        shape = tuple(sizes[a] for a in parent)
        coordinates = np.indices(shape).reshape(len(shape), -1)
        target = np.zeros(coordinates.shape[1], dtype=np.int64)
        for a in clique:
            target = target * sizes[a] + coordinates[parent.index(a)]
        sources.append(offsets[cliques.index(parent)] + np.arange(coordinates.shape[1]))
        targets.append(cells + target)
        values.append(np.asarray(y, dtype=np.float64))
        precisions.append(np.full(len(y), 1.0 / sigma))
        cells += len(y)
    data = (np.concatenate(sources), np.concatenate(targets), np.concatenate(values), np.concatenate(precisions))
    linear = [mbi.LinearMeasurement(y, tuple(c), stddev=float(sigma)) for c, y, sigma in merged]
    lipschitz = mbi.marginal_loss.calculate_l2_lipschitz_from_metadata(mbi_domain(domain), linear)
    return mbi.marginal_loss.MarginalLossFn(tuple(cliques), _flat_l2_loss, data, lipschitz)


def _flat_l2_loss(marginals: Any, data: tuple[Any, Any, Any, Any]) -> Any:
    import jax
    import jax.numpy as jnp

    sources, targets, values, precisions = data
    flat = jnp.concatenate([marginals[c].values.reshape(-1) for c in marginals.cliques])
    projected = jax.ops.segment_sum(flat[sources], targets, num_segments=values.shape[0])
    residual = (projected - values) * precisions
    return 0.5 * jnp.vdot(residual, residual)


@functools.cache
def mirror_descent() -> Any:
    """Private-PGM's mirror descent (``mbi.estimation.MirrorDescent``: Armijo line search, its
    default marginal oracle, ``iters`` steps in fused blocks) with each step's marginals
    carried to the next, so that one estimate compiles one program.

    ``mbi``'s step computes ``μ = oracle(θ)``, the loss and its gradient at ``μ``, the trial
    ``θ₂ = θ − α∇L(μ)`` and ``μ₂ = oracle(θ₂)``, then keeps ``θ₂`` if the loss fell enough
    (α × 1.01) or ``θ`` (α / 2). The next step's ``μ`` is then ``μ₂`` or ``μ`` again, both
    already computed, so this estimator carries the accepted marginals in its state and calls
    the oracle once per step instead of twice; the iterates are the same. The first ``μ`` needs
    no compiled oracle: zero potentials give uniform marginals, and a warm start's potentials,
    expanded to the new cliques, describe the previous model's distribution, whose marginals
    :func:`project` computes; the final model's marginals are the carried ones. ``mbi``'s own
    initialisation instead compiles the oracle and evaluates the loss eagerly (a small compiled
    program per operation), and its finalisation calls the oracle again.

    The fused steps are compiled per measurement structure and kept for one structure only
    (the most recent): a mechanism that re-estimates after each new measurement, as AIM does,
    would otherwise keep hundreds of compiled programs until XLA cannot allocate memory for
    code. Post-processing.
    """
    mbi = require_mbi("pgm")
    import jax
    import jax.numpy as jnp

    estimation = mbi.estimation
    compiled: dict[Any, Any] = {}

    def initial_marginals(domain: Any, cliques: Sequence[tuple[str, ...]], warm_start: Any,
                          known_total: float) -> Any:
        tables = {}
        for clique in cliques:
            clique_domain = domain.project(clique)
            if warm_start is None:
                values = np.full(clique_domain.shape, known_total / clique_domain.size())
            else:
                values = project(warm_start, clique).reshape(clique_domain.shape) * (known_total / warm_start.total)
            tables[clique] = mbi.Factor(clique_domain, jnp.asarray(values, dtype=jnp.float64))
        return mbi.CliqueVector(domain, tuple(cliques), tables)

    @dataclasses.dataclass(frozen=True)
    class CarriedMarginalsMirrorDescent(estimation.MirrorDescent):
        def _init(self, domain, loss_fn, known_total, *, warm_start=None, constraints=()):  # type: ignore[override]
            if constraints or not (warm_start is None or isinstance(warm_start, mbi.MarkovRandomField)):
                raise ValueError("the carried-marginals mirror descent takes no constraints and warm-starts "
                                 "from a MarkovRandomField only")
            potentials = estimation._extract_potentials(warm_start, domain, loss_fn.cliques)
            alpha = 2.0 / (loss_fn.lipschitz * known_total) if self.stepsize is None else self.stepsize
            # The loss slot is read only by mbi's early stopping (tol), which estimate() never asks for.
            return estimation.MirrorDescentState(initial_marginals(domain, potentials.cliques, warm_start, known_total),
                                                 potentials, jnp.asarray(np.float64(alpha)),
                                                 jnp.asarray(np.float64(np.inf)))

        def _step(self, state, loss_fn, known_total, constraints=()):  # type: ignore[override]
            oracle = self._oracle(loss_fn.cliques, state.potentials.domain, constraints=constraints)
            loss, gradient = jax.value_and_grad(loss_fn)(state.mu)
            trial = state.potentials - state.alpha * gradient
            trial_mu = oracle(trial, known_total)
            if self.stepsize is not None:
                return estimation.MirrorDescentState(trial_mu, trial, state.alpha, loss)
            trial_loss = loss_fn(trial_mu)
            accept = loss - trial_loss >= 0.5 * state.alpha * gradient.dot(state.mu - trial_mu)
            return estimation.MirrorDescentState(
                jax.lax.cond(accept, lambda: trial_mu, lambda: state.mu),
                jax.lax.cond(accept, lambda: trial, lambda: state.potentials),
                jax.lax.select(accept, 1.01 * state.alpha, 0.5 * state.alpha),
                jax.lax.select(accept, trial_loss, loss))

        def _multi_step(self, state, loss_fn, known_total, constraints=()):  # type: ignore[override]
            structure = jax.tree.structure((state, loss_fn, constraints))
            if structure not in compiled:
                compiled.clear()

                def steps(state, loss_fn, known_total, constraints):
                    def step(carried, _):
                        return self._step(carried, loss_fn, known_total, constraints), None

                    return jax.lax.scan(step, state, None, length=estimation.CALLBACK_EVERY)[0]

                compiled[structure] = jax.jit(steps, donate_argnames=["state"])
            return compiled[structure](state, loss_fn, known_total, constraints)

        def _finalize(self, state, known_total, constraints=()):  # type: ignore[override]
            return mbi.MarkovRandomField(potentials=state.potentials, marginals=state.mu, total=known_total,
                                         constraints=constraints)

    return CarriedMarginalsMirrorDescent()


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

    A clique inside one of the model's cliques is summed out of that clique's marginal (in
    NumPy: ``mbi``'s ``Factor.project`` compiles a JAX program per shape). Any other is
    summed out of the model's joint ``∝ exp(Σ_c θ_c)`` in NumPy by variable elimination in log
    space over the potentials (:func:`_eliminate`): ``mbi``'s own variable elimination compiles
    a JAX program per clique, seconds each, which MST's and AIM's selections over hundreds of
    candidates cannot afford. Every cell the float64 joint can represent relative to its largest
    is computed to rounding; no intermediate product underflows.
    """
    clique = tuple(clique)
    marginals = model.marginals
    if marginals.supports(clique):
        factor = marginals[clique if clique in marginals.tables else marginals.parent(clique)]
        attributes = tuple(factor.domain.attributes)
        summed = np.asarray(factor.values, dtype=np.float64).sum(
            axis=tuple(i for i, a in enumerate(attributes) if a not in clique))
        kept = [a for a in attributes if a in clique]
        return np.transpose(summed, [kept.index(a) for a in clique]).ravel()
    potentials = model.potentials
    sizes = dict(zip(model.domain.attributes, model.domain.shape, strict=True))
    letters = {name: _einsum_letter(i) for i, name in enumerate(model.domain.attributes)}
    operands: list[np.ndarray] = []
    subscripts: list[str] = []
    covered: set[str] = set()
    for factor_clique in potentials.cliques:
        factor = potentials.tables[factor_clique]
        operands.append(np.asarray(factor.values, dtype=np.float64))
        subscripts.append("".join(letters[a] for a in factor.domain.attributes))
        covered.update(factor.domain.attributes)
    for name in clique:
        if name not in covered:  # no potential mentions it: uniform in the model
            operands.append(np.zeros(sizes[name]))
            subscripts.append(letters[name])
    log_joint = _eliminate(operands, subscripts, "".join(letters[a] for a in clique))
    joint = np.exp(log_joint - log_joint.max())
    return (joint / joint.sum() * float(model.total)).ravel()


def _eliminate(operands: list[np.ndarray], subscripts: list[str], output: str) -> np.ndarray:
    """``log einsum(subscripts → output)`` of the factors ``exp(operands)``, up to an additive
    constant, by variable elimination in log space: repeatedly, the variable whose factors span
    the fewest cells is summed out of their product, ``log Σ_v exp(Σ_f θ_f)`` computed as
    ``m + log Σ_v exp(Σ_f θ_f − m)`` with ``m`` the maximum over ``v`` (log-sum-exp); the
    factors left (over ``output``'s variables) are then added.

    Products of many factors must not be formed in linear space: each factor scaled to maximum
    1 can still leave a product whose largest cell is below float64's smallest (sharp potentials
    whose maxima sit in different cells, as AIM's after a few dozen rounds), and then whole
    slices of the marginal, or all of it, come out as zero. In log space the exponent of every
    cell is kept and only its difference to the slice's maximum is exponentiated, so each
    log-sum-exp is exact to rounding.

    NumPy's ``einsum`` with ``optimize="greedy"`` would find a similar order, but its path search
    costs more than the contractions here.
    """
    sizes = {v: n for sub, op in zip(subscripts, operands, strict=True) for v, n in zip(sub, op.shape, strict=True)}
    factors = list(zip(subscripts, operands, strict=True))

    def span(variable: str) -> tuple[int, str]:
        scope = set().union(*(set(sub) for sub, _ in factors if variable in sub))
        return math.prod(sizes[v] for v in scope), variable

    remaining = set(sizes) - set(output)
    while remaining:
        variable = min(remaining, key=span)
        remaining.discard(variable)
        involved = [(sub, op) for sub, op in factors if variable in sub]
        factors = [(sub, op) for sub, op in factors if variable not in sub]
        union = "".join(sorted(set().union(*(set(sub) for sub, _ in involved))))
        total = _log_product(involved, union)
        axis = union.index(variable)
        peak = total.max(axis=axis, keepdims=True)
        summed = np.log(np.exp(total - peak).sum(axis=axis)) + np.squeeze(peak, axis=axis)
        factors.append((union.replace(variable, ""), summed))
    union = "".join(sorted(set().union(*(set(sub) for sub, _ in factors)))) if factors else ""
    total = _log_product(factors, union)
    return np.transpose(total, [union.index(v) for v in output])


def _log_product(factors: list[tuple[str, np.ndarray]], union: str) -> np.ndarray:
    """``Σ_f θ_f`` over the variables ``union`` (sorted letters): each log-factor's axes put in
    ``union``'s order and broadcast over the variables it lacks."""
    total = np.zeros((1,) * len(union))
    for sub, op in factors:
        order = sorted(sub)
        aligned = np.transpose(op, [sub.index(v) for v in order])
        total = total + aligned.reshape([op.shape[sub.index(v)] if v in sub else 1 for v in union])
    return total


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
    """``n`` records drawn from the model, a ``(d, n)`` int64 array in domain order.

    Columns are drawn in the reverse of the junction tree's elimination order; each from its
    conditional given the already-drawn columns that share a junction-tree clique with it
    (the model's marginal over them and the column, rows normalised; a row with no mass is
    uniform). With the running intersection property each record's law is the model's joint.

    The uniforms that pick each column's codes by inverse CDF are stratified within each group
    of records with the same parents' codes (:func:`_stratified_uniforms`): a group of ``c``
    records gets one uniform in each of ``[k/c, (k+1)/c)``, assigned in a random order, so the
    group's count of each code is within one of ``c·p(code | parents)`` instead of varying by
    about ``sqrt(c·p)`` as i.i.d. draws do. Each record is still distributed as the model's
    joint, the records are exchangeable, and the sample's marginals follow the model's more
    closely (the same idea as Private-PGM's randomized rounding). Post-processing.
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
        out[index[column]] = _draw(cdf, rows, _stratified_uniforms(rows, rng))
        drawn.append(column)
    return out


def _stratified_uniforms(groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniform per record, stratified within each group of equal ``groups`` values: the
    ``c`` records of a group receive ``(k + U_k)/c`` for ``k = 0..c−1`` (``U_k`` i.i.d.
    uniform) in a uniformly random order. Each value is marginally uniform on [0, 1)."""
    n = groups.size
    shuffled = rng.permutation(n)
    order = shuffled[np.argsort(groups[shuffled], kind="stable")]
    ordered = groups[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if n else np.zeros(0, dtype=np.int64)
    counts = np.diff(np.r_[starts, n])
    ranks = np.arange(n) - np.repeat(starts, counts)
    uniforms = np.empty(n, dtype=np.float64)
    uniforms[order] = (ranks + rng.random(n)) / np.repeat(counts, counts)
    return uniforms
