"""Empirical audits of DP claims (``privlab audit``): auditables, their workloads, statistics, results and runs."""
