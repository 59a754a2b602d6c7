"""The pMSE mechanism (Snoke & Slavković): pMSE via CART, its fast exact greedy CART, the
exponential mechanism over synthesis-model parameters, synthesis models and baselines."""
