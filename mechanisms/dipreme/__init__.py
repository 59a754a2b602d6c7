"""DiPriMe forests (Consul, Williamson & Dagli 2020) and their baselines as scikit-learn estimators."""

from privlab.mechanisms.dipreme.forest import (DiPriMeClassifier, DiPriMeRegressor, DPERTClassifier, DPERTRegressor,
                                               MedianForestClassifier, MedianForestRegressor)

__all__ = ["DPERTClassifier", "DPERTRegressor", "DiPriMeClassifier", "DiPriMeRegressor", "MedianForestClassifier",
           "MedianForestRegressor"]
