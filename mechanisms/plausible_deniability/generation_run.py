"""One plausible-deniability generation, start to finish, written as a bundle.

:func:`generate` splits the table (seeded), fits the DP model on D_T and D_P, runs Mechanism 1
on ``candidates`` candidates (seeds from D_S, eq. (3), Privacy Test 1 or 2) and records the
model's steps and Theorem 1 composed over every candidate in one ledger. :func:`write_bundle`
writes the released synthetics and what a reader needs to trust them, atomically (the release
bundle's writer: the folder appears whole or not at all)::

    released.csv, released.parquet   the candidates that passed, decoded to the space's labels
    ledger.json, ledger.txt          every DP step: the model's entropies and count tables, the test
    privacy-statement.md             the (ε, δ) of the model, of Theorem 1 per candidate and composed
    summary.json                     candidates, released, pass rate, the split as the spec fixes it
                                     (fractions; sizes only from ``public_records``), the model's structure
    config.toml                      the parameters and the seed
    SHA256SUMS                       ``sha256sum -c`` lines for the files above

Privacy:
    Research mode only (:mod:`.streams`: the candidates' draws come from a seeded PRNG, so the
    output is reproducible from the seed and not fit for a real release). The statement is the
    ledger's: the worst of the model's halves (D_T, D_P) and Theorem 1 for the chosen t composed
    over the N candidates tested on D_S (:func:`.privacy_tests.record_generation`), the three
    being parts of a positional split; with Privacy Test 1 the test has no DP guarantee and the
    statement says so. Nothing but the released records depends on the data's record count
    when the spec sets ``public_records`` (the split sizes are then fixed by the spec); without
    it the sizes are fractions of the count, which replace-one neighbours share, and the bundle
    publishes no size but the ledger's entropy sensitivities are functions of |D_T|: the
    statement says so.

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Sections 2, 3 and 5.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privlab.mechanisms.plausible_deniability.dataset import CodedTable
from privlab.mechanisms.plausible_deniability.generation_params import GenerationParams, check_against_table, fit_split_model
from privlab.mechanisms.plausible_deniability.privacy_tests import CandidateResults, generate_candidates, record_generation
from privlab.mechanisms.tabular.bundle_files import atomic_directory, config_toml, json_text, write_checksums, write_released
from privlab.platform.dp.ledger import Ledger
from privlab.platform.dp.randomness import SeededSource

__all__ = ["Generation", "generate", "write_bundle"]

BUNDLE_FILES = ("released.csv", "released.parquet", "ledger.json", "ledger.txt", "privacy-statement.md",
                "summary.json", "config.toml")


@dataclasses.dataclass(frozen=True)
class Generation:
    """What one generation produced: the released table, the ledger and the facts about it."""

    released: pd.DataFrame
    results: CandidateResults
    ledger: Ledger
    split_sizes: dict[str, int]  # in-process only: computed from the data's count, never published
    structure: dict[str, Any]
    seconds: dict[str, float]


def generate(params: GenerationParams, table: CodedTable, *, rng: np.random.Generator) -> Generation:
    """Split, fit, generate and test (module docstring); everything checked before any draw.

    Raises:
        SpecError, SchemaError: bad parameters for this table (named).
    """
    check_against_table(params, table)
    rng = params.state_generator(rng)
    began = time.perf_counter()
    split, model, ledger = fit_split_model(params, table, rng)
    fitted = time.perf_counter()
    results = generate_candidates(model, split.seeds, synthesis=params.synthesis(), test=params.test(),
                                  n=params.candidates, source=SeededSource(rng), batch_size=params.batch)
    test = params.test()
    if test.epsilon0 is not None:
        record_generation(ledger, test, t=params.t, invocations=params.candidates)
    done = time.perf_counter()
    released = table.decode(results.released(table.domain.names))
    return Generation(released=released, results=results, ledger=ledger, split_sizes=split.sizes,
                      structure=model.describe(),
                      seconds={"model_fit": fitted - began, "synthesis_and_test": done - fitted})


def _statement(params: GenerationParams, generation: Generation) -> str:
    model = [e for e in generation.ledger.events if e.step in ("pd.structure", "pd.parameters")]
    tests = [e for e in generation.ledger.events if e.step == "pd.test"]
    total = generation.ledger.total()
    split = params.published_split()
    fractions = ", ".join(f"{part} {value:g}" for part, value in split["fractions"].items())
    if split["sizes"] is not None:
        sizes = ", ".join(f"{part} {value:,}" for part, value in split["sizes"].items())
        count = (f"The split sizes are fixed by the spec: fractions ({fractions}) of public_records = "
                 f"{split['public_records']:,}, i.e. {sizes} records. Nothing in this bundle but the released "
                 "records depends on how many records the data holds.")
    else:
        count = (f"The split sizes are the spec's fractions ({fractions}) of the data's record count, which this "
                 "bundle treats as public (replace-one neighbours share it). No size is published, but the "
                 "entropies' sensitivity in ledger.json is a function of |D_T|, so the count can be recovered to "
                 "within a few records; set public_records (a public number of records) in the spec to fix the "
                 "sizes by the spec instead.")
    lines = ["# Privacy statement", "",
             f"Neighbouring datasets: {generation.ledger.neighbouring.replace('_', '-')} (one record replaced).",
             "", count, "",
             f"- The generative model: {len(model)} Laplace steps (noisy entropies for the structure, noisy "
             f"counts for the conditional tables), each half composed by the {generation.ledger.accountant} "
             f"accountant to ε = {params.model_epsilon:g} (D_T and D_P are disjoint parts).",
             ]
    if tests:
        details = dict(tests[0].details)
        lines.append(f"- Privacy Test 2 (k = {params.k}, γ = {params.gamma:g}, ε₀ = {params.epsilon0:g}) with "
                     f"t = {params.t}: each candidate's run of Mechanism 1 is "
                     f"({details['per_candidate_epsilon']:.6g}, {details['per_candidate_delta']:.3g})-DP "
                     "(Theorem 1, converted to replace-one by group privacy); over the "
                     f"{params.candidates:,} candidates tested, passed or not, at most "
                     f"({tests[0].epsilon:.6g}, {tests[0].delta:.3g})-DP by sequential composition, less under "
                     f"the {generation.ledger.accountant} accountant. D_T, D_P and D_S are cut by record "
                     "position, so the run's guarantee is the worst of the three parts (parallel composition).")
    else:
        lines.append(f"- Privacy Test 1 (k = {params.k}, γ = {params.gamma:g}, no ε₀): every released record is "
                     "(k, γ)-plausibly deniable, but the test itself is not differentially private, so no "
                     "(ε, δ) covers the released records; set epsilon0 for Privacy Test 2 and Theorem 1.")
    lines += ["", f"Ledger total: ε = {total.epsilon:.6g}, δ = {total.delta:.3g} (ledger.json lists every step).",
              "", "Research mode: the candidates' randomness comes from a seeded generator (config.toml), so "
              "this table is reproducible and is not a release of private data."]
    return "\n".join(lines) + "\n"


def write_bundle(out: Path, params: GenerationParams, generation: Generation, *, seed: int, config_id: str) -> None:
    """Write ``out`` atomically (module docstring).

    Raises:
        SpecError: ``out`` exists or cannot be created (before anything is written).
    """
    results = generation.results
    summary = {"config": config_id, "seed": seed, "candidates": int(len(results.passed)),
               "released": int(results.passed.sum()), "pass_rate": results.pass_rate,
               "split": params.published_split(), "structure": generation.structure,
               "seconds": generation.seconds, "epsilon_total": generation.ledger.total().epsilon,
               "delta_total": generation.ledger.total().delta}
    config = {key: value for key, value in dataclasses.asdict(params).items()
              if key != "buckets" and not isinstance(value, (list, dict))}
    with atomic_directory(Path(out)) as staging:
        write_released(staging, generation.released)
        (staging / "ledger.json").write_text(generation.ledger.to_json(published=True) + "\n", encoding="utf-8")
        (staging / "ledger.txt").write_text(generation.ledger.render_table() + "\n", encoding="utf-8")
        (staging / "privacy-statement.md").write_text(_statement(params, generation), encoding="utf-8")
        (staging / "summary.json").write_text(json_text(summary), encoding="utf-8")
        (staging / "config.toml").write_text(config_toml(
            {"run": {"config": config_id, "seed": seed}, "params": config},
            header="plausible-deniability generation (privlab pd-generate)"), encoding="utf-8")
        write_checksums(staging, BUNDLE_FILES)
