"""DP synthesizers of discrete tabular data (PrivBayes, independent marginals) behind one
``Synthesizer`` interface."""
