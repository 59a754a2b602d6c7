"""The privlab error hierarchy.

Every error privlab raises on purpose derives from :class:`PrivlabError` and also from the
builtin that fits (``ValueError`` for a wrong value, ``TypeError`` for a wrong kind of value),
so callers can catch either. Messages name the problem and say what to do.
"""

from __future__ import annotations


class PrivlabError(Exception):
    """Base class of every error privlab raises deliberately."""


class SpecError(PrivlabError, ValueError):
    """An experiment spec is invalid: unknown key, wrong type, bad grid, missing file."""


class SchemaError(PrivlabError, ValueError):
    """Data does not match its declared schema: missing column, NaN, value out of bounds.

    Besides its message, a data-validation error carries ``column`` (the column at fault, or
    None for the data as a whole) and ``problem`` (one of :data:`SCHEMA_PROBLEMS`), so that
    release mode can say what is wrong without the message's rows, values and counts.
    """

    def __init__(self, message: str, *, column: str | None = None, problem: str | None = None) -> None:
        super().__init__(message)
        if problem is not None and problem not in SCHEMA_PROBLEMS:
            raise ValueError(f"problem ({problem!r}) must be one of {', '.join(SCHEMA_PROBLEMS)}")
        self.column = column
        self.problem = problem


#: What a data-validation SchemaError may report, with the words release mode uses for it.
SCHEMA_PROBLEMS = {
    "empty": "no records",
    "missing_column": "a missing column",
    "missing": "missing or NaN values",
    "categories": "values outside the declared categories",
    "kind": "values of the wrong kind",
    "fractional": "fractional values in an integer column",
    "bounds": "values outside the column's public bounds",
    "boolean": "values that are not booleans",
    "date_format": "values that do not parse as dates in the declared format",
    "nothing_left": "no record left after the raw constraints",
    "ragged": "records with more or fewer fields than the header (or the declared columns)",
}


class RegistryError(PrivlabError, KeyError):
    """An unknown workload, dataset generator or mechanism name was requested."""

    def __str__(self) -> str:  # KeyError would quote the message; show it as written.
        return str(self.args[0]) if self.args else ""


class BudgetExceededError(PrivlabError, ValueError):
    """A DP step would take the run past its privacy budget; the step did not run."""


class LedgerError(PrivlabError, ValueError):
    """A ledger operation is malformed (bad event, undeclared scope, mismatch with the plan)."""


class ModeError(PrivlabError, RuntimeError):
    """An operation is not allowed in the current mode (research vs release)."""


class TranscriptError(PrivlabError, ValueError):
    """A randomness transcript is corrupt or does not match the requests replayed against it."""


class TrackingError(PrivlabError, RuntimeError):
    """The tracking store cannot be reached or does not hold what was asked for."""


class TrackingOutage(TrackingError):
    """The tracking server stayed unreachable longer than ``[tracking] outage_wait_s``; what the
    run computed is kept locally (:mod:`privlab.platform.run.outbox`) for its resume."""

    def __init__(self, message: str, *, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


class ExecutionError(PrivlabError, RuntimeError):
    """A run could not complete (a task failed after its retries, a resume does not match)."""


class NotFittedError(PrivlabError, RuntimeError):
    """A model (synthesizer) was used before ``fit`` succeeded."""


class NotFoundError(PrivlabError, LookupError):
    """A name given on the command line (an experiment, a tracking store) does not exist;
    the message lists what does."""

    def __str__(self) -> str:  # LookupError subclasses may quote the message; show it as written.
        return str(self.args[0]) if self.args else ""


class VerificationError(PrivlabError, ValueError):
    """A release bundle is not what its sealed transcript, spec and data reproduce (``privlab verify``)."""


class InputError(PrivlabError, ValueError):
    """Bad command-line input (exit code 2)."""


class SequentialCompositionWarning(UserWarning):
    """Steps a caller might expect to compose in parallel compose sequentially, because the parts
    were not cut by a split the ledger can check; the ledger's total says what was spent."""
