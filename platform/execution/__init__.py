"""Where units run: backends (serial, Ray tasks, actors), what a worker executes, order-free aggregation, the local Ray cluster and cleanup, progress and clean stops."""
