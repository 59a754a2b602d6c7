"""The methods a ``private_forests`` study compares, and their names on results pages."""

from __future__ import annotations

__all__ = ["METHODS", "METHOD_LABELS", "PRIVATE"]

METHODS = ("dipreme", "dpert", "dpdf", "median", "random_forest", "extra_trees")
PRIVATE = ("dipreme", "dpert", "dpdf")
"""The DP methods: they charge the run's ledger; the others are non-private baselines."""
METHOD_LABELS = {"dipreme": "DiPriMe", "dpert": "DP-ERT", "dpdf": "DP-DF", "median": "Median Trees",
                 "random_forest": "Random Forest", "extra_trees": "ERT"}
