"""Declarative parameter constraints (platform/core/validation.py) and the estimator base's
scikit-learn parameter API (platform/dp/estimator.py) on a minimal keyword estimator.

The forests hold these through their own suites (test_dipreme_*, scikit-learn's estimator
checks); here each rule is pinned once: the message format, TypeError for a value of no listed
kind and ValueError for a wrong value of a listed kind, every alternative named, and
scikit-learn's ``get_params``/``set_params``/``clone`` semantics, nested parameters included.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import pytest
from sklearn.base import clone

import dataclasses

from privlab.platform.core.errors import SpecError
from privlab.platform.core.validation import (BOOLEAN, ConstrainedParams, ConstraintSpec, InstanceOf, Interval, Options,
                                              RealPair, Text, Unconstrained, describe_constraints, validate_parameters)
from privlab.platform.dp.estimator import PrivateEstimator

CONSTRAINTS: dict[str, list[ConstraintSpec]] = {
    "epsilon": [Interval(Real, 0, None, closed="neither")],
    "depth": [Interval(Integral, 1, 20, closed="both")],
    "share": [Interval(Real, 0, 1, closed="neither")],
    "features": [None, Options(str, {"sqrt"}), Interval(Integral, 1, None, closed="left")],
    "partition": [Options(str, {"disjoint", "full"})],
    "bounds": [RealPair()],
    "rng": [None, InstanceOf(np.random.Generator, "a numpy Generator")],
    "column": [Text("a column name")],
    "flag": [BOOLEAN],
}


@pytest.mark.parametrize(("name", "value", "error", "message"), [
    ("epsilon", 0.0, ValueError, "epsilon (0.0) must be a finite real number > 0"),
    ("epsilon", math.inf, ValueError, "epsilon (inf) must be a finite real number > 0"),
    ("epsilon", math.nan, ValueError, "epsilon (nan) must be a finite real number > 0"),
    ("epsilon", None, TypeError, "epsilon (None) must be a finite real number > 0"),
    ("epsilon", True, TypeError, "epsilon (True) must be a finite real number > 0"),
    ("depth", 21, ValueError, "depth (21) must be an int in [1, 20]"),
    ("depth", 3.0, TypeError, "depth (3.0) must be an int in [1, 20]"),
    ("share", 1, ValueError, "share (1) must be a finite real number in (0, 1)"),
    ("features", 0, ValueError, "features (0) must be None, 'sqrt' or an int >= 1"),
    ("features", "log2", ValueError, "features ('log2') must be None, 'sqrt' or an int >= 1"),
    ("features", 1.5, TypeError, "features (1.5) must be None, 'sqrt' or an int >= 1"),
    ("partition", "random", ValueError, "partition ('random') must be one of ['disjoint', 'full']"),
    ("bounds", (1.0, 0.0), ValueError, "bounds ((1.0, 0.0)) must be a pair (lower, upper) of finite real numbers"),
    ("bounds", "01", TypeError, "bounds ('01') must be a pair"),
    ("rng", 3, TypeError, "rng (3) must be None or a numpy Generator"),
    ("column", "", ValueError, "column ('') must be a column name"),
    ("column", 3, TypeError, "column (3) must be a column name"),
    ("flag", 1, TypeError, "flag (1) must be true or false"),
])
def test_a_value_outside_its_constraints_is_refused_with_the_one_message_format(
        name: str, value: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as raised:
        validate_parameters(CONSTRAINTS, {name: value})
    assert type(raised.value) is error and str(raised.value).startswith(message)


def test_values_inside_their_constraints_pass_and_undeclared_parameters_are_a_bug() -> None:
    validate_parameters(CONSTRAINTS, {"epsilon": 1e-9, "depth": 20, "share": 0.5, "features": None,
                                      "partition": "full", "bounds": np.array([0.0, 1.0]),
                                      "rng": np.random.default_rng(0)})
    validate_parameters(CONSTRAINTS, {"features": "sqrt"})
    validate_parameters(CONSTRAINTS, {"features": np.int64(3)})
    with pytest.raises(ValueError, match=r"parameters \(\['typo'\]\) must have declared constraints"):
        validate_parameters(CONSTRAINTS, {"typo": 1})
    assert describe_constraints([None]) == "None"
    validate_parameters({"table": [Unconstrained()]}, {"table": object()})


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Criterion(ConstrainedParams):
    """A spec section whose messages name their owner, are all SpecErrors and say what to do."""

    name: str
    epsilon: float
    _parameter_constraints: ClassVar = {"name": [Text()], "epsilon": [Interval(Real, 0, None, closed="neither")]}
    _type_error: ClassVar = SpecError
    _parameter_hints: ClassVar = {"epsilon": "drop the section instead"}

    def _message_prefix(self) -> str:
        return f"criterion {self.name!r}: "


def test_a_params_class_can_prefix_its_messages_add_hints_and_raise_spec_errors_only() -> None:
    with pytest.raises(SpecError) as raised:
        _Criterion(name="c", epsilon=0)
    assert str(raised.value) == "criterion 'c': epsilon (0) must be a finite real number > 0; drop the section instead"
    with pytest.raises(SpecError, match=r"^criterion 'c': epsilon \('1'\) must be a finite real number > 0"):
        _Criterion(name="c", epsilon="1")
    assert _Criterion(name="c", epsilon=1).epsilon == 1


class _Inner(PrivateEstimator):
    name: ClassVar[str] = "inner_example"
    _parameter_constraints: ClassVar[dict[str, list[ConstraintSpec]]] = {"scale": [Interval(Real, 0, None,
                                                                                           closed="neither")]}

    def __init__(self, *, scale: float = 1.0) -> None:
        self.scale = scale


class _Outer(PrivateEstimator):
    name: ClassVar[str] = "outer_example"
    _parameter_constraints: ClassVar[dict[str, list[ConstraintSpec]]] = {
        "epsilon": [Interval(Real, 0, None, closed="neither")], "inner": [InstanceOf(_Inner, "an _Inner")]}

    def __init__(self, *, epsilon: float | None = None, inner: _Inner | None = None) -> None:
        self.epsilon = epsilon
        self.inner = inner


def test_keyword_estimators_follow_scikit_learns_parameter_api() -> None:
    est = _Outer(epsilon=1.0, inner=_Inner(scale=2.0))
    assert est.get_params(deep=False) == {"epsilon": 1.0, "inner": est.inner}
    assert est.get_params() == {"epsilon": 1.0, "inner": est.inner, "inner__scale": 2.0}
    assert est.set_params(epsilon=0.5, inner__scale=3.0) is est
    assert (est.epsilon, est.inner.scale) == (0.5, 3.0)
    with pytest.raises(ValueError, match=r"Invalid parameter 'scale' for estimator _Outer"):
        est.set_params(scale=1.0)
    copy = clone(est)
    assert copy is not est and copy.inner is not est.inner and copy.get_params(deep=False)["epsilon"] == 0.5
    assert "epsilon=0.5" in repr(est) and "not fitted" in repr(est)
    est.set_params(epsilon=None)
    with pytest.raises(TypeError, match=r"epsilon \(None\) must be a finite real number > 0"):
        est._validate_params()
    with pytest.raises(TypeError, match="takes keyword arguments"):
        PrivateEstimator(object())
