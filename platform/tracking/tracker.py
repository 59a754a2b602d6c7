"""MLflow tracking from the driver only, with explicit run ids and batched calls.

Workers never touch the tracking store: results flow to the driver, which logs one parent run
per ``privlab run`` and one child run per configuration (one ``log_batch`` each). Measured
here: concurrent first-time initialisation of a sqlite store fails with migration errors, and
a run plus one batch costs ≈18 ms on sqlite vs ≈76 ms over HTTP, so batching matters.

Every ``privlab.*`` tag (named in :mod:`privlab.platform.tracking.run_tags`) is written here
only: other modules call :class:`Tracker`'s methods for privlab's runs (``start_parent_run``,
``mark_complete``, ``log_result_run``…) and read tags through ``RunTags``. Calls that must not
hold up the driver go through :class:`privlab.platform.tracking.background_writer.BackgroundWriter`.

Without a URI, MLflow's default embedded store is used (``sqlite:///mlflow.db`` in the
working directory for MLflow 3); ``--tracking-uri`` or ``MLFLOW_TRACKING_URI`` selects a server.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from privlab.platform.core.errors import NotFoundError, TrackingError
from privlab.platform.tracking.moved_store import Rebased, rebase_moved_store
from privlab.platform.tracking.run_datasets import DatasetDescription
from privlab.platform.tracking.run_tags import (
    BACKEND_TAG,
    COMMAND_TAG,
    CONFIG_TAG,
    DRIVER_TAG,
    DEFAULT_COLUMNS_TAG,
    EXPERIMENT_KIND,
    EXPERIMENT_KIND_TAG,
    GIT_COMMIT_TAG,
    GROUP_TAG,
    KIND_TAG,
    LEDGER_TAG,
    MODE_TAG,
    PARENT_TAG,
    RAY_NODES_TAG,
    RESUMABLE_TAG,
    ROOT_SEED_TAG,
    SPEC_NAME_TAG,
    SPEC_SHA256_TAG,
    STATUS_TAG,
    STUDY_TAG,
    UNIT_TAG,
    VERSION_TAG,
    WORKERS_TAG,
    WORKLOAD_TAG,
    driver_tags,
    heartbeat_tag,
)
from privlab.platform.tracking.sqlite_runs import FinishedRun, SqliteRunWriter, time_ordered_run_id, write_files
from privlab.platform.tracking.store_location import artifact_location, make_artifact_root_private, resolve_tracking_uri, sqlite_database, store_lock
from privlab.platform.tracking.tracking_outage import bound_http_retries

log = logging.getLogger(__name__)

MAX_PARAM_LENGTH = 6000


def _forget_artifact_locations() -> None:
    """Drop MLflow's in-process cache of each run's artifact location (keyed by run id), which
    would keep a moved store's old paths for runs this process used before."""
    from mlflow.tracking._tracking_service import utils

    cache = getattr(utils, "_artifact_repos_cache", None)
    if cache is not None:
        cache.clear()


def _timed(method: Any) -> Any:
    """Accumulate the wall time of a tracking call in ``self.seconds`` (benchmarked share)."""

    def wrapper(self: Tracker, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - began

    wrapper.__doc__ = method.__doc__
    wrapper.__name__ = method.__name__
    return wrapper


class Tracker:
    """A thin, batched wrapper around :class:`mlflow.MlflowClient`."""

    def __init__(self, uri: str | None, *, bulk: bool = True) -> None:
        from mlflow import MlflowClient

        self.seconds = 0.0
        self.bulk = bulk  # finished child runs into a local sqlite store many per transaction
        self._writers: dict[str, SqliteRunWriter | None] = {}
        self.uri = resolve_tracking_uri(uri)
        bound_http_retries(self.uri)
        moved: list[Rebased] = []
        try:
            with store_lock(self.uri):
                self.client = MlflowClient(tracking_uri=self.uri)
                if self.uri.startswith("sqlite:///"):
                    self.client.search_experiments(max_results=1)  # creates/migrates the tables now, under the lock
                    moved = rebase_moved_store(sqlite_database(self.uri))
        except Exception as error:
            raise TrackingError(f"cannot open the MLflow tracking store {self.uri!r}: {error}") from None
        if moved:
            _forget_artifact_locations()
        for rebased in moved:
            log.warning("the tracking store was moved from %s to %s (with its database): %d experiment(s) and "
                        "%d run(s) now read and write their artifacts there", Path(rebased.old_root).parent,
                        Path(rebased.new_root).parent, rebased.experiments, rebased.runs)

    # -- experiments and runs -------------------------------------------------------------
    @_timed
    def experiment_id(self, name: str, *, create: bool) -> str:
        if create:  # a command that writes: its artifacts go under a private root
            make_artifact_root_private(self.uri)
        try:
            experiment = self.client.get_experiment_by_name(name)
        except Exception as error:
            raise TrackingError(
                f"cannot reach the MLflow tracking store {self.uri!r}: {error}; check "
                "--tracking-uri / MLFLOW_TRACKING_URI"
            ) from None
        if experiment is not None:
            if experiment.lifecycle_stage == "deleted":
                raise TrackingError(f"experiment {name!r} is deleted in {self.uri}; restore it or use another name")
            if create and EXPERIMENT_KIND_TAG not in experiment.tags:  # made before privlab set it
                self.client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
            return experiment.experiment_id
        if not create:
            raise TrackingError(f"no experiment named {name!r} in {self.uri}; `privlab run` a spec first")
        with store_lock(self.uri):  # another command may be creating the same experiment right now
            experiment = self.client.get_experiment_by_name(name)
            if experiment is not None:
                return experiment.experiment_id
            return self.client.create_experiment(name, artifact_location=artifact_location(self.uri, name),
                                                 tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})

    def experiment_names(self) -> list[str]:
        """The names of the store's active experiments, MLflow's empty ``Default`` left out."""
        try:
            experiments = self.client.search_experiments()
        except Exception as error:
            raise TrackingError(f"cannot reach the MLflow tracking store {self.uri!r}: {error}") from None
        return sorted(e.name for e in experiments if e.name != "Default")

    def require_experiment(self, name: str) -> str:
        """The id of experiment ``name``.

        Raises:
            NotFoundError: no such experiment; the message lists the ones that exist.
        """
        names = self.experiment_names()
        if name not in names:
            known = ", ".join(map(repr, names)) or "none yet (`privlab run SPEC` makes one)"
            raise NotFoundError(f"no experiment named {name!r} in {self.uri}; experiments there: {known}")
        return self.experiment_id(name, create=False)

    def _log_batch(
        self,
        run_id: str,
        *,
        params: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        self.client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()],
            params=[Param(k, _param_text(v)) for k, v in (params or {}).items()],
            tags=[RunTag(k, str(v)) for k, v in (tags or {}).items()],
        )

    @_timed
    def log_texts(self, run_id: str, files: Mapping[str, str | bytes]) -> None:
        """Write several artifacts in one upload (one directory, one ``log_artifacts`` call)."""
        self._log_texts(run_id, files)

    def _log_texts(self, run_id: str, files: Mapping[str, str | bytes]) -> None:
        if not files:
            return
        with tempfile.TemporaryDirectory(prefix="privlab-artifacts-") as tmp:
            for relative, content in files.items():
                target = Path(tmp) / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, bytes):
                    target.write_bytes(content)
                else:
                    target.write_text(content)
            self.client.log_artifacts(run_id, tmp)

    # -- privlab's runs: the only place that writes a privlab.* tag ---------------------------
    @_timed
    def start_parent_run(
        self,
        experiment_id: str,
        *,
        name: str,
        params: Mapping[str, Any],
        description: str,
        root_seed: int,
        mode: str,
        spec_name: str,
        spec_sha256: str,
        command: str,
        version: str,
        git_commit: str,
        driver: Mapping[str, Any],
        standard_tags: Mapping[str, str] | None = None,
        datasets: Iterable[DatasetDescription] = (),
    ) -> str:
        """The parent run of a ``privlab run``, marked running and driven by ``driver``, with
        MLflow's ``standard_tags`` (:func:`source_tags`) and the ``datasets`` the run read."""
        tags = {
            **(standard_tags or {}),
            KIND_TAG: "parent",
            VERSION_TAG: version,
            GIT_COMMIT_TAG: git_commit,
            ROOT_SEED_TAG: str(root_seed),
            MODE_TAG: mode,
            SPEC_NAME_TAG: spec_name,
            SPEC_SHA256_TAG: spec_sha256,
            COMMAND_TAG: command,
            STATUS_TAG: "running",
            "mlflow.note.content": description,
            **driver_tags(driver),
        }
        run = self.client.create_run(experiment_id, run_name=name, tags=tags)
        self._log_batch(run.info.run_id, params=params)
        self._log_datasets(run.info.run_id, datasets)
        return run.info.run_id

    def _log_datasets(self, run_id: str, datasets: Iterable[DatasetDescription]) -> None:
        """Log ``datasets`` as the run's MLflow dataset inputs (one call; the Dataset column)."""
        from mlflow.entities import Dataset, DatasetInput

        inputs = [DatasetInput(Dataset(name=d.name, digest=d.digest, source_type=d.source_type, source=d.source,
                                       schema=d.schema, profile=d.profile)) for d in datasets]
        if inputs:
            self.client.log_inputs(run_id, datasets=inputs)

    @_timed
    def claim_parent_run(self, run_id: str, driver: Mapping[str, Any]) -> None:
        """Record ``driver`` as the driver of a run being resumed, and mark it running again."""
        self._log_batch(run_id, tags={**driver_tags(driver), STATUS_TAG: "running"})
        self.client.update_run(run_id, status="RUNNING")

    @_timed
    def record_driver(self, run_id: str, driver: Mapping[str, Any]) -> None:
        """Record ``driver`` as the run's driver (its lease), with a fresh heartbeat."""
        self._log_batch(run_id, tags=driver_tags(driver))

    def lease(self, run_id: str) -> str | None:
        """The lease id of the driver the run records (None when no driver is recorded)."""
        recorded = self.get_run(run_id).data.tags.get(DRIVER_TAG, "")
        return json.loads(recorded or "{}").get("lease")

    @_timed
    def record_backend(self, run_id: str, *, workers: int, nodes: int, backend: str) -> None:
        self._log_batch(run_id, tags={WORKERS_TAG: str(workers), RAY_NODES_TAG: str(nodes), BACKEND_TAG: backend})

    @_timed
    def heartbeat(self, run_id: str) -> None:
        self._log_batch(run_id, tags=heartbeat_tag())

    @_timed
    def mark_interrupted(self, run_id: str) -> None:
        """The run stopped before finishing; a resume can go on from its checkpoint."""
        self._log_batch(run_id, tags={STATUS_TAG: "interrupted", RESUMABLE_TAG: "true"})

    @_timed
    def mark_complete(self, run_id: str, metrics: Mapping[str, float]) -> None:
        """Log the run's final ``metrics`` and mark it complete (not resumable), in one batch."""
        self._log_batch(run_id, metrics=metrics, tags={STATUS_TAG: "complete", RESUMABLE_TAG: "false"})

    @_timed
    def close_parent_run(self, run_id: str, status: str) -> None:
        """Release the driver's lease (its tag is deleted: no driver) and end the run with MLflow
        ``status``."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.delete_tag(run_id, DRIVER_TAG)
        except MlflowException as error:
            if error.error_code != "RESOURCE_DOES_NOT_EXIST":  # released already (a retried close)
                raise
        self.client.set_terminated(run_id, status=status)

    def result_upload(
        self,
        experiment_id: str,
        *,
        parent_id: str,
        name: str,
        params: Mapping[str, Any],
        metrics: Mapping[str, float],
        files: Mapping[str, str | bytes],
        config_id: str,
        group: str,
        study: str,
        workload: str,
        unit: int | None = None,
        standard_tags: Mapping[str, str] | None = None,
        datasets: Iterable[DatasetDescription] = (),
        result: str = "",
        timing: Mapping[str, float] | None = None,
        reservoir: Mapping[str, Iterable[float]] | None = None,
        ledger_text: str | None = None,
        units: Mapping[str, Any] | None = None,
        start_millis: int | None = None,
        end_millis: int | None = None,
    ) -> ResultRunUpload:
        """A finished child run, ready for :meth:`send`: the result of a configuration (or of
        one facet of it, in ``group``), or with ``unit`` of one unit of a ``unit_runs`` workload;
        with its parent's ``standard_tags``, the ``datasets`` it read and, for a configuration,
        its summary entry ``result`` (JSON), ``timing``, ``reservoir`` sample and per-unit table
        ``units`` (:func:`~privlab.platform.tracking.unit_table.unit_columns`), which go into a
        part on the parent run; ``ledger_text`` (the ledger as a table) is its ``privlab.ledger``
        tag, which MLflow's UI shows with the run. The root seed and mode are the parent's tags."""
        tags = {**(standard_tags or {}), KIND_TAG: "configuration" if unit is None else "unit", CONFIG_TAG: config_id,
                STUDY_TAG: study, WORKLOAD_TAG: workload, PARENT_TAG: parent_id}
        if group != config_id:  # a facet: the executed configuration it belongs to
            tags[GROUP_TAG] = group
        if ledger_text is not None:
            tags[LEDGER_TAG] = ledger_text
        if unit is not None:
            tags[UNIT_TAG] = str(unit)
        return ResultRunUpload(experiment_id=experiment_id, name=name, tags=tags, params=dict(params),
                               metrics=dict(metrics), files=dict(files),
                               datasets=[d.to_record() for d in datasets], result=result,
                               timing=None if timing is None else {k: float(v) for k, v in timing.items()},
                               reservoir=None if reservoir is None else
                               {name: [float(v) for v in values] for name, values in reservoir.items()},
                               units=None if units is None else dict(units),
                               start_millis=start_millis, end_millis=end_millis)

    @_timed
    def send(self, upload: ResultRunUpload) -> str:
        """:meth:`send_results` of one upload; returns its run id."""
        return self._send_results([upload])[0]

    @_timed
    def send_results(self, uploads: Sequence[ResultRunUpload]) -> list[str]:
        """Log ``uploads`` (child runs of one parent run, in one experiment), going on from the
        step a failed earlier attempt reached; returns their run ids.

        Their results (summary entries and reservoir samples) go first, as one part on the parent
        run (:mod:`~privlab.platform.tracking.result_parts`), then the runs: into a local sqlite store all
        of them in one transaction (:mod:`~privlab.platform.tracking.sqlite_runs`), elsewhere each in four
        calls (create, one batch, one upload, terminate; a fifth for its dataset inputs).
        """
        return self._send_results(uploads)

    def _send_results(self, uploads: Sequence[ResultRunUpload]) -> list[str]:
        if not uploads:
            return []
        writer = self._sqlite_writer(uploads[0].experiment_id) if self.bulk else None
        if writer is not None:
            pending = [u for u in uploads if not u.finished]
            for upload in pending:
                if upload.run_id is None:
                    upload.run_id = time_ordered_run_id()
            self._write_part(pending, local=writer)
            writer.write([u.finished_run() for u in pending])
            for upload in pending:
                upload.finished = True
            return [u.run_id for u in uploads]  # type: ignore[misc]
        self._each_concurrently(self._create_run, [u for u in uploads if u.run_id is None])
        self._write_part([u for u in uploads if not u.finished])
        self._each_concurrently(self._finish_run, [u for u in uploads if not u.finished])
        return [u.run_id for u in uploads]  # type: ignore[misc]

    #: Runs a server store is sent at once: each run is three to five HTTP calls that mostly wait
    #: on the server and its database, so a batch's runs go out side by side (measured against
    #: the PostgreSQL server of cluster/mlflow-server.sh: benchmarks/RESULTS.md).
    SERVER_CONCURRENCY = 8

    def _each_concurrently(self, step: Any, uploads: Sequence[ResultRunUpload]) -> None:
        """``step(upload)`` for each of ``uploads``, on a tracking server up to
        :attr:`SERVER_CONCURRENCY` at a time (a local store takes one writer at a time); the
        first error is raised once all have returned (each upload records the steps it
        got through, so a retry goes on from there)."""
        if len(uploads) <= 1 or not self.uri.startswith(("http://", "https://")):  # a local store: one at a time
            for upload in uploads:
                step(upload)
            return
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(min(self.SERVER_CONCURRENCY, len(uploads)),
                                                   thread_name_prefix="privlab-tracking-run") as pool:
            futures = [pool.submit(step, upload) for upload in uploads]
        for future in futures:
            future.result()

    def set_default_columns(self, experiment_id: str, metrics: Sequence[str]) -> None:
        """The metric columns MLflow's runs table shows for the experiment by default under
        ``privlab ui`` (the :data:`DEFAULT_COLUMNS_TAG` experiment tag)."""
        self.client.set_experiment_tag(experiment_id, DEFAULT_COLUMNS_TAG, json.dumps(list(metrics)))

    def _create_run(self, upload: ResultRunUpload) -> None:
        upload.run_id = self.client.create_run(upload.experiment_id, run_name=upload.name, tags=upload.tags,
                                               start_time=upload.start_millis).info.run_id

    def _finish_run(self, upload: ResultRunUpload) -> None:
        """Log a created run's params, metrics, inputs and files, then end it (step by step)."""
        if not upload.logged:
            self._log_batch(upload.run_id, params=upload.params, metrics=upload.metrics)
            upload.logged = True
        if not upload.inputs_logged:
            self._log_datasets(upload.run_id, map(DatasetDescription.from_record, upload.datasets))
            upload.inputs_logged = True
        if not upload.uploaded:
            self._log_texts(upload.run_id, upload.files)
            upload.uploaded = True
        self.client.set_terminated(upload.run_id, status="FINISHED", end_time=upload.end_millis)
        upload.finished = True

    def _write_part(self, uploads: Sequence[ResultRunUpload], *, local: SqliteRunWriter | None = None) -> None:
        """The results of ``uploads`` not yet in a part, as one part on their parent run."""
        from privlab.platform.tracking.result_parts import ResultRow, part_bytes, part_name

        missing = [u for u in uploads if u.result and not u.part_written]
        if not missing:
            return
        parent = missing[0].tags[PARENT_TAG]
        path = part_name(missing[0].run_id or "")
        data = part_bytes([ResultRow(entry_id=u.config_id, run_id=u.run_id or "", result=u.result,
                                     timing=u.timing, reservoir=u.reservoir, units=u.units) for u in missing])
        if local is not None:
            write_files(Path(local.artifact_uri(parent)), {path: data})
        else:
            self._log_texts(parent, {path: data})
        for upload in missing:
            upload.part_written = True

    def _sqlite_writer(self, experiment_id: str) -> SqliteRunWriter | None:
        if experiment_id not in self._writers:
            self._writers[experiment_id] = (SqliteRunWriter.writable(sqlite_database(self.uri), experiment_id)
                                            if self.uri.startswith("sqlite:///") else None)
        return self._writers[experiment_id]

    def log_result_run(self, experiment_id: str, **fields: Any) -> str:
        """:meth:`send` a :meth:`result_upload` now."""
        return self.send(self.result_upload(experiment_id, **fields))

    # -- reading ------------------------------------------------------------------------------
    def get_run(self, run_id: str) -> Any:
        """The run ``run_id``.

        Raises:
            NotFoundError: the store holds no such run (bad input: exit 2).
            TrackingError: the store could not be read.
        """
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_run(run_id)
        except MlflowException as error:
            if error.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                raise NotFoundError(
                    f"no run {run_id!r} in the tracking store {self.uri}; check the id "
                    "(`privlab runs` lists run ids) and --tracking-uri") from None
            raise TrackingError(f"cannot read run {run_id!r} in the tracking store {self.uri}: {error}") from None
        except Exception as error:
            raise TrackingError(f"cannot read run {run_id!r} in the tracking store {self.uri}: {error}") from None

    def child_runs(self, experiment_id: str, parent_id: str) -> list[Any]:
        return self._search([experiment_id], f"tags.`{PARENT_TAG}` = '{parent_id}'")

    def parent_runs(self, experiment_id: str) -> list[Any]:
        return self._search([experiment_id], f"tags.`{KIND_TAG}` = 'parent'")

    def latest_parent_run(self) -> Any | None:
        """The most recently started privlab parent run of any active experiment (None: none)."""
        try:
            ids = [e.experiment_id for e in self.client.search_experiments()]
            runs = self.client.search_runs(ids, filter_string=f"tags.`{KIND_TAG}` = 'parent'", max_results=1,
                                           order_by=["attributes.start_time DESC"]) if ids else []
        except Exception as error:
            raise TrackingError(f"cannot reach the MLflow tracking store {self.uri!r}: {error}") from None
        return runs[0] if runs else None

    def configuration_runs(self, experiment_id: str, parent_id: str, *, finished: bool = True) -> list[Any]:
        """The configuration child runs of ``parent_id`` (only FINISHED ones unless ``finished=False``),
        newest first."""
        return [c for c in self.child_runs(experiment_id, parent_id)
                if (c.info.status == "FINISHED" or not finished) and c.data.tags.get(KIND_TAG) == "configuration"]

    def list_artifacts(self, run_id: str, path: str | None = None) -> list[str]:
        """The paths of the run's artifacts (under ``path``)."""
        return [a.path for a in self.client.list_artifacts(run_id, path)]

    def _search(self, experiment_ids: Iterable[str], filter_string: str) -> list[Any]:
        runs: list[Any] = []
        token = None
        while True:
            page = self.client.search_runs(
                list(experiment_ids), filter_string=filter_string, max_results=1000,
                order_by=["attributes.start_time DESC"], page_token=token,
            )
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def read_text(self, run_id: str, path: str) -> str | None:
        """An artifact's text, or None when the run has no such artifact."""
        data = self.read_bytes(run_id, path)
        return None if data is None else data.decode()

    def read_bytes(self, run_id: str, path: str) -> bytes | None:
        """An artifact's bytes, or None when the run has no such artifact."""
        try:
            with tempfile.TemporaryDirectory(prefix="privlab-download-") as tmp:
                local = self.client.download_artifacts(run_id, path, tmp)
                return Path(local).read_bytes()
        except Exception:
            return None


@dataclasses.dataclass(kw_only=True)
class ResultRunUpload:
    """A finished child run on its way to the store, sent step by step (:meth:`Tracker.send`).

    Each step records that it is done, so a retry after an outage goes on where the failed
    attempt stopped instead of creating the run again, and an upload that never got through is
    kept whole in the run's outbox (:meth:`to_record`) until the resume sends it.
    """

    experiment_id: str
    name: str
    tags: dict[str, str]
    params: dict[str, Any]
    metrics: dict[str, float]
    files: dict[str, str | bytes]
    datasets: list[dict[str, str]] = dataclasses.field(default_factory=list)  # DatasetDescription records
    result: str = ""  # a configuration's summary entry (JSON), logged in a part on the parent run
    timing: dict[str, float] | None = None  # its timing, in the same part
    reservoir: dict[str, list[float]] | None = None  # its reservoir sample, in the same part
    units: dict[str, Any] | None = None  # its per-unit table (a unit_runs workload's), in the same part
    start_millis: int | None = None  # when its first unit started (epoch ms): MLflow's start and duration
    end_millis: int | None = None  # when its last unit was merged
    run_id: str | None = None  # once created
    part_written: bool = False  # result and reservoir
    logged: bool = False  # params and metrics
    inputs_logged: bool = False  # datasets
    uploaded: bool = False  # files
    finished: bool = False

    @property
    def config_id(self) -> str:
        return self.tags[CONFIG_TAG]

    @property
    def kind(self) -> str:
        return self.tags[KIND_TAG]

    def finished_run(self) -> FinishedRun:
        """The upload as a whole finished run (params as MLflow stores them)."""
        return FinishedRun(run_id=self.run_id or "", name=self.name, tags=self.tags, params=param_texts(self.params),
                           metrics=self.metrics, files=self.files, datasets=self.datasets,
                           start_millis=self.start_millis, end_millis=self.end_millis)

    def to_record(self) -> dict[str, Any]:
        """The upload as JSON-ready data (bytes files in base64)."""
        record = dataclasses.asdict(self)
        record["files"] = {path: ({"base64": base64.b64encode(content).decode()} if isinstance(content, bytes)
                                  else {"text": content}) for path, content in self.files.items()}
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ResultRunUpload:
        files = {path: (base64.b64decode(content["base64"]) if "base64" in content else content["text"])
                 for path, content in record["files"].items()}
        return cls(**{**record, "files": files})


def param_texts(params: Mapping[str, Any]) -> dict[str, str]:
    """``params`` as MLflow stores them when :class:`Tracker` logs them (text, capped in length)."""
    return {key: _param_text(value) for key, value in params.items()}


def _param_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= MAX_PARAM_LENGTH else text[: MAX_PARAM_LENGTH - 3] + "..."
