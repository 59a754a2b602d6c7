"""The keys each table of an experiment spec may hold (:mod:`privlab.platform.experiment.spec`)."""

__all__ = ["BUDGET_KEYS", "EXECUTION_KEYS", "STUDY_KEYS", "TOP_KEYS", "TRACKING_KEYS"]

TOP_KEYS = {
    "name", "description", "seed", "mode", "budget", "tracking", "execution", "dataset",
    "study", "workload", "params", "grid", "grid_points", "repetitions", "trials", "metrics",
}
STUDY_KEYS = {
    "name", "description", "workload", "params", "grid", "grid_points", "repetitions",
    "trials", "metrics", "dataset",
}
BUDGET_KEYS = {"epsilon", "delta", "accountant", "delta_slack"}
TRACKING_KEYS = {"experiment", "uri", "artifacts", "plots", "checkpoint_interval_s", "outage_wait_s", "unit_runs",
                 "run_statistics", "reservoirs"}
EXECUTION_KEYS = {"batch_size", "target_task_seconds", "max_retries", "max_in_flight_per_worker", "max_configurations"}
