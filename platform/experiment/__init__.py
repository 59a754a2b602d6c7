"""What an experiment is: its spec, its datasets and the registry of workloads and dataset generators."""
