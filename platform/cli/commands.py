"""What a ``privlab`` subcommand plug-in needs: exit codes, input errors, registration.

The ``privlab`` command (:mod:`privlab.platform.cli.main`) owns the platform's own subcommands
(run, validate, compare, ledger, runs, report, workloads, audit, cluster). A mechanism that
brings commands of its own (the release scheme: evaluate, shortlist, release, verify) adds
them from an adapter module beside it, listed under the ``privlab.commands`` entry points:
the module calls :func:`register_commands` with a function that adds its subparsers, and may
:func:`register_toml_kind` the TOML files it reads so that ``privlab validate`` recognises
them. The platform thus never imports a mechanism. Handlers import what they need when
they run, so ``privlab --help`` and ``validate`` stay fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from privlab.platform.core.errors import InputError, PrivlabError, TrackingError
from privlab.platform.core.plugins import Registry

EXIT_OK, EXIT_BUG, EXIT_INPUT, EXIT_BUDGET, EXIT_EXECUTION, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
EXIT_NOT_VERIFIED = 5
EXIT_VIOLATION = 6  # `privlab audit` found a violation of the claimed sensitivity or ε
EXIT_CODES_HELP = ("Exit codes: 0 ok (also a run stopped by --max-units: resumable), 2 bad input, 3 budget "
                   "exceeded, 4 execution/tracking failure, 5 not verified (verify), 6 violation found (audit), "
                   "130 interrupted by Ctrl-C or SIGTERM (resumable).")

#: ``add(subparsers)`` functions, by plug-in name; each adds parsers with ``set_defaults(handler=...)``.
COMMANDS: Registry[Callable[[Any], None]] = Registry("command plug-in", groups=("privlab.commands",))


@dataclasses.dataclass(frozen=True)
class TomlKind:
    """A kind of TOML file a plug-in reads, recognised by its top-level keys.

    Args:
        kind: What it is ("release spec").
        marks: Top-level keys that identify it (any one suffices).
        command: The command that takes it, for messages.
        validate: ``validate(path) -> exit code`` for ``privlab validate``; None when the file is
            only ever read through another (``privlab validate`` then names that command).
    """

    kind: str
    marks: frozenset[str]
    command: str
    validate: Callable[[Path], int] | None = None


TOML_KINDS: Registry[TomlKind] = Registry("TOML kind", groups=("privlab.commands",),
                                          identity=lambda k: f"{k.kind}:{sorted(k.marks)}")


def register_commands(name: str, add: Callable[[Any], None]) -> None:
    """Register ``add(subparsers)``, which adds a plug-in's subcommands."""
    COMMANDS.register(name, add)


def register_toml_kind(kind: TomlKind) -> None:
    TOML_KINDS.register(kind.kind, kind)


def add_tracking_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, else ./mlflow.db)")


def add_run_reading_command(
    sub: Any,
    name: str,
    *,
    handler: Callable[[argparse.Namespace], int],
    run_id_help: str,
    out_metavar: str,
    out_help: str,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    **parser_options: Any,
) -> argparse.ArgumentParser:
    """Add subcommand ``name``: it reads a finished run (``RUN_ID``, ``--tracking-uri``) and writes ``--out``.

    Args:
        sub: The ``privlab`` subparsers.
        name: The subcommand.
        handler: ``handler(args) -> exit code``.
        run_id_help: The help line of ``RUN_ID``.
        out_metavar: What ``--out`` names (``DIR``, ``PATH``).
        out_help: The help line of ``--out``.
        options: More options, ``flag → add_argument keywords``, listed before ``--out``.
        **parser_options: For ``add_parser`` (``help``, ``description``…).
    """
    parser = sub.add_parser(name, **parser_options)
    parser.add_argument("run_id", help=run_id_help)
    for flag, settings in (options or {}).items():
        parser.add_argument(flag, **settings)
    parser.add_argument("--out", required=True, metavar=out_metavar, help=out_help)
    add_tracking_argument(parser)
    parser.set_defaults(handler=handler)
    return parser


def finished_summary(tracker: Any, run_id: str, *, hint: str) -> tuple[Any, dict[str, Any]]:
    """A finished privlab parent run and its summary, each configuration's entry included
    (errors say what to give instead)."""
    from privlab.platform.tracking.run_tags import RunTags

    run = tracker.get_run(run_id)
    if RunTags.of(run).kind != "parent":
        raise InputError(f"run {run_id} is not a privlab parent run; {hint}")
    text = tracker.read_text(run_id, "summary.json")
    if text is None:
        raise TrackingError(f"run {run_id} has no summary.json: it did not finish (resume it first)")
    from privlab.platform.run.run_summary import stored_summary

    return run, stored_summary(tracker, run_id, json.loads(text))


def for_people(text: str) -> str:
    """A docstring as help text: reStructuredText's ````code```` as `code`, a role such as
    ``:meth:`Workload.facets``` as `Workload.facets`, and references to the source
    ("(module docstring)") left out."""
    import re

    text = re.sub(r":[a-z]+:`[~.]*([^`]+)`", r"`\1`", text)
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    return re.sub(r" ?\((?:see )?(?:the )?module docstring\)", "", text)


def toml_kind(path: Path) -> TomlKind | None:
    """The registered kind of a TOML file that is not an experiment spec (None: unknown)."""
    from privlab.platform.core.toml_files import read_toml

    try:
        keys = set(read_toml(path, what="file")[0])
    except PrivlabError:  # unreadable: reading it as a spec reports why
        return None
    if keys & {"workload", "study"}:
        return None
    return next((kind for _, kind in TOML_KINDS.items() if kind.marks & keys), None)
