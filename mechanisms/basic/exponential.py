"""The exponential mechanism (research) and permute-and-flip (release).

Both select an index ``r`` from a finite candidate set with utilities ``u(r)`` of sensitivity
Δ and are ε-DP. Research mode samples the exponential mechanism exactly with the Gumbel-max
trick. Release mode uses permute-and-flip, which is ε-DP with the same utility scale, never
has larger expected error than the exponential mechanism, and needs only uniform integers and
Bernoulli draws — both exact on the OS CSPRNG — instead of floating-point Gumbel noise.

A step declared ``bounded_range`` is the exponential mechanism itself in both modes (Gumbel-max
in research, rejection sampling with uniform proposals in release), recorded as ε-bounded range
so that a zCDP ledger charges it ε²/8 instead of ε²/2 (Cesar & Rogers 2021); permute-and-flip is
not known to be bounded range, so it is not used for such a step.
"""

from __future__ import annotations

import math

import numpy as np

from privlab.platform.core.validation import check_positive_finite
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import RandomSource


def exponential_mechanism(
    utilities: np.ndarray,
    *,
    sensitivity: float,
    epsilon: float,
    source: RandomSource,
    ledger: Ledger,
    name: str,
    scope: str = "data",
    step: str = "",
    bounded_range: bool = False,
) -> int:
    """Select an index with probability ∝ ``exp(ε·u(r) / (2Δ))`` and record the step.

    Args:
        utilities: One finite utility per candidate (higher is better), computed on the data.
        sensitivity: Δ = max over neighbouring datasets and candidates of ``|u(D,r) − u(D',r)|``.
        epsilon: The budget of this selection.
        source: The run's random source.
        ledger: Charged before sampling.
        name, scope, step: Recorded in the ledger.
        bounded_range: Sample the exponential mechanism itself in release mode too and record
            the step as ε-bounded range (``exponential_bounded_range`` in research,
            ``exponential_rejection`` in release).

    Returns:
        The selected candidate index.

    Raises:
        BudgetExceededError: The selection would exceed the ledger's cap.
        TypeError: ε or Δ is not a real number.
        ValueError: Empty or non-finite utilities, or ε or Δ not positive and finite.

    Privacy:
        ε-DP (McSherry & Talwar 2007, Theorem 6): each candidate's weight changes by at most a
        factor ``exp(ε/2)`` between neighbours and so does the normaliser. Gumbel-max: the
        argmax of ``ε·u/(2Δ) + G`` with i.i.d. standard Gumbel ``G`` has exactly this law.
        Release mode: permute-and-flip (McKenna & Sheldon 2020) visits candidates in a uniform
        random order and accepts ``r`` with probability ``exp(ε(u(r) − u*)/(2Δ))``; it is
        ε-DP. The acceptance probability is a float64 rounded exponential fed to an exact
        Bernoulli sampler (relative error ≤ 2⁻⁵²). Bounded range: between neighbours
        ``log P(r|D)/P(r|D') = ε(u(D,r) − u(D',r))/(2Δ) − log(Z(D)/Z(D'))``, whose first term is
        in [−ε/2, ε/2] for every r and whose second is the same for every r, so the log-ratios
        of all outputs lie in one interval of width ε (Durfee & Rogers 2019) and the choice is
        ε²/8-zCDP (Cesar & Rogers 2021, Lemma 3.2). Its release sampler proposes a uniform
        candidate and accepts it with probability ``exp(ε(u(r) − u*)/(2Δ))``, repeating until
        one is accepted (at most K proposals expected for K candidates): the accepted
        index has exactly the exponential mechanism's law (a rejection sampler with proposals
        drawn with replacement; permute-and-flip draws them without).

    References:
        McSherry & Talwar (2007); McKenna & Sheldon (2020), Algorithm 1; Durfee & Rogers (2019);
        Cesar & Rogers (2021), "Bounding, Concentrating, and Truncating", ALT, Lemma 3.2.
    """
    scores = np.asarray(utilities, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0 or not np.all(np.isfinite(scores)):
        raise ValueError(f"{name}: utilities must be a non-empty 1-d array of finite numbers")
    sensitivity = check_positive_finite("sensitivity", sensitivity)
    epsilon = check_positive_finite("epsilon", epsilon)
    if bounded_range and source.mode == "release":
        ledger.charge(name=name, mechanism="exponential_rejection", epsilon=epsilon, sensitivity=sensitivity,
                      noise_scale=2 * sensitivity / epsilon, scope=scope, step=step)
        best = float(scores.max())
        while True:
            r = int(source.integers(low=0, high=scores.size))
            if bool(source.bernoulli(p=math.exp(epsilon * (scores[r] - best) / (2 * sensitivity)))):
                return r
    if bounded_range:
        ledger.charge(name=name, mechanism="exponential_bounded_range", epsilon=epsilon, sensitivity=sensitivity,
                      noise_scale=2 * sensitivity / epsilon, scope=scope, step=step)
        return _gumbel_max(scores, epsilon, sensitivity, source)
    if source.mode == "release":
        ledger.charge(name=name, mechanism="permute_and_flip", epsilon=epsilon, sensitivity=sensitivity,
                      noise_scale=2 * sensitivity / epsilon, scope=scope, step=step)
        best = float(scores.max())
        remaining = list(range(scores.size))
        while True:
            r = remaining.pop(int(source.integers(low=0, high=len(remaining))))
            if bool(source.bernoulli(p=math.exp(epsilon * (scores[r] - best) / (2 * sensitivity)))):
                return r
            if not remaining:  # unreachable: the best candidate is accepted with probability 1
                return int(np.argmax(scores))
    ledger.charge(name=name, mechanism="exponential", epsilon=epsilon, sensitivity=sensitivity,
                  noise_scale=2 * sensitivity / epsilon, scope=scope, step=step)
    return _gumbel_max(scores, epsilon, sensitivity, source)


def _gumbel_max(scores: np.ndarray, epsilon: float, sensitivity: float, source: RandomSource) -> int:
    """``argmax(ε·u/(2Δ) + G)`` with i.i.d. standard Gumbel ``G``: an index drawn with probability
    ∝ exp(ε·u/(2Δ))."""
    uniform = np.asarray(source.uniform(size=scores.size), dtype=np.float64)
    with np.errstate(divide="ignore"):
        gumbel = -np.log(-np.log(uniform))
    return int(np.argmax(epsilon * scores / (2 * sensitivity) + gumbel))
