"""``privlab run`` and ``privlab audit``: the commands that run units of work on Ray, with what
they tell the user (where the units go, the resume command, the summary, the phases' seconds)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from privlab.platform.cli.commands import EXIT_EXECUTION, EXIT_INTERRUPTED, EXIT_OK, EXIT_VIOLATION
from privlab.platform.cli.terminal import terminal_width, without_options
from privlab.platform.core.atomic_files import write_json_atomically
from privlab.platform.core.errors import ExecutionError, InputError, TrackingOutage
from privlab.platform.execution.interrupts import ignore_further_interrupts

DEFAULT_CLUSTER_STATE = ".privlab/cluster"


def run_options(args: argparse.Namespace, *, report_dir: Path | None = None) -> Any:
    """The runner options shared by `run` and `audit` (execution, tracking, resume, progress).

    Raises:
        InputError: ``--max-units`` below 1, or ``--summary-json`` in a folder that does not exist
            (found now, not after the run).
    """
    from privlab.platform.run.runner import RunOptions

    check_workers(args)
    if args.summary_json and not Path(args.summary_json).absolute().parent.is_dir():
        raise InputError(f"--summary-json {args.summary_json!r}: its folder does not exist; create it first")
    return RunOptions(
        workers=args.workers,
        address=args.address,
        serial=args.serial,
        tracking_uri=args.tracking_uri,
        resume=args.resume,
        progress=not args.no_progress,
        stop_after_units=args.max_units,
        command=shlex.join(["privlab", *args.argv]),
        report_dir=report_dir,
        lifecycle=_SaysResumeCommand(args),
    )


def resume_command(args: argparse.Namespace, run_id: str) -> str:
    """The same command line (--tracking-uri and --set included) with ``--resume run_id``."""
    return shlex.join(["privlab", *without_options(args.argv, {"--resume", "--max-units"}), "--resume", run_id])


class _SaysResumeCommand:
    """The command line's :class:`~privlab.platform.run.run_events.RunLifecycle`: prints the run's
    id and the command that resumes it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def run_started(self, run_id: str) -> None:
        # Printed first, so even a killed driver leaves the id and the command on screen.
        print(f"privlab: run {run_id}; if it stops, resume with: {resume_command(self.args, run_id)}",
              file=sys.stderr, flush=True)

    def run_abandoned(self, run_id: str) -> None:
        print(f"\nprivlab: run {run_id} abandoned while saving; finished work up to its last checkpoint is kept.\n"
              f"resume with: {resume_command(self.args, run_id)}", file=sys.stderr, flush=True)


def say_stopped(args: argparse.Namespace, stop: Any) -> int:
    """A run that stopped before finishing (resumable): exit 0 when ``--max-units`` asked for
    the stop, 130 when it was interrupted (Ctrl-C, SIGTERM)."""
    ignore_further_interrupts()
    print(
        f"\nprivlab: run {stop.run_id} stopped ({stop}); finished work is saved.\n"
        f"resume with: {resume_command(args, stop.run_id)}",
        file=sys.stderr,
    )
    return EXIT_OK if stop.requested else EXIT_INTERRUPTED


def say_outage(args: argparse.Namespace, outage: TrackingOutage) -> int:
    resume = f"\nresume with: {resume_command(args, outage.run_id)}" if outage.run_id else ""
    print(f"\nprivlab: run {outage.run_id} stopped: {outage}{resume}", file=sys.stderr)
    return EXIT_EXECUTION


def run_command(args: argparse.Namespace) -> int:
    from privlab.platform.run.runner import RunInterrupted, run_experiment
    from privlab.platform.experiment.spec import load_spec

    check_workers(args)
    spec = load_spec(args.spec, args.set or [])
    where = choose_cluster(args)
    cap_local_workers(args)
    options = run_options(args, report_dir=Path(args.report_dir) if args.report_dir else None)
    units = sum(c.units for c in spec.configurations)
    print(f"privlab: {spec.name}: {len(spec.configurations)} configuration(s), {units:,} unit(s) of work, {where}",
          file=sys.stderr)
    try:
        summary = run_experiment(spec, options)
    except RunInterrupted as stop:
        return say_stopped(args, stop)
    except TrackingOutage as outage:
        return say_outage(args, outage)
    if args.summary_json:
        write_json_atomically(args.summary_json, summary)
    print_summary(summary)
    if args.report_dir:
        print(f"reports written to {args.report_dir}", file=sys.stderr)
    return EXIT_OK


MAX_WORKERS = 10_000  # more worker processes than any machine or cluster privlab runs on has CPUs


def check_workers(args: argparse.Namespace) -> None:
    """Refuse a ``--workers`` or ``--max-units`` no run can use, before anything is read or created.

    Raises:
        InputError: ``--workers`` outside [1, :data:`MAX_WORKERS`], or ``--max-units`` outside
            [1, 2**63 - 1].
    """
    from privlab.platform.core.validation import MAX_INT64, shown

    if args.workers is not None and not 1 <= args.workers <= MAX_WORKERS:
        raise InputError(f"--workers ({shown(args.workers)}) must be an int in [1, {MAX_WORKERS:,}]: the worker "
                          "processes to run (at most this machine's CPUs, or the cluster's)")
    if args.max_units is not None and not 1 <= args.max_units <= MAX_INT64:
        raise InputError(f"--max-units ({shown(args.max_units)}) must be an int in [1, {MAX_INT64:,}]: the units of "
                          "work to do before stopping (resumably)")


def local_cpus() -> int:
    """The CPUs this process may run on (its affinity, which a container or ``taskset`` narrows)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def cap_local_workers(args: argparse.Namespace) -> None:
    """On a private local Ray instance, ``--workers`` above this machine's CPUs is capped to them,
    with a warning that says how to keep it (``--oversubscribe``): each worker is a process of
    about 175 MB competing for the same CPUs, so 12 workers on 2 CPUs took 3 GiB and ran no
    faster. On a cluster the backend caps it to the cluster's CPUs (and says so)."""
    if args.serial or args.address is not None or args.workers is None or args.oversubscribe:
        return
    cpus = local_cpus()
    if args.workers > cpus:
        print(f"privlab: warning: --workers {args.workers} is more than this machine's {cpus} CPU(s); using {cpus} "
              f"(each worker is a process of about 175 MB; give --oversubscribe to run {args.workers} anyway)",
              file=sys.stderr)
        args.workers = cpus


PRIVATE_INSTANCE = "local"  # --address local: a private Ray instance even when a local cluster is running


def choose_cluster(args: argparse.Namespace) -> str:
    """Where the run's units go, said for the user: sets ``args.address`` to the Ray cluster
    to join, or None for a private local instance (or ``--serial``).

    Without ``--address``, a run joins the cluster that ``privlab cluster up`` started from
    this folder when it is running (its state in ``.privlab/cluster``; its environment, the
    loopback switch and auth token, applied): connecting to a running cluster takes about a
    second, starting a private instance several (benchmarks/RESULTS.md). ``--address local``
    starts a private instance all the same."""
    if args.serial:
        args.address = None
        return "serial"
    if args.address == PRIVATE_INSTANCE:
        args.address = None
        return "local Ray"
    if args.address:
        _apply_local_cluster_env(args.address)
        return f"cluster {args.address}"
    from privlab.platform.execution import local_cluster

    try:
        info = local_cluster.local_cluster_status(state_dir=Path(DEFAULT_CLUSTER_STATE))
    except ExecutionError as error:  # a damaged state file: say so, and run on a private instance
        print(f"privlab: not joining the local cluster: {error}", file=sys.stderr)
        return "local Ray"
    if info is None:
        return "local Ray"
    os.environ.update(info.env)
    args.address = info.address
    return (f"the local cluster at {info.address} ({info.nodes} node(s), started by `privlab cluster up`; "
            f"--address {PRIVATE_INSTANCE} for a private instance)")


def _apply_local_cluster_env(address: str) -> None:
    """When ``address`` is the cluster `privlab cluster up` recorded here, use its environment
    (loopback resolution and its auth token) so the driver connects without pasted exports."""
    from privlab.platform.execution import local_cluster

    info = local_cluster.local_cluster_status(state_dir=Path(DEFAULT_CLUSTER_STATE))
    if info is not None and info.address == address:
        os.environ.update(info.env)


#: The most rows of a study that ``privlab run`` prints at its end; ``privlab compare`` lists all.
SUMMARY_ROWS = 50


def print_summary(summary: dict) -> None:
    from privlab.platform.results.tables import render_studies

    print(f"run {summary['run_id']} in experiment {summary['experiment']!r} "
          f"(seed {summary['root_seed']}, {summary['timing']['wall_seconds']:.1f} s, "
          f"{summary['timing']['workers']} worker(s) on {summary['timing']['ray_nodes']} node(s))")
    print(privacy_line(summary))
    # the same tables as `privlab compare`: configuration ids, varying parameters, mean [95% CI]
    print("\n" + render_studies(summary["configurations"], experiment=summary["experiment"], width=terminal_width(),
                                max_rows=SUMMARY_ROWS))
    tracking = summary.get("tracking", {})
    print(f"\nresults: tracking store {tracking.get('uri', '?')}\n"
          f"         artifacts of run {summary['run_id']}: {tracking.get('artifacts', '?')}")
    print(f"compare: privlab compare {summary['experiment']!r}    ledger: privlab ledger {summary['run_id']}")
    print_phases(summary["timing"].get("phases"))


#: Above this ε a ledger total is no guarantee anyone would publish under; the line says why it can be so.
LARGE_EPSILON = 100.0


def privacy_line(summary: dict) -> str:
    """The summary's privacy line: the largest ledger total of a configuration, and, when that is
    huge, what such a total means (PD adult printed `ε per configuration ≤ 1e+06` unexplained)."""
    epsilon = summary["epsilon_total"]
    line = (f"privacy: ε per configuration ≤ {epsilon:.6g}, δ ≤ {summary['delta_total']:.3g} (the largest "
            f"configuration ledger's total; `privlab ledger {summary['run_id']}` lists each one's steps)")
    if epsilon > LARGE_EPSILON:
        line += ("\n  an ε this large composes many releases in one configuration (plausible deniability's Theorem 1 "
                 "counts every candidate tested; each released record has its own per-candidate guarantee): it "
                 "bounds everything the configuration computed, not one release; the study's RESULTS.md says what "
                 "its ε covers")
    return line


def print_phases(phases: dict[str, float] | None) -> None:
    """Where the process's time went, from its start to now (stderr): the run's own wall is
    data → execution; before it Python's start, imports and the spec, after it the summary's
    logging and the backend's shutdown (MLflow's import and the store's opening overlap Ray's
    start-up, so ``store`` is not added to the total)."""
    if not phases:
        return
    from privlab.platform.run.runner import process_age

    shown = ", ".join(f"{name} {seconds:.2f}" for name, seconds in phases.items())
    print(f"privlab: seconds from the process's start: {shown}; {process_age():.2f} in all so far", file=sys.stderr)


def audit_command(args: argparse.Namespace) -> int:
    from privlab.platform.audit import registration as audit, audit_results, audit_run

    if args.list:
        print(audit_results.describe_auditables())
        return EXIT_OK
    from privlab.platform.run.runner import RunInterrupted  # Ray, matplotlib: not for --list

    if not args.name:
        raise InputError(f"give an auditable NAME or --list; auditables: {', '.join(audit.auditable_names())}")
    check_workers(args)
    request = audit_run.prepare_audit(args.name, settings=args.set or [], trials=args.trials,
                                  confidence=args.confidence, seed=args.seed, experiment=args.experiment)
    where = choose_cluster(args)
    cap_local_workers(args)
    options = run_options(args)
    print(f"privlab: audit {args.name}: {request.trials:,} trial(s), {where}", file=sys.stderr)
    try:
        result, summary = audit_run.run_audit(request, options)
    except RunInterrupted as stop:
        return say_stopped(args, stop)
    except TrackingOutage as outage:
        return say_outage(args, outage)
    if args.summary_json:
        write_json_atomically(args.summary_json, summary | {"audit": result.to_dict()})
    print(audit_results.render_result(result, summary))
    return EXIT_VIOLATION if result.violation else EXIT_OK
