"""Tabular data for release flows: the discrete domain, schema and transformations, record
constraints and the face-privacy projection."""
