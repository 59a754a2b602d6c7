"""``python -m privlab.platform.cli``: the ``privlab`` command."""

from privlab.platform.cli.main import entry

entry()
