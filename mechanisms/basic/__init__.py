"""Textbook DP mechanisms: Laplace and exponential, with ledger records and release-safe paths."""
