"""The MLflow server app ``privlab ui`` runs (an ``mlflow.app`` plug-in, ``--app-name privlab``):
MLflow's own, whose page opens in the machine-learning view unless the user chose otherwise.

MLflow 3.17's UI shows an experiment, and every run page, in the view its browser remembers
(``localStorage["mlflow.workflowType_v1"]``), GenAI when it remembers none. The address
``privlab ui`` prints names the machine-learning view (``?workflowType=machine_learning``), but
that holds for the page it opens only: a configuration run opened from it lands in GenAI's
"Evaluation runs" (breadcrumb "quickstart › Evaluations"), where a privlab run's params,
metrics and artifacts are not where a user looks. So the UI's page is served with a line that
makes the machine-learning view the default in a browser that has no choice of its own; a user
who picks GenAI in the UI keeps it. Nothing else of MLflow's app changes.
"""

from __future__ import annotations

from typing import Any

#: MLflow's key for the remembered view (``useLocalStorage({key: "mlflow.workflowType", version: 1})``).
WORKFLOW_KEY = "mlflow.workflowType_v1"
DEFAULT_VIEW = (f'<script>try{{if(localStorage.getItem("{WORKFLOW_KEY}")===null)'
                f'localStorage.setItem("{WORKFLOW_KEY}",JSON.stringify("machine_learning"))}}catch(e){{}}</script>')


def with_default_view(html: str) -> str:
    """The UI's page with :data:`DEFAULT_VIEW` run first (before MLflow's scripts read the key)."""
    return html.replace("<head>", "<head>" + DEFAULT_VIEW, 1) if "<head>" in html else DEFAULT_VIEW + html


def create_app() -> Any:
    """MLflow's server app (FastAPI around its Flask app, as ``mlflow server`` runs it by
    default), its page served by :func:`with_default_view`."""
    from flask import request
    from mlflow.server import app as flask_app
    from mlflow.server.fastapi_app import create_fastapi_app

    @flask_app.after_request
    def default_to_machine_learning(response: Any) -> Any:
        if request.path.rstrip("/") == "" and response.status_code == 200 and response.mimetype == "text/html":
            response.direct_passthrough = False
            response.set_data(with_default_view(response.get_data(as_text=True)))
            response.headers.pop("ETag", None)  # the file's tag no longer describes the body
        return response

    return create_fastapi_app(flask_app)
