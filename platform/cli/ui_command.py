"""``privlab ui``: MLflow's web UI on the store privlab's runs went to, opened on their runs view.

``mlflow ui`` as one would type it starts 4 uvicorn workers and MLflow's job runner: 10
processes and 2.07 GB of memory on a 2-core machine, listening wherever ``--host`` says, on the
store of whatever folder it was started from (creating an empty one there), and opening an
experiment that has no traces in its GenAI view. ``privlab ui`` starts the same server with
what browsing privlab's runs needs:

- loopback (``127.0.0.1``) unless ``--host`` says otherwise, on a free port unless ``--port``;
- the store the runs went to (``--tracking-uri``, ``MLFLOW_TRACKING_URI``, else ``./mlflow.db``),
  refused when it does not exist, like ``privlab compare``; a local store's artifacts (ledgers,
  plots) are served from their recorded folders;
- one worker and no job runner (``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``): 2 processes;
- MLflow's app with the machine-learning view as the browser's default
  (:mod:`~privlab.platform.cli.ui_app`): a run page opened from the runs view stays in it, not in
  GenAI's "Evaluation runs";
- it prints the runs-view address of the experiment (``--experiment``, else the one of the most
  recent privlab run), ``#/experiments/ID/runs?workflowType=machine_learning``, and ``--open``
  opens it in a browser;
- Ctrl-C (or SIGTERM) stops the server and everything it started.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from privlab.platform.cli.commands import EXIT_EXECUTION, EXIT_OK, add_tracking_argument
from privlab.platform.core.errors import InputError

LOOPBACK = "127.0.0.1"
APP_NAME = "privlab"  # MLflow's app, opening in the machine-learning view (platform/cli/ui_app.py)
STARTUP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0


def add_ui_command(sub: Any) -> argparse.ArgumentParser:
    """Add ``privlab ui`` to the ``privlab`` subparsers."""
    parser = sub.add_parser(
        "ui", help="browse the runs in MLflow's web UI (loopback, the runs' store, one worker)",
        description="Start MLflow's web UI on the tracking store privlab's runs went to and print the address "
                    "of an experiment's runs view (Ctrl-C stops it). It listens on 127.0.0.1 unless --host "
                    "says otherwise, runs one worker and no job runner.")
    parser.add_argument("--experiment", metavar="NAME",
                        help="the experiment to open (default: the one of the most recent privlab run)")
    parser.add_argument("--host", default=LOOPBACK,
                        help="the interface to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    parser.add_argument("--open", action="store_true", help="open the runs view in a web browser")
    add_tracking_argument(parser)
    parser.set_defaults(handler=run_ui)
    return parser


def runs_view_url(base: str, experiment_id: str) -> str:
    """The address of an experiment's runs view (its "Model training" view, whatever MLflow's UI
    would choose for an experiment without an ``mlflow.experimentKind`` tag)."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"


def server_command(uri: str, *, host: str, port: int, artifacts: str | None) -> list[str]:
    """The ``mlflow server`` command ``privlab ui`` runs (one worker; artifacts served)."""
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", host,
               "--port", str(port), "--workers", "1", "--app-name", APP_NAME]
    if artifacts is not None:  # where artifacts of experiments made in the UI go: beside the database
        command += ["--artifacts-destination", artifacts]
    return command


def server_environment() -> dict[str, str]:
    """The server's environment: this one, without MLflow's job runner (11 processes, ~1.6 GB)."""
    return {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def _check_arguments(args: argparse.Namespace) -> None:
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port ({args.port}) must be a port number in [0, 65535] (0: a free one)")


def run_ui(args: argparse.Namespace) -> int:
    """The ``privlab ui`` command."""
    from privlab.platform.tracking.store_checks import existing_store
    from privlab.platform.tracking.tracker import Tracker

    _check_arguments(args)
    uri = existing_store(args.tracking_uri)  # as `privlab run` checks it: exit 2 in our words, nothing created
    tracker = Tracker(uri)
    experiment_id, name = _experiment(tracker, args.experiment)
    if uri.startswith(("http://", "https://")):  # already served: point at it instead of serving it again
        url = runs_view_url(uri, experiment_id)
        print(url, flush=True)
        print(f"privlab ui: {uri} is a tracking server already; experiment {name!r} is at the address above",
              file=sys.stderr)
        _maybe_open(args, url)
        return EXIT_OK
    return _serve(args, uri, tracker, experiment_id, name)


def _experiment(tracker: Any, name: str | None) -> tuple[str, str]:
    """``(id, name)`` of experiment ``name``, else of the most recent privlab run's experiment."""
    if name:
        return tracker.require_experiment(name), name
    recent = tracker.latest_parent_run()
    if recent is not None:
        experiment_id = recent.info.experiment_id
        return experiment_id, tracker.client.get_experiment(experiment_id).name
    names = tracker.experiment_names()
    if not names:
        from privlab.platform.core.errors import NotFoundError

        raise NotFoundError(f"the tracking store {tracker.uri} holds no experiment yet; `privlab run SPEC` first")
    return tracker.experiment_id(names[0], create=False), names[0]


def _free_port(host: str) -> int:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _serve(args: argparse.Namespace, uri: str, tracker: Any, experiment_id: str, name: str) -> int:
    import subprocess
    import time

    from privlab.platform.tracking.store_location import sqlite_database

    port = args.port or _free_port(args.host)
    artifacts = str(sqlite_database(uri).resolve().parent / "mlruns") if uri.startswith("sqlite:///") else None
    shown_host = f"[{args.host}]" if ":" in args.host else args.host
    base = f"http://{LOOPBACK if args.host in ('0.0.0.0', '::') else shown_host}:{port}"
    if args.host not in (LOOPBACK, "localhost", "::1"):
        print(f"privlab ui: listening on {args.host}: anyone who can reach this machine can read and change the "
              "runs (MLflow's UI has no login)", file=sys.stderr)
    server = subprocess.Popen(server_command(uri, host=args.host, port=port, artifacts=artifacts),
                              env=server_environment(), start_new_session=True, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        began = time.monotonic()
        while not _answers(base):
            if server.poll() is not None:
                reason = (server.stderr.read() if server.stderr else "").strip().splitlines()[-3:]
                print(f"privlab ui: MLflow's server stopped at start (exit {server.returncode}): "
                      f"{' / '.join(reason) or 'no message'}", file=sys.stderr)
                return EXIT_EXECUTION
            if time.monotonic() - began > STARTUP_TIMEOUT_S:
                print(f"privlab ui: MLflow's server did not answer at {base} within {STARTUP_TIMEOUT_S:.0f} s",
                      file=sys.stderr)
                return EXIT_EXECUTION
            time.sleep(0.25)
        url = runs_view_url(base, experiment_id)
        print(url, flush=True)
        print(f"privlab ui: MLflow's UI on {uri}, experiment {name!r}; Ctrl-C stops it", file=sys.stderr, flush=True)
        _maybe_open(args, url)
        _drain(server)
        server.wait()
        print(f"privlab ui: MLflow's server stopped (exit {server.returncode})", file=sys.stderr)
        return EXIT_EXECUTION if server.returncode else EXIT_OK
    except KeyboardInterrupt:
        print("\nprivlab ui: stopped", file=sys.stderr)
        return EXIT_OK
    finally:
        _stop(server)


def _drain(server: Any) -> None:
    """Read the server's messages as they come (a full pipe would block it), keeping none."""
    if server.stderr is not None:
        for _ in server.stderr:
            pass


def _answers(base: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _stop(server: Any) -> None:
    """Stop the server's whole process group (it was started in a session of its own): SIGINT,
    as Ctrl-C in its terminal would, then SIGKILL for whatever is left after a grace period."""
    import signal
    import subprocess

    if server.poll() is None:
        _signal_group(server.pid, signal.SIGINT)
        try:
            server.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(server.pid, signal.SIGKILL)  # anything of the group still alive (uvicorn's workers)
    server.wait()


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _maybe_open(args: argparse.Namespace, url: str) -> None:
    if args.open:
        import webbrowser

        if not webbrowser.open(url):
            print("privlab ui: no web browser found here; open the address above", file=sys.stderr)
