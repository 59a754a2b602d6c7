"""The built-in auditables (``privlab audit --list``). Importing a module registers its
auditables and their ``privacy_audit.<name>`` workloads (see :mod:`privlab.platform.audit`);
add a new auditable's module here."""

from __future__ import annotations

import privlab.mechanisms.basic.audit  # noqa: F401
import privlab.mechanisms.pmse.audit  # noqa: F401
