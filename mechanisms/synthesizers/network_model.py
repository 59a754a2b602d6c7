"""A discrete Bayesian network over a public domain: its structure and conditional tables, the
fitted model of PrivBayes and of the independent-marginals synthesizer.

Sampling is ancestral, in topological order, with :mod:`privlab.mechanisms.tabular.bayesian_network`'s
inverse CDF; everything here is post-processing of the DP conditionals.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from privlab.mechanisms.tabular import bayesian_network
from privlab.mechanisms.tabular.domain import CODE_DTYPE, Domain
from privlab.platform.core.errors import SchemaError
from privlab.platform.core.validation import check_count

__all__ = ["BayesianNetworkModel", "parent_index"]

_MAX_JOINT_CELLS = 1 << 24  # BayesianNetworkModel.probabilities refuses larger domains


def _network_indices(domain: Domain, network: Sequence[tuple[str, Sequence[str]]]) -> tuple[tuple[int, tuple[int, ...]], ...]:
    index = {name: j for j, name in enumerate(domain.names)}
    seen: set[int] = set()
    out = []
    for child, parents in network:
        if child not in index:
            raise SchemaError(f"network column ({child!r}) must be one of {', '.join(domain.names)}")
        if index[child] in seen:
            raise SchemaError(f"network column ({child!r}) must appear once")
        if len(set(parents)) != len(parents):
            raise SchemaError(f"parents of {child!r} ({parents!r}) must be distinct column names")
        parent_ids = []
        for parent in parents:
            if parent not in index or index[parent] not in seen:
                raise SchemaError(
                    f"parent ({parent!r}) of {child!r} must be a column placed earlier in the network "
                    "(the network is listed in topological order)"
                )
            parent_ids.append(index[parent])
        seen.add(index[child])
        out.append((index[child], tuple(parent_ids)))
    if len(seen) != len(domain):
        missing = [n for n in domain.names if index[n] not in seen]
        raise SchemaError(f"network must cover every column; missing: {', '.join(missing)}")
    return tuple(out)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class BayesianNetworkModel:
    """A discrete Bayesian network over a :class:`Domain`: structure plus conditional tables.

    Attributes:
        domain: The public domain.
        network: ``(column, parents)`` pairs in topological order, covering every column once;
            each parent appears earlier in the list.
        conditionals: One row-stochastic table per pair, shape ``(∏ parent sizes, column size)``;
            row ``r`` is ``Pr[column | parents = configuration r]`` with configurations indexed
            row-major (first parent most significant). Stored as read-only float64 copies.

    Raises:
        TypeError: wrong kinds of values.
        SchemaError: the network or a table does not fit the domain, or a table is not
            row-stochastic (non-negative, finite, rows summing to 1 within 1e-9).

    Privacy:
        A model fitted with DP is itself DP; sampling from it is post-processing.
    """

    domain: Domain
    network: tuple[tuple[str, tuple[str, ...]], ...]
    conditionals: tuple[np.ndarray, ...]
    _nodes: tuple[tuple[int, tuple[int, ...]], ...] = dataclasses.field(init=False, repr=False, compare=False)
    _cdfs: tuple[np.ndarray, ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.domain, Domain):
            raise TypeError(f"domain ({self.domain!r}) must be a Domain")
        network = []
        for item in self.network:
            if isinstance(item, str) or not isinstance(item, Sequence) or len(item) != 2:
                raise SchemaError(f"network item ({item!r}) must be a (column, parents) pair")
            child, parents = item
            if isinstance(parents, str) or not isinstance(parents, Sequence):
                raise SchemaError(f"parents of {child!r} ({parents!r}) must be a tuple of column names")
            network.append((child, tuple(parents)))
        nodes = _network_indices(self.domain, network)
        if len(self.conditionals) != len(nodes):
            raise SchemaError(
                f"conditionals ({len(self.conditionals)}) must have one table per network column ({len(nodes)})"
            )
        sizes = self.domain.sizes
        tables = []
        cdfs = []
        for (child, parents), table in zip(nodes, self.conditionals, strict=True):
            array = np.array(table, dtype=np.float64)
            shape = (math.prod(sizes[p] for p in parents), sizes[child])
            name = self.domain.names[child]
            if array.shape != shape:
                raise SchemaError(f"conditional of {name!r} has shape {array.shape}, expected {shape}")
            if not np.all(np.isfinite(array)) or np.any(array < 0):
                raise SchemaError(f"conditional of {name!r} must hold finite non-negative probabilities")
            if not np.allclose(array.sum(axis=1), 1.0, rtol=0.0, atol=1e-9):
                raise SchemaError(f"every row of the conditional of {name!r} must sum to 1")
            array.setflags(write=False)
            tables.append(array)
            cdf = np.cumsum(array, axis=1)
            cdf[:, -1] = 1.0
            cdf.setflags(write=False)
            cdfs.append(cdf)
        object.__setattr__(self, "network", tuple(network))
        object.__setattr__(self, "conditionals", tuple(tables))
        object.__setattr__(self, "_nodes", nodes)
        object.__setattr__(self, "_cdfs", tuple(cdfs))

    def sample_codes(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` records as a ``(d, n)`` int64 array, columns in domain order.

        Each column in topological order: ``n`` uniforms from ``rng``, then a vectorised
        inverse CDF of the row selected by the already-sampled parent codes.
        """
        n = check_count("n", n, minimum=0)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng ({rng!r}) must be a numpy.random.Generator")
        sizes = self.domain.sizes
        out = np.zeros((len(sizes), n), dtype=CODE_DTYPE)
        for (child, parents), cdf in zip(self._nodes, self._cdfs, strict=True):
            u = rng.random(n)
            rows = parent_index(out, parents, sizes) if parents else None
            out[child] = bayesian_network.draw_values(cdf, rows, u, scale_by_total=False)
        return out

    def probabilities(self) -> np.ndarray:
        """The full joint distribution, an array of shape ``domain.sizes`` (small domains).

        Raises:
            SchemaError: the joint domain has more than 2**24 cells.
        """
        sizes = self.domain.sizes
        if math.prod(sizes) > _MAX_JOINT_CELLS:
            raise SchemaError(
                f"the joint domain has {math.prod(sizes)} cells, more than {_MAX_JOINT_CELLS}; "
                "compute marginals by sampling instead"
            )
        joint = np.ones(sizes, dtype=np.float64)
        for (child, parents), table in zip(self._nodes, self.conditionals, strict=True):
            axes = (*parents, child)
            factor = table.reshape([sizes[a] for a in axes])
            order = np.argsort(axes)
            shape = [1] * len(sizes)
            for a in axes:
                shape[a] = sizes[a]
            joint = joint * np.transpose(factor, order).reshape(shape)
        return joint


def parent_index(codes: np.ndarray, parents: Sequence[int], sizes: Sequence[int]) -> np.ndarray:
    """Each record's parent configuration; ``codes`` is ``(d, n)``, one row per column."""
    return bayesian_network.configuration_index([codes[p] for p in parents], [sizes[p] for p in parents],
                                                codes.shape[1:])
