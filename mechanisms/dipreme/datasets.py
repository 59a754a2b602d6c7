"""Readers for the DiPriMe paper's UCI datasets (files under ``../shared/data`` beside the checkout).

Each reader returns the feature columns (named as in the UCI documentation) and a ``target``
column, nothing else (``wall_robot_binary``: the robot's four classes folded into Move-Forward
and Turn, the two-class task of the paper's Table 2): identifiers (``ID``, ``subject#``), the timestamp (``date``) and the
second Parkinson's score (``motor_UPDRS``, a near-copy of the target) are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from privlab.platform.core.errors import SchemaError

__all__ = ["READERS", "TASKS", "read_dataset"]

TARGET = "target"

CREDIT_NAMES = ["LIMIT_BAL", "SEX", "EDUCATION", "MARRIAGE", "AGE", "PAY_0", "PAY_2", "PAY_3", "PAY_4", "PAY_5",
                "PAY_6", *[f"BILL_AMT{i}" for i in range(1, 7)], *[f"PAY_AMT{i}" for i in range(1, 7)]]


def _banknote(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path, header=None, names=["variance", "skewness", "curtosis", "entropy", TARGET])
    return frame


def _credit(path: Path) -> pd.DataFrame:
    raw = pd.read_csv(path)
    frame = raw[[f"X{i}" for i in range(1, 24)]].set_axis(CREDIT_NAMES, axis=1).astype(float)
    frame[TARGET] = raw["Y"].to_numpy()
    return frame


def _robot(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, header=None, names=[*[f"US{i}" for i in range(1, 25)], TARGET])


def _robot_binary(path: Path) -> pd.DataFrame:
    """The paper's robot task: Move-Forward against the three turning classes together."""
    frame = _robot(path)
    frame[TARGET] = frame[TARGET].where(frame[TARGET] == "Move-Forward", "Turn")
    return frame


def _parkinsons(path: Path) -> pd.DataFrame:
    raw = pd.read_csv(path)
    frame = raw.drop(columns=["subject#", "motor_UPDRS", "total_UPDRS"]).astype(float)
    frame[TARGET] = raw["total_UPDRS"].to_numpy(dtype=float)
    return frame


def _appliances(path: Path) -> pd.DataFrame:
    raw = pd.read_csv(path)
    frame = raw.drop(columns=["date", "Appliances"]).astype(float)
    frame[TARGET] = raw["Appliances"].to_numpy(dtype=float)
    return frame


READERS: dict[str, Callable[[Path], pd.DataFrame]] = {
    "banknote": _banknote, "credit_default": _credit, "wall_robot": _robot, "wall_robot_binary": _robot_binary,
    "parkinsons": _parkinsons, "appliances": _appliances,
}
TASKS = {"banknote": "classification", "credit_default": "classification", "wall_robot": "classification",
         "wall_robot_binary": "classification", "parkinsons": "regression", "appliances": "regression"}


def read_dataset(reader: str, path: str | Path) -> pd.DataFrame:
    """The dataset's features and ``target``.

    Raises:
        SchemaError: the file is missing or lacks a column the reader needs.
    """
    path = Path(path)
    if not path.is_file():
        raise SchemaError(f"data ({str(path)!r}) must be an existing file (the public datasets live in ../shared/data beside the checkout)",
                          problem="missing_column")
    try:
        return READERS[reader](path)
    except KeyError as error:
        raise SchemaError(f"data ({str(path)!r}) lacks a column the {reader!r} reader needs: {error}",
                          problem="missing_column") from error
