"""Private selection from private candidates (Liu & Talwar 2019), as used by release flows."""
