"""A tracking server that goes away: bounded waits, and telling an outage from other failures.

MLflow's HTTP client retries each request itself (by default 7 times with exponential backoff
and a 120 s timeout: over four minutes per call), so left to them a run whose server went away
would spend ~12 minutes in retries before failing. privlab waits for an outage on its own terms instead:

- each MLflow request gets a short retry budget (:func:`bound_http_retries`, only where the user
  has not set MLflow's own variables), so a call against a dead server fails in seconds;
- the background writer (:class:`~privlab.platform.tracking.background_writer.BackgroundWriter`) retries a
  call that failed because the server was unreachable (:func:`is_unreachable`) every
  ``retry_interval_s`` until ``[tracking] outage_wait_s`` have passed since the outage began,
  so a short outage costs nothing, while computation goes on;
- after that the run stops with what it computed kept in its outbox
  (:mod:`privlab.platform.run.outbox`), and the resume logs it.

Only transport failures count as an outage (no connection, a timeout, the server's 5xx answers
after MLflow's retries). A request the server refused (4xx) fails at once as before.
"""

from __future__ import annotations

import os

#: MLflow's retry settings for one request while privlab rides out outages itself: about 5 s
#: against a server that refuses connections, 30 s against one that does not answer.
HTTP_RETRY_LIMITS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}

#: How MLflow words a request that never got an answer (rest_utils.http_request).
_TRANSPORT_FAILURE_PREFIX = "API request to "
_TRANSPORT_FAILURE_WORDS = ("failed with exception", "failed with timeout exception")


def is_remote(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def bound_http_retries(uri: str) -> None:
    """Give each MLflow request to a server at ``uri`` the short retry budget of
    :data:`HTTP_RETRY_LIMITS`, leaving any value the user set."""
    if is_remote(uri):
        for name, value in HTTP_RETRY_LIMITS.items():
            os.environ.setdefault(name, value)


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` (or an error it was raised from) says the tracking server could not
    be reached, as opposed to the server refusing a request."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (ConnectionError, TimeoutError)):
            return True
        message = str(current)
        if message.startswith(_TRANSPORT_FAILURE_PREFIX) and any(w in message for w in _TRANSPORT_FAILURE_WORDS):
            return True
        current = current.__cause__ or current.__context__
    return False
