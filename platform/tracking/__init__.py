"""MLflow from the driver: the tracker and its tags, background writes and outages, the store's checks and moves, the driver's lease, the configuration index, unit tables and run listings."""
