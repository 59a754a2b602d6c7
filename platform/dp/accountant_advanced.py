"""The ``advanced`` accountant: Dwork & Roth's Theorem 3.20 within each scope.

Within a scope, k = the number of its leaf steps (a ``SelfComposed`` counts ``count`` times),
ε = their largest ε, δ = their largest δ, plus δ'' once per scope; the scope keeps its basic total
where that is no larger. Scopes add up and partitions take their largest part, as under
``basic``. Gaussian noise is refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from privlab.platform.dp import composition
from privlab.platform.dp.accountant_base import Accountant, register_accountant
from privlab.platform.dp.accountant_basic import compose_scopes, gaussian_refusal, with_partitions
from privlab.platform.dp.composition_tree import Guarantee, ScopeNode, basic_of
from privlab.platform.dp.dp_events import Composed, DpEvent, SelfComposed
from privlab.platform.dp.positional_split import NeighbouringRelation

__all__ = ["AdvancedAccountant"]


def _leaf_terms(event: DpEvent) -> list[tuple[float, float, int]]:
    """(ε, δ, count) of each leaf step for Theorem 3.20 (a parallel block or a subsample counts
    as one step with its basic guarantee)."""
    if isinstance(event, SelfComposed):
        return [(e, d, c * event.count) for e, d, c in _leaf_terms(event.event)]
    if isinstance(event, Composed):
        return [t for child in event.events for t in _leaf_terms(child)]
    e, d = basic_of(event)
    return [(e, d, 1)]


def _scope_terms(node: ScopeNode, delta_slack: float) -> tuple[list[float], list[float]]:
    basic_eps = [node.basic_of(i)[0] for i in range(len(node.events))]
    basic_dels = [node.basic_of(i)[1] for i in range(len(node.events))]
    eps: list[float] = []
    dels: list[float] = []
    if node.events:
        leaves = [t for i, e in enumerate(node.events)
                  for t in (_leaf_terms(e) if isinstance(e, (SelfComposed, Composed))
                            else [(*node.basic_of(i), 1)])]
        adv_e, adv_d = composition.advanced(
            epsilon=max(e for e, _, _ in leaves), delta=max(d for _, d, _ in leaves),
            k=sum(c for _, _, c in leaves), delta_slack=delta_slack)
        if math.fsum(basic_eps) <= adv_e:  # basic dominates: no larger ε, smaller δ
            eps, dels = basic_eps, basic_dels
        else:
            eps, dels = [adv_e], [adv_d]
    return with_partitions(node, eps, dels, lambda part: _scope_terms(part, delta_slack))


@register_accountant
class AdvancedAccountant(Accountant):
    name = "advanced"

    def leaf_refusal(self, leaf: DpEvent) -> str | None:
        return super().leaf_refusal(leaf) or gaussian_refusal(leaf, self.name)

    def compose(self, scopes: Sequence[ScopeNode], *, delta_slack: float | None, relation: NeighbouringRelation,
                delta_cap: float | None) -> Guarantee:
        return compose_scopes(scopes, lambda scope: _scope_terms(scope, delta_slack), self.name)  # type: ignore[arg-type]
