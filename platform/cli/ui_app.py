"""The MLflow server app ``privlab ui`` runs (an ``mlflow.app`` plug-in, ``--app-name privlab``):
MLflow's own, whose page opens in the machine-learning view unless the user chose otherwise.

MLflow 3.17's UI shows an experiment, and every run page, in the view its browser remembers
(``localStorage["mlflow.workflowType_v1"]``), GenAI when it remembers none. The address
``privlab ui`` prints names the machine-learning view (``?workflowType=machine_learning``), but
that holds for the page it opens only: a configuration run opened from it lands in GenAI's
"Evaluation runs" (breadcrumb "quickstart › Evaluations"), where a privlab run's params,
metrics and artifacts are not where a user looks. So the UI's page is served with a line that
makes the machine-learning view the default in a browser that has no choice of its own; a user
who picks GenAI in the UI keeps it. Likewise MLflow's runs table shows no metric column until
one is chosen; an experiment privlab ran names its headline metrics in an experiment tag, and a
browser with no table state of its own for it starts with those columns. Nothing else of
MLflow's app changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

#: MLflow's key for the remembered view (``useLocalStorage({key: "mlflow.workflowType", version: 1})``).
WORKFLOW_KEY = "mlflow.workflowType_v1"
DEFAULT_VIEW = (f'<script>try{{if(localStorage.getItem("{WORKFLOW_KEY}")===null)'
                f'localStorage.setItem("{WORKFLOW_KEY}",JSON.stringify("machine_learning"))}}catch(e){{}}</script>')


#: MLflow's runs table's columns by default (``attributes.`Source```, ``Models``, ``Dataset``), to
#: which an experiment's :data:`~privlab.platform.tracking.run_tags.DEFAULT_COLUMNS_TAG` metrics are added.
MLFLOW_DEFAULT_COLUMNS = ("attributes.`Source`", "attributes.`Models`", "attributes.`Dataset`")


def ui_state_key(experiment_id: str) -> str:
    """Where MLflow's UI keeps an experiment's runs-table state (selected columns and the like)."""
    return f"MLflowLocalStorage-1.1-ExperimentPage-{json.dumps([experiment_id])}-ReactComponentState"


def default_columns_script(columns: Mapping[str, Sequence[str]]) -> str:
    """A script giving each experiment of ``columns`` (id → metric names) those metric columns
    in a browser that keeps no state of its own for it: MLflow's table otherwise shows no metric
    at all until one is chosen. A state the user made is never touched."""
    states = {ui_state_key(experiment_id): json.dumps({"selectedColumns": [
        *MLFLOW_DEFAULT_COLUMNS, *(f"metrics.`{metric}`" for metric in metrics)]})
        for experiment_id, metrics in columns.items()}
    return (f"<script>try{{const s={json.dumps(states)};for(const k in s)if(localStorage.getItem(k)===null)"
            "localStorage.setItem(k,s[k])}catch(e){}</script>")


def with_default_view(html: str, columns: Mapping[str, Sequence[str]] | None = None) -> str:
    """The UI's page with :data:`DEFAULT_VIEW` (and the experiments' default columns) run first,
    before MLflow's scripts read what they set."""
    head = DEFAULT_VIEW + (default_columns_script(columns) if columns else "")
    return html.replace("<head>", "<head>" + head, 1) if "<head>" in html else head + html


def experiments_default_columns(store: Any) -> dict[str, list[str]]:
    """Each experiment's default metric columns, from its tag (experiments without one left out)."""
    from privlab.platform.tracking.run_tags import DEFAULT_COLUMNS_TAG

    found: dict[str, list[str]] = {}
    for experiment in store.search_experiments(max_results=1000):
        text = experiment.tags.get(DEFAULT_COLUMNS_TAG)
        try:
            metrics = json.loads(text) if text else None
        except ValueError:
            continue
        if isinstance(metrics, list) and all(isinstance(m, str) for m in metrics):
            found[str(experiment.experiment_id)] = metrics
    return found


def create_app() -> Any:
    """MLflow's server app (FastAPI around its Flask app, as ``mlflow server`` runs it by
    default), its page served by :func:`with_default_view`."""
    from flask import request
    from mlflow.server import app as flask_app
    from mlflow.server.fastapi_app import create_fastapi_app
    from mlflow.server.handlers import _get_tracking_store

    @flask_app.after_request
    def default_to_machine_learning(response: Any) -> Any:
        if request.path.rstrip("/") == "" and response.status_code == 200 and response.mimetype == "text/html":
            try:
                columns = experiments_default_columns(_get_tracking_store())
            except Exception:  # the page must load whatever the store says; only the columns are lost
                columns = {}
            response.direct_passthrough = False
            response.set_data(with_default_view(response.get_data(as_text=True), columns))
            response.headers.pop("ETag", None)  # the file's tag no longer describes the body
        return response

    return create_fastapi_app(flask_app)
