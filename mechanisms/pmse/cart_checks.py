"""The pMSE trees' arguments, checked before any kernel runs: the features and labels, the
``(max_depth, cp)`` configurations, the tree rule (rpart's or the greedy one) and its settings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Literal

import numpy as np

from privlab.mechanisms.pmse import cart_layout, greedy_tree

TieBreak = Literal["first", "sklearn"]


def check_configuration(max_depth: int | None, cp: float) -> tuple[int, float]:
    """Validate one ``(max_depth, cp)`` and return it as ``(depth limit, cp)`` for the kernels.

    Raises:
        TypeError: ``max_depth`` is not an int or None, or ``cp`` is not a real number.
        ValueError: ``max_depth < 1`` or ``cp`` negative or not finite.
    """
    if max_depth is not None and (not isinstance(max_depth, Integral) or isinstance(max_depth, bool)):
        raise TypeError(f"max_depth ({max_depth!r}) must be a positive int or None (unlimited)")
    if max_depth is not None and max_depth < 1:
        raise ValueError(f"max_depth ({max_depth!r}) must be a positive int or None (unlimited)")
    if not isinstance(cp, Real) or isinstance(cp, bool):
        raise TypeError(f"cp ({cp!r}) must be a real number")
    if not math.isfinite(cp) or cp < 0:
        raise ValueError(f"cp ({cp!r}) must be a finite number ≥ 0")
    return (greedy_tree.NO_DEPTH_LIMIT if max_depth is None else min(int(max_depth), greedy_tree.NO_DEPTH_LIMIT)), float(cp)


def configuration_arrays(configs: Sequence[tuple[int | None, float]]) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(configs, (str, bytes)) or not isinstance(configs, Sequence):
        raise TypeError(f"configs ({configs!r}) must be a sequence of (max_depth, cp) pairs")
    if len(configs) == 0:
        raise ValueError(f"configs ({configs!r}) must hold at least one (max_depth, cp) pair")
    depths = np.empty(len(configs), np.int64)
    cps = np.empty(len(configs), np.float64)
    for k, config in enumerate(configs):
        if not isinstance(config, tuple) or len(config) != 2:
            raise TypeError(f"configs[{k}] ({config!r}) must be a (max_depth, cp) tuple")
        depths[k], cps[k] = check_configuration(*config)
    return depths, cps


def check_features(name: str, value: np.ndarray) -> np.ndarray:
    """Validate an ``(n, q)`` data matrix and return it as C-contiguous float64.

    Raises:
        TypeError: Non-numeric values.
        ValueError: Not 2-D, no rows or columns, too many rows, or NaN/inf values.
    """
    array = np.asarray(value)
    if array.ndim != 2:
        raise ValueError(
            f"{name} (shape {array.shape!r}) must be a 2-D array (rows × columns); "
            "reshape a single column with .reshape(-1, 1)"
        )
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} (dtype {array.dtype!r}) must hold real numbers; encode categories first")
    if array.shape[0] < 1 or array.shape[1] < 1:
        raise ValueError(f"{name} (shape {array.shape!r}) must have at least one row and one column")
    if array.shape[0] > cart_layout.MAX_ROWS // 2:
        raise ValueError(f"{name} rows ({array.shape[0]!r}) must be at most {cart_layout.MAX_ROWS // 2}")
    array = np.ascontiguousarray(array, dtype=np.float64)
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite; drop or impute NaN/inf rows before computing the pMSE")
    return array


def check_labels(labels: np.ndarray, n_rows: int) -> np.ndarray:
    array = np.asarray(labels)
    if array.shape != (n_rows,):
        raise ValueError(f"labels (shape {array.shape!r}) must have shape ({n_rows},), one per row of Z")
    if array.dtype.kind not in "biuf" or not np.all((array == 0) | (array == 1)):
        raise ValueError("labels must be 0 (real) or 1 (synthetic)")
    return array.astype(np.uint8)


Tree = Literal["rpart", "greedy"]


TREES: tuple[str, ...] = ("rpart", "greedy")


#: rpart.control's defaults: minsplit = 20, minbucket = round(minsplit / 3).
DEFAULT_MINSPLIT = 20


@dataclass(frozen=True)
class Rule:
    """A validated tree rule: which tree, and its fixed-per-fit settings."""

    tree: str
    emulate: bool = False  # greedy only: replay scikit-learn's feature order
    minsplit: int = DEFAULT_MINSPLIT  # rpart only
    minbucket: int = 7  # rpart only


GREEDY = Rule("greedy")


def check_tie_break(tie_break: str) -> bool:
    if tie_break not in ("first", "sklearn"):
        raise ValueError(f"tie_break ({tie_break!r}) must be 'first' or 'sklearn'")
    return tie_break == "sklearn"


def check_tree(tree: str) -> str:
    """Validate a tree rule name (``"rpart"`` or ``"greedy"``)."""
    if not isinstance(tree, str) or tree not in TREES:
        raise ValueError(f"tree ({tree!r}) must be one of {', '.join(map(repr, TREES))}")
    return tree


def check_rule(
    tree: str = "rpart", *, tie_break: str = "first", minsplit: int = DEFAULT_MINSPLIT, minbucket: int | None = None
) -> Rule:
    """Validate a tree rule and its settings.

    Args:
        tree: ``"rpart"`` (R's rpart, :mod:`.rpart_tree`) or ``"greedy"`` (pre-pruned Gini
            CART, this module's docstring).
        tie_break: ``"first"`` or ``"sklearn"`` (greedy only).
        minsplit: rpart's minsplit (rpart only), an int ≥ 2.
        minbucket: rpart's minbucket (rpart only), an int ≥ 1; None means
            ``round(minsplit / 3)`` (rpart's default; never a half, so rounding mode is moot),
            at least 1.

    Raises:
        TypeError, ValueError: A bad value, or an rpart setting given for the greedy rule.
    """
    check_tree(tree)
    emulate = check_tie_break(tie_break)
    if not isinstance(minsplit, Integral) or isinstance(minsplit, bool):
        raise TypeError(f"minsplit ({minsplit!r}) must be an int ≥ 2")
    if minsplit < 2:
        raise ValueError(f"minsplit ({minsplit!r}) must be an int ≥ 2")
    if minbucket is not None and (not isinstance(minbucket, Integral) or isinstance(minbucket, bool)):
        raise TypeError(f"minbucket ({minbucket!r}) must be an int ≥ 1 or None (round(minsplit / 3))")
    if minbucket is not None and minbucket < 1:
        raise ValueError(f"minbucket ({minbucket!r}) must be an int ≥ 1 or None (round(minsplit / 3))")
    if tree == "greedy":
        if minsplit != DEFAULT_MINSPLIT or minbucket is not None:
            raise ValueError(
                f"minsplit ({minsplit!r}) and minbucket ({minbucket!r}) must be left at their defaults with "
                "tree='greedy' (they are rpart's settings)"
            )
        return Rule("greedy", emulate=emulate)
    if emulate:
        raise ValueError("tie_break ('sklearn') must be 'first' with tree='rpart' (it replays scikit-learn's order)")
    bucket = max(1, round(int(minsplit) / 3)) if minbucket is None else int(minbucket)
    return Rule("rpart", minsplit=int(minsplit), minbucket=bucket)
