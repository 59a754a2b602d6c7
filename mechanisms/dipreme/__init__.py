"""DiPriMe forests (Consul, Williamson & Dagli 2020) and their baselines as scikit-learn estimators.

The estimators are loaded on first use (PEP 562): importing the package, as the CLI does for the
workload plug-in, does not import scikit-learn.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DPERTClassifier", "DPERTRegressor", "DiPriMeClassifier", "DiPriMeRegressor", "MedianForestClassifier",
           "MedianForestRegressor"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("privlab.mechanisms.dipreme.forest"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
