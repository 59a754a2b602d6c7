"""The contract every registered accountant passes, privlab's own and a third party's alike.

Parametrised over the accountants registered when the tests are collected (entry points of the
``privlab.accountants`` group), so an accountant installed by another package is held to the same
suite: tests/fixtures/third_party_accountant is such a package, run in a subprocess with the
folder on its path (a valid accountant passes, a broken one is caught).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privlab.platform.audit.ledger_property import oracle_epsilon
from privlab.platform.core.errors import LedgerError
from privlab.platform.dp import accountants
from privlab.platform.dp.accountant_base import accountant_named, accountant_names
from privlab.platform.dp.composition_tree import ScopeNode
from privlab.platform.dp.dp_events import (
    DiscreteGaussianEvent,
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    SelfComposed,
    Subsampled,
)
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import NeighbouringRelation, PositionalSplit
from privlab.platform.dp.privacy_event import PrivacyEvent

ROOT = Path(__file__).resolve().parents[1]
THIRD_PARTY = ROOT / "tests" / "fixtures" / "third_party_accountant"
SLACK = 1e-6
NAMES = accountant_names()

CANDIDATES = (
    PrivacyEvent(name="lap", mechanism="laplace", epsilon=0.5, sensitivity=1.0, noise_scale=2.0),
    PrivacyEvent(name="lap2", mechanism="laplace", epsilon=0.25, sensitivity=2.0, noise_scale=8.0),
    PrivacyEvent.from_dp_event(SelfComposed(LaplaceEvent(1.0, 4.0), 4), name="lap_k"),
    PrivacyEvent.from_dp_event(EpsilonDeltaEvent(0.3, 1e-9, "a proven bound"), name="ed"),
    PrivacyEvent.from_dp_event(GaussianEvent(1.0, 3.0), name="gauss"),
    PrivacyEvent.from_dp_event(DiscreteGaussianEvent(1, 3.0), name="dgauss"),
    PrivacyEvent(name="sub", mechanism="laplace", epsilon=1.0, sensitivity=1.0, noise_scale=1.0, sampling_rate=0.2),
)


def _ledger(name: str) -> Ledger:
    slack = SLACK if accountant_named(name).needs_delta_slack else None
    return Ledger(epsilon_cap=None, delta_cap=None, accountant=name, delta_slack=slack, neighbouring="add_remove")


def _accepted(name: str) -> list[PrivacyEvent]:
    accountant = accountant_named(name)
    return [e for e in CANDIDATES if accountant.refusal(e.typed, relation=NeighbouringRelation.ADD_REMOVE) is None]


@pytest.mark.parametrize("name", NAMES)
def test_nothing_composes_to_nothing(name: str) -> None:
    guarantee = accountants.compose([], accountant=name, delta_slack=SLACK, neighbouring="add_remove")
    assert (guarantee.epsilon, guarantee.delta) == (0.0, 0.0)
    empty = accountants.compose([ScopeNode("data", ())], accountant=name, delta_slack=SLACK, neighbouring="add_remove")
    assert (empty.epsilon, empty.delta) == (0.0, 0.0)


@pytest.mark.parametrize("name", NAMES)
def test_no_total_is_below_the_oracle_and_totals_only_grow(name: str) -> None:
    accepted = _accepted(name)
    assert accepted, f"the {name} accountant accepts none of the contract's events"
    ledger = _ledger(name)
    previous = 0.0
    for event in accepted * 2:
        ledger.spend(event)
        total = ledger.total()
        assert total.epsilon >= previous * (1 - 1e-9), f"{name}: adding {event.name} lowered the total"
        previous = total.epsilon
        truth = oracle_epsilon(ledger, total.delta)
        assert total.epsilon >= truth * (1 - 1e-9), f"{name}: ε = {total.epsilon} at δ = {total.delta} < {truth}"


@pytest.mark.parametrize("name", NAMES)
def test_a_partition_lies_between_its_worst_part_and_its_sum(name: str) -> None:
    accepted = _accepted(name)
    split = PositionalSplit.independent(20, 2, rng=np.random.default_rng(0))
    parallel, part_a, part_b, sequential = (_ledger(name) for _ in range(4))
    parallel.declare_partition("data", ["a", "b"], split=split)
    for i, event in enumerate(accepted):
        side = "a" if i % 2 == 0 else "b"
        moved = PrivacyEvent.from_dict({**event.to_dict(), "scope": side})
        parallel.spend(moved)
        (part_a if side == "a" else part_b).spend(moved)
        sequential.spend(moved)
    worst = max(part_a.total().epsilon, part_b.total().epsilon)
    assert worst * (1 - 1e-9) <= parallel.total().epsilon <= sequential.total().epsilon * (1 + 1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_a_refused_event_is_named_and_never_composed(name: str) -> None:
    accountant = accountant_named(name)
    for event in CANDIDATES:
        reason = accountant.refusal(event.typed, relation=NeighbouringRelation.REPLACE_ONE)
        if reason is None:
            continue
        assert isinstance(reason, str) and reason
        with pytest.raises(LedgerError, match=f"the {name} accountant refuses"):
            accountants.compose([ScopeNode("data", (event.typed,))], accountant=name, delta_slack=SLACK,
                                neighbouring="replace_one")
    # Subsampling as computed holds under add/remove only: every accountant refuses it under replace-one.
    sub = Subsampled(LaplaceEvent(1.0, 1.0), 0.2)
    assert accountant.refusal(sub, relation=NeighbouringRelation.REPLACE_ONE) is not None


@pytest.mark.parametrize("name", NAMES)
def test_delta_slack_is_asked_for_when_the_accountant_reads_one(name: str) -> None:
    accountant = accountant_named(name)
    scope = [ScopeNode("data", (_accepted(name)[0].typed,))]
    if accountant.needs_delta_slack:
        with pytest.raises(LedgerError, match="needs delta_slack"):
            accountants.compose(scope, accountant=name, delta_slack=None, neighbouring="add_remove")
    else:
        assert accountants.compose(scope, accountant=name, delta_slack=None, neighbouring="add_remove").epsilon > 0
    assert name in accountants.SELECTABLE and accountants.needs_delta_slack(name) == accountant.needs_delta_slack


def test_an_unknown_accountant_is_named_with_the_registered_ones() -> None:
    with pytest.raises(LedgerError, match=r"accountant \('moments'\) must be one of \['basic', 'advanced'"):
        accountant_named("moments")
    assert math.isfinite(len(accountants.ACCOUNTANTS)) and list(accountants.ACCOUNTANTS)[:5] == [
        "basic", "advanced", "pld", "rdp", "zcdp"]


def _contract_in_subprocess(selection: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(THIRD_PARTY), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", selection,
                           str(Path(__file__))], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_third_party_accountant_registered_by_entry_point_is_held_to_the_contract() -> None:
    valid = _contract_in_subprocess("example_padded")
    assert valid.returncode == 0, valid.stdout[-3000:] + valid.stderr[-2000:]
    assert "5 passed" in valid.stdout  # the five contract tests ran on it: it was registered and found
    broken = _contract_in_subprocess("example_halved")  # half the basic total: below the truth
    assert broken.returncode == 1 and "test_no_total_is_below_the_oracle" in broken.stdout, broken.stdout[-3000:]
    # Without the package on the path, neither is registered here.
    assert not {"example_padded", "example_halved"} & set(accountant_names())
