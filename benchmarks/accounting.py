"""The ε ledger's accountants, measured: plausible deniability's model noise, PLD against advanced
composition, and the ledger's cost per event.

* ``pd_count_noise_scale_adult`` / ``pd_entropy_noise_scale_adult``: the Laplace scale of a count
  table and of an entropy in the plausible-deniability model on UCI Adult, split as
  ``experiments/plausible_deniability/adult.toml`` splits it (D_T ≈ D_P ≈ 19%), model ε = 1,
  δ'' = 2⁻³⁰, replace-one, with the spec's accountant. Beside each, ``…_before``: the rule privlab
  used until issue 29 (all K steps of both halves composed together by advanced composition),
  computed here from the same plan sizes.
* ``pld_over_advanced_step_epsilon_k135``: the per-step ε that PLD allows for 135 equal Laplace
  steps at ε = 1, δ = 2⁻³⁰, over advanced composition's (> 1: PLD is tighter).
* ``ledger_spend_microseconds_per_event_10k``: spending 10,000 Laplace events into one capped
  ledger whose scope is split into 100 positional parts (best of ``--repeats``), and
  ``ledger_spend_speedup_vs_recompute_1k``: against recomputing the total from scratch at every
  spend (the pre-issue-29 ledger's way), on the first 1,000 events.
* ``under_reporting_cases_found``: random ledgers, splits, events, caps and spending paths
  (``--ledgers``, default 10⁴) checked against an oracle that shares none of the ledger's code
  (:mod:`privlab.platform.audit.ledger_property`): totals below dp_accounting's optimistic
  privacy-loss distribution, or a refusal that changed the ledger. Must be 0.

Needs ``../shared/data/adult_uci`` for the two Adult lines (they print ``skipped`` without it).

    python benchmarks/accounting.py            # 10⁴ random ledgers: minutes
    python benchmarks/accounting.py --smoke    # seconds: every line, at a small scale
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from privlab.platform.audit.ledger_property import check_ledgers_in_processes
from privlab.platform.dp import accountants
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.positional_split import PositionalSplit
from privlab.platform.dp.privacy_event import PrivacyEvent

ROOT = Path(__file__).resolve().parents[1]
ADULT_SPEC = ROOT / "experiments" / "plausible_deniability" / "adult.toml"
SLACK = 2.0**-30


def pd_adult_scales() -> dict[str, float] | None:
    """The Adult model's planned scales now and under the old all-steps-together rule."""
    from privlab.mechanisms.plausible_deniability.accounting import step_epsilons
    from privlab.mechanisms.plausible_deniability.generation_params import GenerationParams, coded_table, model_plan
    from privlab.platform.experiment import registry
    from privlab.platform.experiment.spec import load_spec

    spec = load_spec(ADULT_SPEC)
    config = next(c for c in spec.configurations if c.workload == "pd_generation")
    params = registry.build_params(GenerationParams, config.params, where="benchmark")
    if not all(Path(p).exists() for p in params.data_paths()):
        return None
    table = coded_table(params)
    plan = model_plan(params, table)
    counts = [e for e in plan if e.step == "pd.parameters"]
    entropies = [e for e in plan if e.step == "pd.structure"]
    old_step = step_epsilons(params.model_epsilon, len(plan), accountant="advanced", delta_slack=params.delta_slack)[0]
    return {
        "pd_model_accountant": params.accountant,
        "pd_parameter_records": params.sizes(len(table.codes)).parameters,
        "pd_entropy_steps": len(entropies),
        "pd_count_steps": len(counts),
        "pd_count_noise_scale_adult_before": counts[0].sensitivity / old_step,
        "pd_entropy_noise_scale_adult_before": entropies[0].sensitivity / old_step,
        "pd_count_noise_scale_adult": max(e.noise_scale for e in counts),
        "pd_entropy_noise_scale_adult": max(e.noise_scale for e in entropies),
    }


def spend_events(n: int, parts: int) -> tuple[Ledger, list[PrivacyEvent]]:
    ledger = Ledger(epsilon_cap=1e6, delta_cap=1e-6, accountant="pld", delta_slack=1e-9)
    names = [f"data/part{i}" for i in range(parts)]
    split = PositionalSplit.permuted(10 * parts, [10] * parts, rng=np.random.default_rng(0))
    ledger.declare_partition("data", names, split=split)
    events = [PrivacyEvent(name=f"q{i}", mechanism="laplace", epsilon=0.01, sensitivity=1.0, noise_scale=100.0,
                           scope=names[i % parts]) for i in range(n)]
    return ledger, events


def time_spend(n: int, parts: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        ledger, events = spend_events(n, parts)
        began = time.perf_counter()
        for event in events:
            ledger.spend(event)
        best = min(best, time.perf_counter() - began)
    return best


def time_recompute(n: int, parts: int) -> float:
    """The obvious baseline: recompute the basic total from every event at each spend."""
    ledger, events = spend_events(n, parts)
    began = time.perf_counter()
    for i, event in enumerate(events):
        ledger.spend(event)
        accountants.compose(ledger._scope_nodes(), accountant="basic", delta_slack=None,  # noqa: SLF001
                            neighbouring="replace_one")
        del i
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ledgers", type=int, default=10_000, help="random ledgers the property check draws")
    parser.add_argument("--smoke", action="store_true", help="a few seconds: 40 ledgers, 2,000 spends")
    args = parser.parse_args()
    spends, ledgers = (2_000, 40) if args.smoke else (10_000, args.ledgers)
    print(f"load average at start: {os.getloadavg()[0]:.2f}")

    scales = pd_adult_scales()
    pld_step = accountants.largest_step_epsilon(1.0, 135, accountant="pld", delta_slack=SLACK)
    advanced_step = accountants.largest_step_epsilon(1.0, 135, accountant="advanced", delta_slack=SLACK)
    for name in ("basic", "advanced", "rdp", "zcdp", "pld"):
        step = accountants.largest_step_epsilon(1.0, 135, accountant=name, delta_slack=SLACK)
        print(f"step ε for 135 Laplace steps at ε = 1, δ = 2⁻³⁰, {name:8s}: {step:.6f}")

    spend = time_spend(spends, 100, args.repeats)
    incremental_1k = time_spend(1_000, 100, args.repeats)
    recompute_1k = time_recompute(1_000, 100)
    print(f"spend 1,000 events, incremental: {incremental_1k * 1e3:.1f} ms; recompute each time: "
          f"{recompute_1k * 1e3:.1f} ms")
    began = time.perf_counter()
    report = check_ledgers_in_processes(ledgers, seed=2026, processes=os.cpu_count() or 1)
    checked = time.perf_counter() - began
    print(f"property check: {report.cases} ledgers, {report.spends} spends ({report.refusals} refused), "
          f"{report.totals_checked} totals against the oracle, {checked:.1f} s; invariant violations: "
          f"{len(report.invariant_violations)}")
    for line in (report.under_reporting + report.invariant_violations)[:10]:
        print(f"  {line}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    if scales is None:
        print("pd_count_noise_scale_adult: skipped (../shared/data/adult_uci is absent)")
        print("pd_entropy_noise_scale_adult: skipped (../shared/data/adult_uci is absent)")
    else:
        for key, value in scales.items():
            print(f"{key}: {value:.6g}" if isinstance(value, float) else f"{key}: {value}")
    print(f"pld_over_advanced_step_epsilon_k135: {pld_step / advanced_step:.4f}")
    print(f"ledger_spend_speedup_vs_recompute_1k: {recompute_1k / incremental_1k:.1f}")
    print(f"ledger_spend_microseconds_per_event_10k: {spend / spends * 1e6:.2f}")
    print(f"under_reporting_cases_found: {report.under_reporting_cases + len(report.invariant_violations)}")
    print(f"property_check_ledgers: {report.cases}")


if __name__ == "__main__":
    main()
