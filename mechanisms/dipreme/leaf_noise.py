"""The Laplace noise on a forest's leaf statistics: one scale per tree, from the tree's planned event."""

from __future__ import annotations

import numpy as np

from privlab.platform.dp.privacy_event import PrivacyEvent
from privlab.platform.dp.randomness import RandomSource
from privlab.platform.dp.secure_sampling import snap_to_lattice

__all__ = ["events_named", "generator_laplace", "source_laplace"]

def events_named(plan: list[PrivacyEvent], name: str) -> list[PrivacyEvent]:
    return [e for e in plan if e.name == name]


def generator_laplace(values: np.ndarray, events: list[PrivacyEvent], *, rng: np.random.Generator) -> np.ndarray:
    """``values[t] + Laplace(events[t].noise_scale)`` for every tree t, in one draw from ``rng``."""
    scale = np.array([e.noise_scale for e in events], dtype=float).reshape(-1, *([1] * (values.ndim - 1)))
    return values + rng.laplace(size=values.shape) * scale


def source_laplace(values: np.ndarray, events: list[PrivacyEvent], *, source: RandomSource) -> np.ndarray:
    """``values[t] + Laplace(events[t].noise_scale)`` for every tree t, from the source.

    Privacy:
        Research: float Laplace noise. Release (a ``laplace_lattice`` event): the tree's values
        are snapped to the lattice ``2**k`` and the exact lattice Laplace noise of the release
        source is added, at the scale :func:`~privlab.mechanisms.basic.laplace.release_parameters`
        padded for the snapping of all the tree's values (Mironov 2012), so the release is ε-DP
        for the values computed in floating point.
    """
    out = np.empty_like(values, dtype=float)
    for t, event in enumerate(events):
        value = values[t]
        if event.mechanism == "laplace_lattice":
            k = int(dict(event.details)["lattice_exponent"])
            value = np.vectorize(lambda v: snap_to_lattice(float(v), k), otypes=[np.float64])(value)
        out[t] = value + np.asarray(source.laplace(scale=float(event.noise_scale), size=value.shape))  # type: ignore[arg-type]
    return out
