"""The ``privlab`` command and what its subcommand plug-ins need."""
