"""Plausible deniability: the DP seed-based generative model and privacy tests 1 and 2.

One module a job:

* :mod:`.split` — the seeded, disjoint split into D_T, D_P, D_S and a test set;
* :mod:`.entropy` — empirical entropies and their exact replace-one sensitivity (Section 3.3.1);
* :mod:`.accounting` — per-step ε from a model budget (Section 3.5) and Theorem 1's (ε, δ);
* :mod:`.structure` — noisy entropies, symmetrical uncertainty, CFS merit and the greedy,
  acyclic, ``maxcost``-bounded parent selection (Section 3.3, eqs. 4–8);
* :mod:`.parameters` — noisy conditional count tables and the Dirichlet estimator (Section 3.4);
* :mod:`.model` — :class:`~.model.PlausibleDeniabilityModel`, the DP generative model as a
  :class:`~privlab.platform.dp.estimator.PrivateEstimator`;
* :mod:`.synthesis` — seed-based synthesis by eq. (3) with ω fixed or drawn from a range (3.2);
* :mod:`.probability` — the exact Pr{y = M(d)}: a literal reference and a seed index (item 6);
* :mod:`.privacy_tests` — Privacy Tests 1 and 2 with early stopping, the candidate loop and the
  run's ledger statement (model + Theorem 1, :func:`~.privacy_tests.record_generation`);
* :mod:`.streams` — per-candidate counter-based (Philox) random streams keyed by candidate index;
* :mod:`.batched` — Mechanism 1 for a batch of candidates with numpy, identical to the references.

Privacy:
    The neighbouring relation of the model's sensitivities is replace-one with the split sizes
    public (see :mod:`.entropy` for why); Theorem 1 of the paper is stated for add/remove-one
    and :func:`.accounting.theorem1_replace_one` converts it.

References:
    Bindschaedler, Shokri & Gunter, "Plausible Deniability for Privacy-Preserving Data
    Synthesis" (VLDB 2017), Sections 2–5.
"""
