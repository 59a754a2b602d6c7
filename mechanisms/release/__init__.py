"""Release flows: one iteration of the release scheme, its research grid workload, and the final release."""
