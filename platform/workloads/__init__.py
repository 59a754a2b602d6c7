"""Built-in workloads (the quickstart studies); each module registers itself on import."""
