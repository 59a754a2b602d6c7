"""The ``privlab`` command.

Exit codes: 0 success (also a run that ``--max-units`` stopped as asked: resumable); 1 internal
error (a bug: please report it with the traceback); 2 bad input (spec, schema, arguments, unknown
names); 3 privacy budget exceeded; 4 execution or tracking failure; 5 ``privlab verify``: not
verified; 6 ``privlab audit``: a violation of the claim was found; 130 interrupted by Ctrl-C or
SIGTERM (the run is resumable with ``--resume``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privlab.platform.core.errors import (
    BudgetExceededError,
    ExecutionError,
    InputError,
    PrivlabError,
    TrackingError,
    VerificationError,
)

from privlab.platform.cli.commands import (
    COMMANDS,
    EXIT_BUG,
    EXIT_BUDGET,
    EXIT_CODES_HELP,
    EXIT_EXECUTION,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_NOT_VERIFIED,
    EXIT_OK,
    add_run_reading_command,
    add_tracking_argument,
    finished_summary,
    for_people,
    toml_kind,
)
from privlab.platform.cli.run_commands import DEFAULT_CLUSTER_STATE, audit_command, run_command
from privlab.platform.cli.terminal import terminal_width
from privlab.platform.cli.ui_command import add_ui_command
from privlab.platform.execution.interrupts import ignore_further_interrupts, owned_interrupts, sigterm_as_interrupt



def _report(args: argparse.Namespace) -> int:
    from privlab.platform.tracking.configuration_index import IndexRow, read_index
    from privlab.platform.run.configuration_log import logged_timing, reservoirs_of
    from privlab.platform.results.reports import build_reports, write_report_dir
    from privlab.platform.run.run_summary import with_logged_timing
    from privlab.platform.tracking.sqlite_reader import open_store
    from privlab.platform.tracking.run_tags import RunTags

    tracker = open_store(args.tracking_uri)  # only reads: never creates a store
    run, summary = finished_summary(tracker, args.run_id, hint="give the id `privlab run` printed")
    indexed = read_index(tracker, args.run_id)  # a finished run's index names its configuration runs
    if indexed is None:  # newest first, as a resume reads them back
        indexed = [IndexRow.of_run(c, None) for c in tracker.configuration_runs(run.info.experiment_id, args.run_id)]
    children: dict[str, IndexRow] = {}
    timings: dict[str, dict[str, float]] = {}
    for row in indexed:
        children.setdefault(row.config_id, row)
        timings.setdefault(row.config_id, logged_timing(row.metrics))
    summary = with_logged_timing(summary, timings)  # an older resumed run timed only its last session
    reservoirs: dict[str, Any] | None = None

    def reservoir_of(config_id: str) -> object:
        nonlocal reservoirs
        if reservoirs is None:  # read once, when a report asks for one
            reservoirs = reservoirs_of(tracker, args.run_id, children)
        return reservoirs.get(config_id)

    files = build_reports(summary, reservoir_of, command=RunTags.of(run).command or None)
    if not files:
        print("the run's workloads draw no reports")
        return EXIT_OK
    written = write_report_dir(files, Path(args.out))
    for path in written:
        print(path)
    print(f"privlab: {len(written)} report file(s) of run {args.run_id} written to {args.out}", file=sys.stderr)
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    from privlab.platform.experiment.spec import load_spec

    kind = toml_kind(Path(args.spec))
    if kind is not None:
        if kind.validate is not None:
            if args.set:
                raise InputError(f"--set applies to experiment specs; edit the {kind.kind} instead")
            return kind.validate(Path(args.spec))
        raise InputError(f"{args.spec} is a {kind.kind}, not an experiment or release spec; it is read by "
                          f"{kind.command}")
    spec = load_spec(args.spec, args.set or [])
    configs = spec.configurations
    print(f"{spec.name}: valid; {len(configs)} configuration(s), {sum(c.units for c in configs):,} unit(s) of work")
    rows = [("config", "workload", "units", "grid point"), *(
        (c.id, c.workload, f"{c.units:,}", ", ".join(f"{k}={v}" for k, v in c.grid_point.items()) or "-")
        for c in configs)]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for config_id, workload, units, point in rows:  # aligned: units to the right, as numbers are
        print(f"  {config_id.ljust(widths[0])}  {workload.ljust(widths[1])}  {units.rjust(widths[2])}  {point}")
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from privlab.platform.results.compare import comparison_frame, comparison_plot, render_table, to_csv
    from privlab.platform.tracking.sqlite_reader import open_store

    tracker = open_store(args.tracking_uri)  # a local store without importing MLflow
    frame = comparison_frame(tracker, args.experiment, run_id=args.run, all_runs=args.all_runs,
                             metrics=args.metric or (), studies=args.study or ())
    _say_which_runs(args, frame.attrs.get("runs") or [])
    without = frame.attrs.get("studies_without_metric") or []
    if without:
        having = ", ".join(dict.fromkeys(frame["study"]))
        print(f"privlab: {', '.join(args.metric)}: recorded by {having}; not by {', '.join(without)}",
              file=sys.stderr)
    if args.format == "csv":
        if args.output:
            Path(args.output).write_text(to_csv(frame))
        else:
            sys.stdout.write(to_csv(frame))
    elif args.format == "parquet":
        if not args.output:
            raise InputError("--format parquet needs --output PATH (parquet is binary)")
        frame.to_parquet(args.output, index=False)
    else:
        text = render_table(frame, experiment=args.experiment,
                            width=None if args.output else terminal_width())
        if args.output:
            Path(args.output).write_text(text + "\n")
        else:
            print(text)
    if args.plot:
        Path(args.plot).write_bytes(comparison_plot(frame, args.metric[0] if args.metric else None))
        print(f"plot written to {args.plot}", file=sys.stderr)
    return EXIT_OK


def _say_which_runs(args: argparse.Namespace, runs: list[tuple[str, int]]) -> None:
    """Name the run(s) a comparison shows (on stderr: the tables stay clean for scripts)."""
    import datetime as dt

    def when(millis: int) -> str:
        return dt.datetime.fromtimestamp(millis / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    if args.all_runs:
        print(f"privlab: every run of {args.experiment!r}, newest first: {len(runs)} run(s)", file=sys.stderr)
    elif runs:
        run_id, started = runs[0]
        which = "the run asked for" if args.run else \
            "its latest; --run ID for another (`privlab runs` lists them), --all-runs for every one"
        print(f"privlab: run {run_id} of {args.experiment!r}, started {when(started)} ({which})", file=sys.stderr)


def _spec_order(tracker: Any, parent_id: str) -> dict[str, int]:
    """Each configuration id's position in its run's spec (the run's index, finished or not: the
    study order of its logged spec), for listing configurations as the run did."""
    import tomllib

    from privlab.platform.tracking.configuration_index import read_index

    indexed = read_index(tracker, parent_id) if parent_id else None
    if indexed is not None:
        return {row.config_id: i for i, row in enumerate(indexed)}
    text = tracker.read_text(parent_id, "spec.toml") if parent_id else None
    try:
        document = tomllib.loads(text) if text else {}
    except tomllib.TOMLDecodeError:
        return {}
    studies = document.get("study") if isinstance(document.get("study"), list) else [document]
    return {str(study.get("name")): i for i, study in enumerate(studies) if isinstance(study, dict)}


def _ledger(args: argparse.Namespace) -> int:
    from privlab.platform.dp.ledger import Ledger
    from privlab.platform.tracking.result_parts import read_results
    from privlab.platform.tracking.sqlite_reader import open_store
    from privlab.platform.tracking.run_tags import PARENT_TAG, RunTags

    tracker = open_store(args.tracking_uri)
    run = tracker.get_run(args.run_id)
    kind = RunTags.of(run).kind
    if kind == "parent":
        children = tracker.configuration_runs(run.info.experiment_id, args.run_id, finished=False)
        order = _spec_order(tracker, args.run_id)  # the spec's order, as run and compare list them

        def position(child: Any) -> tuple[int, str]:
            tags = RunTags.of(child)
            config_id = tags.config_id or ""
            at = order.get(config_id, order.get(tags.study or "", len(order)))
            return at, config_id

        children.sort(key=position)
    elif kind == "configuration":
        children = [run]
    else:
        raise TrackingError(f"run {args.run_id} was not made by privlab; give a run id that `privlab runs` lists")
    parent_id = args.run_id if kind == "parent" else run.data.tags.get(PARENT_TAG, "")
    stored = read_results(tracker, parent_id) if parent_id else {}
    ledgers: dict[str, Ledger] = {}
    for child in children:
        row = stored.get(child.info.run_id)  # the ledger in its result part, else (older runs) its ledger.json
        text = json.dumps(row.entry["ledger"]) if row is not None else tracker.read_text(child.info.run_id, "ledger.json")
        if text is None:
            raise TrackingError(f"run {child.info.run_id} has no ledger: neither in its parent run's result parts nor "
                                "as ledger.json")
        config_id = RunTags.of(child).config_id
        ledgers[child.info.run_id if config_id is None else config_id] = Ledger.from_json(text)
    if args.json:
        print(json.dumps({cid: json.loads(ledger.to_json()) for cid, ledger in ledgers.items()}, indent=2))
        return EXIT_OK
    if not ledgers:
        print("no finished configurations yet")
    for cid, ledger in ledgers.items():
        print(f"== {cid} ==")
        print(ledger.render_table())
        print()
    return EXIT_OK


def _runs(args: argparse.Namespace) -> int:
    from privlab.platform.tracking.runs import list_runs, render_runs
    from privlab.platform.tracking.store_location import existing_store_uri
    from privlab.platform.tracking.tracker import Tracker

    print(render_runs(list_runs(Tracker(existing_store_uri(args.tracking_uri)), args.experiment)))
    return EXIT_OK


def _workloads(args: argparse.Namespace) -> int:
    from privlab.platform.experiment import registry

    shown = [registry.get_workload(name) for name in registry.workload_names()]
    hidden = [w.name for w in shown if w.hidden]
    if not args.all:
        shown = [w for w in shown if not w.hidden]
    print("\n\n".join(_describe_workload(w) for w in shown))
    if hidden and not args.all:
        print(f"\n({len(hidden)} test-only workload(s) not shown: {', '.join(hidden)}; `privlab workloads --all`)")
    return EXIT_OK


def _describe_workload(workload: Any) -> str:
    """A workload for people: name, pattern, its whole description, metrics and parameters."""
    import inspect
    import textwrap

    from privlab.platform.core.plugins import describe_params

    lines = [f"{workload.name}  ({workload.pattern.value} pattern{', test-only' if workload.hidden else ''})"]
    doc = for_people(inspect.cleandoc(type(workload).__doc__ or ""))
    lines += [textwrap.indent(doc, "    ")] if doc else []
    metrics = [f"{name} ({kind.value})" for name, kind in workload.metrics.items()]
    metrics += [f"{name} (derived)" for name in workload.derived_metrics]
    lines.append("    metrics: " + (", ".join(metrics) or "decided by the parameters (every one is logged)"))
    lines.append("    parameters: " + (", ".join(describe_params(workload.Params)) or "none"))
    return "\n".join(lines)


def _cluster(args: argparse.Namespace) -> int:
    from privlab.platform.execution import local_cluster

    state_dir = Path(args.state_dir)
    if args.cluster_command == "up":
        info = local_cluster.start_local_cluster(nodes=args.nodes, cpus_per_node=args.cpus_per_node, state_dir=state_dir)
        print(f"started a {info.nodes}-node Ray cluster on loopback at {info.address}")
        for key, value in info.env.items():
            print(f"export {key}={shlex.quote(value)}")
        here = "" if state_dir == Path(DEFAULT_CLUSTER_STATE) else f" --address {info.address}"
        print(f"run on it:  privlab run SPEC{here}   (from this folder; elsewhere: --address {info.address})\n"
              "stop it:    privlab cluster down")
    elif args.cluster_command == "down":
        stopped = local_cluster.stop_local_cluster(state_dir=state_dir)
        print(f"stopped {stopped} process(es)")
    else:
        status = local_cluster.local_cluster_status(state_dir=state_dir)
        if status is None:  # an answer, not a failure: nothing is running
            print(f"no local cluster is running (none recorded in {state_dir}, or its nodes have stopped); "
                  "start one with `privlab cluster up`")
            return EXIT_OK
        print(f"{status.nodes} node(s) at {status.address}; pids {', '.join(map(str, status.pids))}")
    return EXIT_OK


def _add_execution_options(command: argparse.ArgumentParser) -> None:
    """Where and how a command that runs units of work (``run``, ``audit``) runs them."""
    command.add_argument("--workers", type=int, help="worker processes (local: CPUs to use, at most this machine's "
                         "unless --oversubscribe; cluster: concurrency cap, at most its CPUs)")
    command.add_argument("--oversubscribe", action="store_true",
                         help="let --workers exceed this machine's CPUs (each worker process takes about 175 MB "
                              "of memory and competes for the same CPUs)")
    command.add_argument("--address", help="join an existing Ray cluster (default: the one `privlab cluster up` "
                         "started here if it runs, else a private local instance; 'local': a private instance)")
    command.add_argument("--serial", action="store_true", help="run in this process without Ray (reference/debugging)")
    command.add_argument("--max-units", type=int, metavar="N", help="stop cleanly (resumable) after N units of work")
    command.add_argument("--no-progress", action="store_true", help="do not show the progress bar")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="privlab",
        description="Differentially private synthetic-data research on Ray, tracked in MLflow: run "
                    "experiment specs, compare their results, and audit mechanisms' DP claims.",
        epilog=EXIT_CODES_HELP,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    tracking = add_tracking_argument

    run = sub.add_parser("run", help="run an experiment spec", description="Run every configuration of a spec.")
    run.add_argument("spec", help="path to an experiment TOML file")
    run.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="override a spec value (TOML syntax; repeatable), e.g. --set trials=1000000")
    _add_execution_options(run)
    run.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run without recomputing finished work")
    run.add_argument("--summary-json", metavar="PATH", help="write the run summary as JSON")
    run.add_argument("--report-dir", metavar="DIR",
                     help="also write the studies' results pages (markdown tables, PNG figures) to DIR")
    tracking(run)
    run.set_defaults(handler=run_command)

    validate = sub.add_parser("validate", help="check a spec and list its configurations without running")
    validate.add_argument("spec", help="path to an experiment TOML file")
    validate.add_argument("--set", action="append", metavar="KEY=VALUE",
                          help="override a spec value (TOML syntax; repeatable), as for `privlab run`")
    validate.set_defaults(handler=_validate)

    compare = sub.add_parser("compare", help="compare an experiment's configurations from MLflow")
    compare.add_argument("experiment", help="MLflow experiment name (the spec's [tracking] experiment)")
    compare.add_argument("--metric", action="append", metavar="M",
                         help="show only this metric, and only the studies that record it (repeatable)")
    compare.add_argument("--study", action="append", metavar="NAME",
                         help="show only this study (repeatable); with --format csv: one plain CSV table")
    compare.add_argument("--format", choices=("table", "csv", "parquet"), default="table",
                         help="table: aligned text for people (default); csv: one table per study (each after a "
                              "'# study: NAME' line); parquet: every study in one file")
    compare.add_argument("--output", metavar="PATH", help="write to a file instead of stdout")
    compare.add_argument("--plot", metavar="PATH",
                         help="also write a PNG of the first --metric: one panel per study that records it")
    compare.add_argument("--run", metavar="RUN_ID", help="a specific parent run (default: the latest)")
    compare.add_argument("--all-runs", action="store_true", help="include every parent run of the experiment")
    tracking(compare)
    compare.set_defaults(handler=_compare)

    ledger = sub.add_parser("ledger", help="show the ε ledger of a run (parent or configuration)")
    ledger.add_argument("run_id", help="a run id: the parent run `privlab run` printed, or one configuration's run")
    ledger.add_argument("--json", action="store_true", help="print the ledgers as JSON")
    tracking(ledger)
    ledger.set_defaults(handler=_ledger)

    runs = sub.add_parser("runs",
                          help="list the runs in the tracking store: the ids ledger, report and compare --run take",
                          description="One line per `privlab run` (newest first): run id, experiment, spec, start "
                                      "time, status and number of configurations.")
    runs.add_argument("experiment", nargs="?", help="only this MLflow experiment (default: every experiment)")
    tracking(runs)
    runs.set_defaults(handler=_runs)

    add_run_reading_command(
        sub, "report", handler=_report, run_id_help="the parent run id `privlab run` printed",
        out_metavar="DIR", out_help="folder to write (replaced as a whole)",
        help="redraw a finished run's results pages (tables and figures)",
        description="Rebuild the studies' results pages of a finished run from what it logged in MLflow "
                    "(nothing is recomputed) and write them to --out.")

    workloads = sub.add_parser("workloads", help="list registered workloads: descriptions, metrics, parameters")
    workloads.add_argument("--all", action="store_true",
                           help="also list the test-only workloads (cpu_burn, crash_once)")
    workloads.set_defaults(handler=_workloads)

    audit = sub.add_parser(
        "audit", help="audit a mechanism's claimed sensitivity or ε on neighbouring datasets",
        description="Run a registered auditable on neighbouring datasets D, D' many times (batched on Ray,\n"
                    "logged to MLflow) and compare its claim with what was observed:\n"
                    "  sensitivity audit: the largest |f(D) - f(D')| and the rate of pairs above the claimed\n"
                    "    sensitivity, with a Clopper-Pearson interval;\n"
                    "  ε audit: a lower confidence bound on ε from events fixed in advance (Clopper-Pearson,\n"
                    "    Bonferroni over the events); a bound above the claimed ε is a violation.",
        epilog="examples:\n  privlab audit --list\n  privlab audit laplace --set epsilon=1 --seed 7\n"
               "  privlab audit pmse --set n=1000 --set depth=unlimited --trials 2000 --workers 2\n\n"
               "exit codes: 0 no violation detected, 6 a violation found (the verdict says which), 2 bad input,\n"
               "4 execution/tracking failure, 130 interrupted (resumable)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    audit.add_argument("name", nargs="?", metavar="NAME", help="the auditable (see --list)")
    audit.add_argument("--list", action="store_true", help="list the auditables: kind, claim, parameters, defaults")
    audit.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="an auditable parameter (TOML syntax; repeatable), e.g. --set epsilon=0.5; "
                            "also execution.* and tracking.* spec settings")
    audit.add_argument("--trials", type=int, metavar="N",
                       help="neighbouring pairs (sensitivity) or runs per dataset (ε); default per auditable")
    audit.add_argument("--confidence", type=float, default=0.95, metavar="C",
                       help="confidence level of the reported interval or bound (default 0.95)")
    audit.add_argument("--seed", type=int, metavar="S", help="root seed (default: fresh OS entropy, logged)")
    audit.add_argument("--experiment", metavar="NAME", help="MLflow experiment (default audit-NAME)")
    _add_execution_options(audit)
    audit.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted audit (same arguments)")
    audit.add_argument("--summary-json", metavar="PATH", help="write the run summary and the audit's findings as JSON")
    tracking(audit)
    audit.set_defaults(handler=audit_command)

    cluster = sub.add_parser("cluster", help="start/stop a multi-node Ray cluster on this machine (loopback)")
    cluster_sub = cluster.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    up = cluster_sub.add_parser("up", help="start a head and worker nodes bound to 127.0.0.1")
    up.add_argument("--nodes", type=int, default=3, help="Ray nodes to start, the head included (default 3)")
    up.add_argument("--cpus-per-node", type=int, default=1, help="CPUs each node offers to Ray (default 1)")
    for p in (up, cluster_sub.add_parser("down", help="stop the cluster started by `up`"),
              cluster_sub.add_parser("status", help="show the recorded cluster")):
        p.add_argument("--state-dir", default=DEFAULT_CLUSTER_STATE, help="where the cluster's state is kept")
    cluster.set_defaults(handler=_cluster)

    add_ui_command(sub)  # privlab ui: platform/cli/ui_command.py

    for _, add_commands in COMMANDS.items():  # subcommands that mechanisms bring (privlab.commands)
        add_commands(sub)
    return parser


def quiet_third_party_logs(*, verbose: bool) -> None:
    """MLflow's table-creation INFO lines, the "View run … at" line it prints per run on a tracking
    server, and Ray's token-auth notice are noise on a normal run (privlab's own private Ray
    instance always uses token auth; the run's summary says where its results went);
    ``--verbose`` keeps them."""
    if verbose:
        return
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # read when mlflow is imported
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)


def entry() -> int:
    """The ``privlab`` command: :func:`main` in a process of its own, which ends as soon as the
    command has (:func:`exit_now`)."""
    exit_now(main(standalone=True))
    return EXIT_BUG  # not reached


def exit_now(code: int) -> None:
    """End the process with ``code`` once its output and logs are flushed, without the
    interpreter's teardown: tearing down the modules of Ray, MLflow, pandas and the rest took
    ~1–5 s after every command (measured at load 1–18), and nothing of privlab's needs it (Ray is
    shut down, the tracking store closed, files written and closed by the command itself)."""
    import logging as logs

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said there
            pass
    logs.shutdown()
    os._exit(code)


def main(argv: Sequence[str] | None = None, *, standalone: bool = False) -> int:
    """Run one privlab command; returns its exit code.

    ``standalone`` (the ``privlab`` command itself): once an interrupted command has said what
    happened, further Ctrl-Cs are ignored until the process exits, so the exit code stays 130
    (a press landing after the run stopped would otherwise end Python with a second
    KeyboardInterrupt). In-process callers (tests) keep their own SIGINT handling.
    """
    with owned_interrupts(standalone):
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    quiet_third_party_logs(verbose=args.verbose)
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    try:
        with sigterm_as_interrupt():  # a scheduler's or kill's stop: the same clean stop as Ctrl-C
            return args.handler(args)
    except KeyboardInterrupt as interruption:
        ignore_further_interrupts()
        said = str(interruption)  # a command's account of what it left (the release's transcript), if any
        print(f"\nprivlab: interrupted{': ' + said if said else ''}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        sys.stderr.close()
        return EXIT_OK
    except BudgetExceededError as error:
        print(f"privlab: privacy budget exceeded: {error}", file=sys.stderr)
        return EXIT_BUDGET
    except VerificationError as error:
        print(f"privlab: NOT VERIFIED: {error}", file=sys.stderr)
        return EXIT_NOT_VERIFIED
    except (ExecutionError, TrackingError) as error:
        print(f"privlab: {error}", file=sys.stderr)
        return EXIT_EXECUTION
    except PrivlabError as error:
        print(f"privlab: {error}", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(entry())
