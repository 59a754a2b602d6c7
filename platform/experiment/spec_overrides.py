"""``--set key=value``: edits to a spec's document before it is validated.

A dotted key addresses a table (``study.NAME.key`` one study of a multi-study spec; a ``params``
or ``grid`` key is one part, so ``grid.dataset.n`` stays together). A relative file path an
override writes is the user's, relative to the working directory; it is rewritten relative to
the spec's folder, where the file's own paths resolve.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privlab.platform.core.errors import PrivlabError, SpecError
from privlab.platform.core.validation import check_path_text, shown
from privlab.platform.experiment import registry
from privlab.platform.experiment.spec_keys import STUDY_KEYS

__all__ = ["apply_override", "rebase_override_paths"]

def rebase_override_paths(owner: dict[str, Any], parts: tuple[str, ...], *, spec_dir: Path, cwd: Path) -> None:
    """Rewrite the relative file paths an override wrote, from ``cwd``-relative to ``spec_dir``-relative.

    ``owner`` and ``parts`` are where :func:`apply_override` wrote (the study's table, or the
    document, and the key below it). Files are ``dataset.path`` and the parameters the study's
    workload marks ``metadata={"path": True}`` (in ``params`` or as ``grid`` values); anything
    else, and absolute paths, stay as given. The rewritten value names the same file, so the
    document (logged as the run's spec) resolves against the spec's folder like the rest of the
    file, and a path naming the file the spec itself names keeps that configuration's seeds
    (they are keyed by the parameters as written).
    """
    table: Any = owner
    for part in parts[:-1]:
        table = table.get(part) if isinstance(table, dict) else None
    if isinstance(table, dict) and parts[-1] in table:
        table[parts[-1]] = _rebased(owner, parts, table[parts[-1]], spec_dir=spec_dir, cwd=cwd)


def _rebased(owner: Mapping[str, Any], parts: tuple[str, ...], value: Any, *, spec_dir: Path, cwd: Path) -> Any:
    if isinstance(value, dict):  # an inline table, e.g. --set 'dataset={path = "x.csv"}'
        return {k: _rebased(owner, (*parts, k), v, spec_dir=spec_dir, cwd=cwd) for k, v in value.items()}
    if not _names_a_file(owner, parts):
        return value

    def rebase(item: Any) -> Any:
        if not isinstance(item, str) or not item:
            return item
        check_path_text(item, f"--set {'.'.join(map(str, parts))} ({shown(item)})")  # before resolving it
        if Path(item).is_absolute():
            return item
        target = (cwd / item).resolve()
        try:
            return os.path.relpath(target, spec_dir)
        except ValueError:  # another drive (Windows): no relative path exists
            return str(target)

    return [rebase(v) for v in value] if isinstance(value, list) else rebase(value)


def _names_a_file(owner: Mapping[str, Any], parts: tuple[str, ...]) -> bool:
    """Is ``owner[parts]`` a file path: ``dataset.path``, or a workload parameter marked as one?"""
    if parts == ("dataset", "path"):
        return True
    if len(parts) != 2 or parts[0] not in ("params", "grid"):
        return False
    try:
        params_type = registry.get_workload(str(owner.get("workload"))).Params
    except PrivlabError:  # unknown workload: parse_spec reports it
        return False
    return any(f.name == parts[1] and f.metadata.get("path") for f in dataclasses.fields(params_type))


def apply_override(document: dict[str, Any], override: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Apply ``key=value`` (value parsed as TOML, else taken as a string) in place.

    Returns:
        Where it wrote: the table that owns the key (the addressed study's, or the document)
        and the key's parts below it (a ``params`` or ``grid`` key is one part).
    """
    key, sep, raw = override.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SpecError(f"--set {shown(override)} must look like key=value (e.g. trials=1000000)")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    except (RecursionError, ValueError):  # nested too deeply; an integer too long to convert
        raise SpecError(f"--set {key}: the value nests too deeply or holds an integer too long to read; "
                        "check it") from None
    parts = key.split(".")
    target: Any = document
    studies = document.get("study")
    # A malformed `study` (not an array of tables) is reported by parse_spec, not here.
    names = [s.get("name") if isinstance(s, dict) else None for s in studies] if isinstance(studies, list) else []
    if parts[0] == "study" and len(parts) >= 3:
        if parts[1] not in names:
            raise SpecError(
                f"--set {key}: no study named {parts[1]!r}; studies: {', '.join(map(str, names)) or 'none'}"
            )
        target = studies[names.index(parts[1])]  # type: ignore[index]
        parts = parts[2:]
    elif isinstance(studies, list) and parts[0] in STUDY_KEYS - {"name", "description"}:
        raise SpecError(
            f"--set {key}: this spec has several studies; address one as "
            f"study.<name>.{key} (studies: {', '.join(map(str, names))})"
        )
    owner = target
    for position, part in enumerate(parts[:-1]):
        # Grid keys such as "dataset.n" are quoted TOML keys: keep the remainder together.
        if isinstance(target, dict) and part in ("grid", "params"):
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise SpecError(f"--set {key}: {part!r} is not a table in the spec")
            target[".".join(parts[position + 1 :])] = value
            return owner, (*parts[: position + 1], ".".join(parts[position + 1 :]))
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            raise SpecError(f"--set {key}: {part!r} is not a table in the spec")
    target[parts[-1]] = value
    return owner, tuple(parts)
