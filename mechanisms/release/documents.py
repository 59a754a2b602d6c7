"""The release bundle's documents for people: the privacy statement and the datasheet.

Generated from the spec, the shortlist and the accepted outcome only (public inputs and DP
outputs); Hod & Canetti (2024), Section 4.13.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math
from collections.abc import Mapping, Sequence
from typing import Any

from privlab.mechanisms.release import record_count
from privlab.mechanisms.release.flow import FlowOutcome
from privlab.mechanisms.release.guarantee import ReleaseGuarantee
from privlab.mechanisms.release.shortlist import Shortlist
from privlab.mechanisms.release.spec import ReleaseSpec


def _headline(spec: ReleaseSpec, guarantee: ReleaseGuarantee) -> str:
    if guarantee.is_pure:
        return f"**This dataset satisfies ε-differential privacy with ε = {spec.total_epsilon:g} (pure DP, δ = 0).**"
    return (f"**This dataset satisfies (ε, δ)-differential privacy with ε = {guarantee.epsilon:.4g} and "
            f"δ = {guarantee.delta:g}.**")


def _promise(guarantee: ReleaseGuarantee) -> str:
    if guarantee.is_pure:
        return (f"possible released dataset becomes at most e^ε ≈ {math.exp(guarantee.epsilon):.4g} times more or "
                "less likely.")
    return (f"possible released dataset becomes at most e^ε ≈ {math.exp(guarantee.epsilon):.4g} times more or "
            f"less likely, except with a probability of at most δ = {guarantee.delta:g}.")


def _selection_pure(spec: ReleaseSpec, shortlist: Shortlist) -> str:
    s = spec.selection
    horizon = ("γ = 0, T = ∞, ε₀ = 0: it ran until a candidate was accepted" if s.is_infinite_horizon
               else f"γ = {s.gamma:g}, at most T = {s.steps} attempts, ε₀ = {s.epsilon0:g}")
    return f"""Then one *attempt* trains a synthetic-data model on the data with ε_generation = {spec.epsilon_generation:g},
samples a candidate dataset from it (sampling, constraint filtering and the face-privacy projection
only use the private model, so they cost nothing more), and checks the candidate with
acceptance criteria whose errors are released with Laplace noise, ε_acceptance = {spec.epsilon_acceptance:g}
in total. One attempt is therefore ε₁ = {spec.epsilon_flow:g}-differentially private.

| criterion | kind | ε |
|---|---|---|
{_criteria_rows(shortlist)}

Attempts were repeated, each with a configuration drawn uniformly from a public shortlist of
{len(shortlist.configurations)}, until one was accepted ({horizon}). Private selection with a known threshold
(Liu & Talwar 2019; Hod & Canetti 2024, Theorem 3) shows that the whole search, however many attempts
it takes, is (2ε₁ + ε₀)-differentially private: 2 · {spec.epsilon_flow:g} + {s.epsilon0:g} = {spec.epsilon_selection:g}.
With the record count (sequential composition): {spec.epsilon_count:g} + {spec.epsilon_selection:g} = {spec.total_epsilon:g}."""


def _selection_renyi(spec: ReleaseSpec, shortlist: Shortlist, guarantee: ReleaseGuarantee) -> str:
    flows = "\n".join(f"| {', '.join(f.synthesizers)} | {f.rho:.6g} | {f.epsilon:g} |" for f in guarantee.flows)
    gamma = spec.selection.gamma
    return f"""Then one *attempt* trains a synthetic-data model on the data, samples a candidate dataset from it
(sampling, constraint filtering and the face-privacy projection only use the private model, so they
cost nothing more), and checks the candidate with acceptance criteria whose errors are released with
Laplace noise, ε_acceptance = {spec.epsilon_acceptance:g} in total. Some models of the shortlist measure the data with
Gaussian noise and are budgeted in zero-concentrated differential privacy (zCDP, parameter ρ: the
generation budget ε_generation = {spec.epsilon_generation:g} read at δ'' = {shortlist.settings.zcdp_delta:g}); the others are pure
ε-differentially private. Each attempt therefore spends a ρ-zCDP part and a pure ε part:

| models | ρ (zCDP) | ε (pure) |
|---|---|---|
{flows}

| criterion | kind | ε |
|---|---|---|
{_criteria_rows(shortlist)}

Attempts were repeated, each with a configuration drawn uniformly from a public shortlist of
{len(shortlist.configurations)}, until one was accepted; after each rejected attempt the search stopped (and
published nothing) with probability γ = {gamma:g}, so it ran at most 1/γ = {1.0 / gamma:.4g} attempts on average.
This is private selection by random stopping with a geometric number of attempts. Papernot & Steinke
(2022, Theorem 2) bound its Rényi differential privacy by that of one attempt (the largest over the
models above) plus a term in ln(1/γ), however many attempts it takes. The record count composes with
it in Rényi DP, and the total converts to (ε, δ) = ({guarantee.epsilon:.4g}, {guarantee.delta:g}) (Canonne, Kamath & Steinke
2020). The search is not pure ε-DP: with Gaussian noise no pure guarantee exists."""


def _criteria_rows(shortlist: Shortlist) -> str:
    return "\n".join(f"| {c.name} | {c.kind} | {c.epsilon:g} |" for c in shortlist.settings.criteria)


def privacy_statement(spec: ReleaseSpec, shortlist: Shortlist, *, n: int, guarantee: ReleaseGuarantee) -> str:
    """``privacy-statement.md``: the ε (and δ) and the argument in plain language."""
    selection = _selection_pure(spec, shortlist) if guarantee.is_pure else _selection_renyi(spec, shortlist, guarantee)
    samplers = "Laplace" if guarantee.is_pure else "Laplace or Gaussian"
    references = ("" if guarantee.is_pure else
                  "; Papernot & Steinke, \"Hyperparameter Tuning with Renyi Differential Privacy\" (ICLR 2022)")
    return f"""# Privacy statement: {spec.name}

{_headline(spec, guarantee)}

## What this promises

Differential privacy limits how much the released dataset can depend on any one person. Take the
original data and add one person's record, remove one, or replace one with any other record: every
{_promise(guarantee)}
Whatever an attacker knows in advance, seeing this release changes what they can learn about any
one person by at most that factor. The unit of privacy is one record of the original data, before
any cleaning. Public, and fixed from public information before the private data was read: the
schema, its bounds and categories, the cleaning rules, the shortlist of configurations to choose
from and the acceptance criteria.

The number of records is **not** treated as public. Cleaning drops records, so the count after
cleaning depends on who is in the data; it was released with Laplace noise
(ε_record_count = {spec.epsilon_count:g}, sensitivity 1), lowered by a public margin of
{record_count.count_margin(spec.epsilon_count):,} records (so that the data almost never has to be
padded), and the cleaned data was reduced to that many records by a uniformly random choice before
anything else was computed: {n:,} records. Every other step then treats this number as public, as
the paper's analysis does.

## How the budget was spent

First, the number of records: ε_record_count = {spec.epsilon_count:g}.

{selection}
Only the accepted candidate, its configuration and the noisy acceptance results are published; the
number of attempts and the rejected candidates are not.

## How it was computed

All noise was drawn from the operating system's cryptographically secure random number generator
with exact samplers (no floating-point {samplers}), and every draw was recorded in a transcript kept
with the private data, never published, so the release can be audited by replaying it. The
transcript is sealed by a hash chain whose head is published in `transcript-seal.txt`; an auditor
with the private data and the transcript runs `privlab verify`, which refuses a transcript altered
in any way and reproduces every public file byte for byte. The seal is a salted commitment: it
reveals nothing about the data to anyone who cannot break SHA-256.
Synthetic data, binning and the projection add protection in depth but are not part of the
guarantee; the guarantee comes from differential privacy alone.

References: Hod & Canetti, "Differentially Private Release of Israel's National Registry of Live
Births" (2024), Sections 3.7 and 4.9; Liu & Talwar, "Private Selection from Private Candidates"
(STOC 2019){references}.
"""


def _criterion_line(criterion: Any) -> str:
    fields = {f.name: getattr(criterion, f.name) for f in dataclasses.fields(criterion)
              if f.name not in ("name", "threshold", "epsilon")}
    def text_of(value: Any) -> str:
        return ", ".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)

    shown = "; ".join(f"{k}: {text_of(v)}" for k, v in fields.items()
                      if k in ("target", "by", "response", "covariates", "k", "columns", "exact") and v)
    text = criterion.description or criterion.kind
    return f"- **{criterion.name}**: {text} below {criterion.threshold:g}" + (f" ({shown})" if shown else "")


def sizes_note(criteria: Sequence[Any]) -> str:
    """How the criteria compare this release with data of another size (``privlab evaluate``)."""
    def names(items: list[Any]) -> str:
        return ", ".join(c.name for c in items)

    any_size = [c for c in criteria if c.any_size]
    equal = [c for c in criteria if not c.any_size]
    text = ("This table has a differentially private number of records, not the original's. To compare it with "
            "data of another size (`privlab evaluate` does this): ")
    if any_size:
        text += (f"{names(any_size)} {'is' if len(any_size) == 1 else 'are'} defined on proportions, means or "
                 "regression fits and compare datasets of any size as they are")
    if any_size and equal:
        text += "; "
    if equal:
        one = len(equal) == 1
        text += (f"{names(equal)} {'compares' if one else 'compare'} counts or {'matches' if one else 'match'} "
                 f"records one to one and {'needs' if one else 'need'} equal sizes, so this table is first "
                 "resized to the other's size by a seeded draw (each of its m records repeated ⌊n/m⌋ times, plus "
                 "a uniformly random subset of them drawn without replacement; the output states the seed)")
    return text + "."


def _privacy_line(guarantee: ReleaseGuarantee) -> str:
    if guarantee.is_pure:
        return f"ε = {guarantee.epsilon:g}-differential privacy"
    return f"(ε, δ) = ({guarantee.epsilon:.4g}, {guarantee.delta:g})-differential privacy"


def datasheet(spec: ReleaseSpec, shortlist: Shortlist, outcome: FlowOutcome, acceptance: Mapping[str, Any], *,
              n: int, created: str, guarantee: ReleaseGuarantee) -> str:
    """``README.md``: a datasheet for data users (Hod & Canetti 2024, Section 4.13)."""
    sheet = spec.datasheet
    title = sheet.get("title", spec.name)
    columns = []
    transforms = outcome.transformation.columns
    sources = [transform.column.name for transform in transforms]
    shown = [transform.representative_values() for transform in transforms]
    for source_name, column, transform in zip(sources, outcome.transformation.domain, transforms, strict=True):
        columns.append(f"| {source_name} | {column.name} | {', '.join(transform.code_descriptions())} |")
    binned = next(((name, label, value) for name, column, values in zip(sources, outcome.transformation.domain, shown,
                                                                          strict=True)
                   if values is not None
                   for label, value in zip(column.labels, values, strict=True) if label != f"{value:g}"), None)
    example = (f": a row with {binned[0]} {binned[2]:g} means \"a {binned[0]} in the bin {binned[1]}\""
               if binned is not None else "")
    decode_text = ("each value is the **representative value of its bin** (shown after → below), not a measured "
                   f"value{example}"
                   if spec.decode == "representative" else
                   "each value was drawn **uniformly at random inside its bin** (post-processing); digits finer "
                   "than the bins below carry no information")
    criteria = "\n".join(_criterion_line(c) for c in shortlist.settings.criteria)
    return f"""# {title}

{spec.description.strip()}

{shortlist.space.description.strip()}

- Records: {n:,}: a differentially private count of the original records after cleaning, less a public
  margin of {record_count.count_margin(spec.epsilon_count):,} (see `privacy-statement.md`); add the margin for an
  unbiased estimate of the cleaned count
- Files: `released.csv` and `released.parquet` (the same table); `SHA256SUMS` lets you check them
  with `sha256sum -c SHA256SUMS`.
- Privacy: {_privacy_line(guarantee)}; see `privacy-statement.md`.
- Audit: `transcript-seal.txt` publishes the seal of the private transcript of every random draw;
  `privlab verify` checks a transcript against it and reproduces these files byte for byte.
- Produced: {created} with privlab {importlib.metadata.version("privlab")}.
{f"- Publisher: {sheet['publisher']}" if "publisher" in sheet else ""}
{f"- Population: {sheet['population']}" if "population" in sheet else ""}

## What this data is

A **synthetic** dataset: no row is a real person. A generative model was trained on the original
records with differential privacy, records were sampled from it, and the sample was released only
after it passed every acceptance criterion below (their noisy results are in `acceptance.md`). The
columns are those of the original schema at the resolution of the selected transformation
(`{outcome.transformation.id}`); {decode_text}.

Released columns and the codes behind them: each code's label and, after →, what the released
data holds for it (a bin's representative value; a group of categories, listed in brackets, holds
its first category; a boolean column holds the code 0/1 as False/True; a date column holds the
bin's representative date):

| released column | modelled as | codes (label → released value) |
|---|---|---|
{chr(10).join(columns)}

## Intended use: the queries it was designed to answer

The dataset was accepted because, with differential privacy, these statistics of the released data
were found close to those of the original data:

{criteria}

Analyses of the same kind (counts and proportions of these columns and their combinations, group
means along these groupings, the linear regression of these covariates) are what the data supports.

## Not intended for

- Questions about individuals, record linkage or re-identification: no row is a real person.
- Small subgroups, rare combinations and exact counts: noise and synthesis distort them; use
  proportions over groups with many records.
- Precision finer than the bins above, and columns or relations not listed in the criteria.
- Complex machine learning, anomaly or outlier detection, and any analysis whose quality the
  acceptance criteria do not cover: the results may be wrong, without warning.

## Data quality

`acceptance.md` and `acceptance.json` list each criterion's differentially private error, its
threshold, its ε, mechanism, bounds, sensitivity and noise scale. The noisy values are estimates:
a criterion's true error can differ from its noisy value by a few noise scales.

{sizes_note(shortlist.settings.criteria)}

## Production

Configuration: `config.toml`. Privacy ledger: `ledger.json`. Method: Hod & Canetti, "Differentially
Private Release of Israel's National Registry of Live Births" (2024).

## Feedback

{sheet.get("contact", "Contact the publisher of this release.")}
{(chr(10) + sheet["notes"]) if "notes" in sheet else ""}
"""
