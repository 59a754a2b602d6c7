"""The ground floor: errors, argument checks, plug-in registries, column declarations and safe readers of input files."""
