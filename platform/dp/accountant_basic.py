"""The ``basic`` accountant: sequential composition, and parallel composition over checked splits.

Each event contributes its basic (ε, δ) (Dwork & Roth 2014, Theorem 3.16: the sums); a partition
contributes its largest part (McSherry 2009, Theorem 4). Exact: the ledger keeps these sums
incrementally as exact partial sums. Gaussian noise has no pure-ε guarantee and is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from privlab.platform.dp import composition
from privlab.platform.dp.accountant_base import Accountant, register_accountant
from privlab.platform.dp.composition_tree import Guarantee, ScopeNode
from privlab.platform.dp.dp_events import DiscreteGaussianEvent, DpEvent, GaussianEvent, Subsampled
from privlab.platform.dp.positional_split import NeighbouringRelation

__all__ = ["BasicAccountant", "compose_scopes", "gaussian_refusal", "with_partitions"]


def gaussian_refusal(leaf: DpEvent, name: str) -> str | None:
    """Why an accountant of basic guarantees (``name``) cannot take ``leaf``: Gaussian noise."""
    inner = leaf.event if isinstance(leaf, Subsampled) else leaf
    if isinstance(inner, (GaussianEvent, DiscreteGaussianEvent)):
        if isinstance(leaf, Subsampled):
            return f"{leaf.label()}: Gaussian noise has no pure-ε guarantee; use pld or rdp"
        return (f"{leaf.label()}: Gaussian noise has no pure-ε guarantee for the {name} accountant; "
                "use pld, rdp or zcdp")
    return None


def basic_scope_terms(node: ScopeNode) -> tuple[list[float], list[float]]:
    """The (ε, δ) terms a scope adds sequentially: its events, then each partition's worst part."""
    eps = [node.basic_of(i)[0] for i in range(len(node.events))]
    dels = [node.basic_of(i)[1] for i in range(len(node.events))]
    return with_partitions(node, eps, dels, basic_scope_terms)


Terms = Callable[[ScopeNode], tuple[list[float], list[float]]]


def with_partitions(node: ScopeNode, eps: list[float], dels: list[float],
                    scope_terms: Terms) -> tuple[list[float], list[float]]:
    """A scope's own terms followed by each partition's worst part, its parts' terms composed by
    ``scope_terms`` (McSherry 2009, Theorem 4)."""
    for parts in node.partitions:
        pe, pd = composition.parallel([composition.sequential(*scope_terms(p)) for p in parts])
        eps.append(pe)
        dels.append(pd)
    return eps, dels


def compose_scopes(scopes: Sequence[ScopeNode], scope_terms: Terms, accountant: str) -> Guarantee:
    """Top-level scopes composed sequentially, each contributing ``scope_terms``."""
    eps: list[float] = []
    dels: list[float] = []
    for scope in scopes:
        e, d = scope_terms(scope)
        eps += e
        dels += d
    return Guarantee(*composition.sequential(eps, dels), accountant=accountant)


@register_accountant
class BasicAccountant(Accountant):
    name = "basic"
    needs_delta_slack = False

    def leaf_refusal(self, leaf: DpEvent) -> str | None:
        return super().leaf_refusal(leaf) or gaussian_refusal(leaf, self.name)

    def compose(self, scopes: Sequence[ScopeNode], *, delta_slack: float | None, relation: NeighbouringRelation,
                delta_cap: float | None) -> Guarantee:
        return compose_scopes(scopes, basic_scope_terms, self.name)
