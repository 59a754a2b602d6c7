"""A table as the model sees it: read with a release space, coded, and its public buckets.

The space (``mechanisms/tabular``) says how the files are written, the public schema and how
each column is coded (one alternative per column); records with a missing value are dropped
by its raw constraints, as the paper's Section 4 does. The bucketisation of Section 3.3 (eq. 7)
is public too and comes from the spec, written per attribute as

* ``{ width = w }`` — codes 0..w−1 form bucket 0, w..2w−1 bucket 1, … (age in bins of 10: the
  first bucket holds the ages lower, …, lower + 9);
* ``{ groups = [[label, …], …] }`` — the listed categories of each group share a bucket; every
  other category keeps one of its own (education below high school, and high school without
  college, in two buckets).

Privacy:
    Reading, coding and bucketing are per-record maps fixed by public specs; nothing here
    reads a statistic of the data. The record count is used as public (the split sizes are
    fractions of it; see :mod:`.split`).

References:
    Bindschaedler, Shokri & Gunter (VLDB 2017), Sections 3.3 and 4.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from privlab.mechanisms.tabular.domain import CODE_DTYPE, Domain
from privlab.mechanisms.tabular.space import resolve_transformation
from privlab.mechanisms.tabular.space import load_release_space
from privlab.platform.core.errors import SchemaError, SpecError

__all__ = ["CodedTable", "bucket_map", "load_coded_table"]


@dataclasses.dataclass(frozen=True)
class CodedTable:
    """Integer codes over a public domain, with each code's label (for decoding and reports)."""

    codes: pd.DataFrame
    domain: Domain

    def decode(self, codes: pd.DataFrame) -> pd.DataFrame:
        """Codes as the labels of their domain (e.g. synthetic records for people to read)."""
        return pd.DataFrame({c.name: pd.Categorical.from_codes(codes[c.name].to_numpy(), categories=list(c.labels))
                             for c in self.domain})


@functools.lru_cache(maxsize=4)
def load_coded_table(space_path: str, data_paths: tuple[str, ...], transformation: str = "") -> CodedTable:
    """Read ``data_paths`` with the space at ``space_path``, clean, concatenate and code them
    with the space's ``transformation`` (a possibly partial id, e.g. ``"income=class"``).

    Raises:
        SpecError: the space is invalid, a file is missing, or a column has several
            transformation alternatives and ``transformation`` does not choose one.
        SchemaError: a file does not fit the space's schema (the column is named).
    """
    if not data_paths:
        raise SpecError("data must name at least one file")
    space = load_release_space(space_path)
    frames = []
    for path in data_paths:
        if not Path(path).is_file():
            raise SpecError(f"data ({path!r}) does not exist; give the path of a data file the space "
                            f"{space.name!r} describes")
        frames.append(space.clean_raw(space.read_raw(path, what=f"data file {path!r}"), source=Path(path).name))
    raw = pd.concat(frames, ignore_index=True)
    coding = resolve_transformation(space, transformation)
    codes = coding.apply(raw).astype(CODE_DTYPE)
    return CodedTable(codes=codes.reset_index(drop=True), domain=coding.domain)


def bucket_map(domain: Domain, buckets: Mapping[str, Any]) -> dict[str, list[int]]:
    """The spec's bucketisation as ``{attribute: bucket of each code}`` (module docstring).

    Raises:
        SchemaError: an unknown attribute or category.
        SpecError: a malformed entry (a width < 1, a category in two groups, unknown keys).
    """
    if not isinstance(buckets, Mapping):
        raise SpecError(f"buckets ({buckets!r}) must be a table of attribute = {{ width = w }} or {{ groups = [...] }}")
    out: dict[str, list[int]] = {}
    for name, rule in buckets.items():
        if name not in domain.names:
            raise SchemaError(f"buckets: unknown attribute {name!r}; the attributes are {', '.join(domain.names)}",
                              column=name)
        column = domain[name]
        if not isinstance(rule, Mapping) or len(rule) != 1 or next(iter(rule)) not in ("width", "groups"):
            raise SpecError(f"buckets.{name} ({rule!r}) must be {{ width = w }} or {{ groups = [[...], ...] }}")
        if "width" in rule:
            width = rule["width"]
            if isinstance(width, bool) or not isinstance(width, int) or width < 1:
                raise SpecError(f"buckets.{name}.width ({width!r}) must be an int >= 1")
            out[name] = [code // width for code in range(column.size)]
        else:
            out[name] = _grouped(name, list(column.labels), rule["groups"])
    return out


def _grouped(name: str, labels: list[str], groups: Sequence[Sequence[str]]) -> list[int]:
    if not isinstance(groups, Sequence) or isinstance(groups, str) or not groups:
        raise SpecError(f"buckets.{name}.groups ({groups!r}) must be a non-empty list of lists of categories")
    bucket_of: dict[str, int] = {}
    for index, group in enumerate(groups):
        if isinstance(group, str) or not isinstance(group, Sequence) or not group:
            raise SpecError(f"buckets.{name}.groups[{index}] ({group!r}) must be a non-empty list of categories")
        for label in group:
            if label not in labels:
                raise SchemaError(f"buckets.{name}: {label!r} is not a category of {name!r} "
                                  f"(declared: {', '.join(labels)})", column=name)
            if label in bucket_of:
                raise SpecError(f"buckets.{name}: {label!r} is in two groups")
            bucket_of[label] = index
    out, next_bucket = [], len(groups)
    for label in labels:
        if label in bucket_of:
            out.append(bucket_of[label])
        else:
            out.append(next_bucket)
            next_bucket += 1
    return out
