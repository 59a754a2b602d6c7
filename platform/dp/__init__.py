"""The DP core: typed events, accountants, the ledger, composition, random sources and exact samplers, the release transcript, research seeding and the private-estimator contract."""
