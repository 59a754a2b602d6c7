"""DP acceptance criteria of a release candidate against the transformed private data
(Hod & Canetti 2024, Section 4.5)."""
