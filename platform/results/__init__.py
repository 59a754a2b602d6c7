"""Results for people: study reports, tables, plots and comparisons across configurations."""
