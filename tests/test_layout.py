"""The package layout: the standard library's `platform` module keeps working, and imports point down the layers."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPED = {"privlab.platform": "platform", "privlab.mechanisms": "mechanisms"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_mapping_is_as_documented() -> None:
    assert _pyproject()["tool"]["setuptools"]["package-dir"] == MAPPED


def test_mapped_roots_have_no_init_and_tests_have_none() -> None:
    for folder in MAPPED.values():
        assert not (ROOT / folder / "__init__.py").exists(), f"{folder}/__init__.py shadows the stdlib"
    assert not list((ROOT / "tests").rglob("__init__.py"))


def test_every_subpackage_is_listed() -> None:
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = set(MAPPED)
    for package, folder in MAPPED.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *relative.parts]))
    assert found == listed, f"missing from pyproject packages: {sorted(found - listed)}; stale: {sorted(listed - found)}"


def test_no_module_is_named_after_a_stdlib_module() -> None:
    for folder in MAPPED.values():
        for module in (ROOT / folder).rglob("*.py"):
            if module.stem != "__init__":
                assert module.stem not in sys.stdlib_module_names, f"{module} shadows the stdlib module {module.stem!r}"


def test_stdlib_platform_wins_from_the_repo_root() -> None:
    result = subprocess.run([sys.executable, "-c", "import platform, numpy; print(platform.__file__)"],
                            cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    printed = Path(result.stdout.strip())
    assert printed.name == "platform.py" and ROOT not in printed.parents


def test_package_imports_from_the_repo_root() -> None:
    code = "import privlab.platform.dp.ledger as l, privlab.mechanisms.basic.laplace as m; print(l.__name__, m.__name__)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                            timeout=60)
    assert result.stdout.split() == ["privlab.platform.dp.ledger", "privlab.mechanisms.basic.laplace"]


# --- import direction: the DP core below everything, mechanisms on the core only ------------------
#
# core        privlab.platform.core and privlab.platform.dp: import only the core.
# mechanisms  every privlab.mechanisms module that is not an adapter: imports the core and
#             other mechanisms' non-adapter modules.
# adapters    mechanisms modules that connect a mechanism to the platform (workloads, studies,
#             audits, reports, commands): may also import the platform's plug-in interfaces
#             (registry, audit registration, reports, commands); a `commands` adapter (subcommands
#             of the `privlab` command) may use any platform service except the CLI itself.
# platform    every other privlab.platform module: never imports privlab.mechanisms (it finds
#             mechanisms through plug-in registration).
#
# Inside the platform each folder is a floor (PLATFORM_FLOORS, lowest first): a module imports
# modules of its own floor or of lower ones, so the folder tree is the layer diagram.

PLATFORM_FLOORS = ("core", "dp", "experiment", "execution", "tracking", "results", "run", "workloads", "audit", "cli")
CORE_FLOORS = ("core", "dp")
PLATFORM_INTERFACES = {"privlab.platform.experiment.registry", "privlab.platform.audit.registration",
                       "privlab.platform.results.reports", "privlab.platform.cli.commands"}
ADAPTER_NAME = re.compile(r"^(workloads|\w+_workloads|studies|\w+_studies|audit|report|reports_\w+|commands)$")


def _modules() -> dict[str, Path]:
    modules = {}
    for package, folder in MAPPED.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            modules[name] = path
    return modules


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The privlab modules ``path`` imports, at any depth of the file (lazy imports count)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found.update(name for name in names if name in modules)
    return found


def _platform_folder(module: str) -> str | None:
    """The platform folder of a ``privlab.platform`` module (None for anything else)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["privlab", "platform"] and len(parts) > 2 else None


def _layer(module: str) -> str:
    if _platform_folder(module) in CORE_FLOORS:
        return "core"
    if module.startswith("privlab.mechanisms."):
        return "adapter" if ADAPTER_NAME.match(module.rsplit(".", 1)[1]) else "mechanism"
    return "platform"


def _allowed(importer: str, imported: str) -> bool:
    source, target = _layer(importer), _layer(imported)
    if target == "core":
        return True
    if source == "core":
        return False
    if source == "mechanism":
        return target == "mechanism"
    if source == "adapter":
        if importer.endswith(".commands") and target == "platform":
            return imported != "privlab.platform.cli.main"
        return target in ("mechanism", "adapter") or imported in PLATFORM_INTERFACES
    return target == "platform"  # platform never imports mechanisms or their adapters


def test_imports_point_down_the_layers() -> None:
    modules = _modules()
    assert PLATFORM_INTERFACES <= set(modules)
    wrong = sorted(f"{importer} ({_layer(importer)}) imports {imported} ({_layer(imported)})"
                   for importer, path in modules.items() for imported in _imports(path, modules)
                   if imported != importer and not _allowed(importer, imported))
    assert not wrong, "imports against the layers (see ARCHITECTURE.md):\n" + "\n".join(wrong)


def test_platform_folders_are_floors() -> None:
    modules = _modules()
    folders = {path.parent.name for name, path in modules.items() if name.startswith("privlab.platform.")}
    assert folders == set(PLATFORM_FLOORS), "every platform folder is a floor of PLATFORM_FLOORS"
    assert not [p.name for p in (ROOT / "platform").glob("*.py")], "platform/ holds folders (floors), not modules"
    up = sorted(f"{importer} ({_platform_folder(importer)}) imports {imported} ({_platform_folder(imported)})"
                for importer, path in modules.items() if _platform_folder(importer)
                for imported in _imports(path, modules) if _platform_folder(imported)
                and PLATFORM_FLOORS.index(_platform_folder(imported)) > PLATFORM_FLOORS.index(_platform_folder(importer)))
    assert not up, "imports up the platform's floors (see ARCHITECTURE.md):\n" + "\n".join(up)


def test_the_floor_check_can_fail() -> None:
    assert _platform_folder("privlab.platform.dp.ledger") == "dp"
    assert _platform_folder("privlab.mechanisms.basic.laplace") is None
    assert PLATFORM_FLOORS.index(_platform_folder("privlab.platform.run.runner")) > PLATFORM_FLOORS.index("tracking")


def test_the_layer_check_can_fail() -> None:
    # The rules themselves, on the import the consolidation removed and on the ones it must allow.
    assert not _allowed("privlab.platform.experiment.registry", "privlab.mechanisms.basic.workloads")
    assert not _allowed("privlab.mechanisms.synthesizers.base", "privlab.platform.experiment.registry")
    assert not _allowed("privlab.platform.dp.ledger", "privlab.platform.run.runner")
    assert not _allowed("privlab.mechanisms.tabular.schema", "privlab.platform.experiment.datasets")
    assert _allowed("privlab.mechanisms.basic.workloads", "privlab.platform.experiment.registry")
    assert _allowed("privlab.mechanisms.release.run_release", "privlab.platform.dp.transcript")
    assert _allowed("privlab.platform.run.runner", "privlab.platform.dp.ledger")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components with more than one
    module (Tarjan's algorithm, iterative, so deep graphs need no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


def test_no_import_cycles_counting_every_import() -> None:
    # A function-level import that exists to break a cycle is still a cycle: every import
    # counts, wherever it sits in the file (TYPE_CHECKING blocks included).
    modules = _modules()
    graph = {name: _imports(path, modules) - {name} for name, path in modules.items()}
    assert not _cycles(graph), "import cycles:\n" + "\n".join(" <-> ".join(c) for c in _cycles(graph))


def test_the_cycle_check_can_fail(tmp_path: Path) -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    source = "def f():\n    from privlab.platform.dp import ledger\n"
    path = tmp_path / "lazy.py"
    path.write_text(source)
    assert _imports(path, {"privlab.platform.dp.ledger": path}) == {"privlab.platform.dp.ledger"}


def test_diagnostic_workloads_are_not_installed_plugins() -> None:
    entry_points = _pyproject()["project"]["entry-points"]
    listed = {module.partition(":")[0] for group in entry_points.values() for module in group.values()}  # module[:object]
    assert "privlab.mechanisms.basic.diagnostic_workloads" not in listed
    assert {"privlab.workloads", "privlab.synthesizers", "privlab.criteria", "privlab.auditables",
            "privlab.dataset_generators", "privlab.commands"} <= set(entry_points)
    for module in listed:  # every listed plug-in module exists
        assert module in _modules(), module


def test_the_tracker_owns_every_privlab_tag() -> None:
    # Every privlab.* run tag is named once, in platform/tracking/run_tags.py; no other
    # module spells one (a typo there would write a tag nothing reads).
    tracking = (ROOT / "platform" / "tracking" / "run_tags.py").read_text()
    tags = set(re.findall(r'^[A-Z_]+_TAG = "(privlab\.[a-z_0-9]+)"', tracking, flags=re.M))
    assert {"privlab.status", "privlab.kind", "privlab.driver"} <= tags
    spelled = sorted(f"{path.relative_to(ROOT)}: {tag}" for path in _modules().values() if path.name != "run_tags.py"
                     for tag in tags if f'"{tag}"' in path.read_text())
    assert not spelled, "use the constants of platform/tracking/run_tags.py:\n" + "\n".join(spelled)


#: scikit-learn APIs the code may use, with the release that introduced each.
SKLEARN_API_SINCE = {"validate_data": (1, 6), "__sklearn_tags__": (1, 6), "__sklearn_clone__": (1, 3)}


def _floor(requirements: list[str], name: str) -> tuple[int, ...]:
    """The ``>=`` floor of ``name`` in a list of requirement strings."""
    floors = [m.group(1) for r in requirements if (m := re.fullmatch(rf"{re.escape(name)}(?:\[[^]]*\])?>=([\d.]+)\S*", r))]
    assert len(floors) == 1, f"expected one '{name}>=X' requirement, found {requirements}"
    return tuple(int(part) for part in floors[0].split("."))


def test_dependency_floors_cover_what_the_code_uses() -> None:
    """Issue 34 item 13: the DP forests call scikit-learn 1.6's ``validate_data`` and
    ``__sklearn_tags__``, so ``scikit-learn>=1.5`` installed a version they fail on; and
    ``project.license`` is an SPDX string, which setuptools reads from 77 on (the table form is
    deprecated, refused after 2027-02-18)."""
    pyproject = _pyproject()
    sources = "\n".join(path.read_text() for folder in MAPPED.values() for path in (ROOT / folder).rglob("*.py"))
    used = {api: since for api, since in SKLEARN_API_SINCE.items() if re.search(rf"\b{api}\b", sources)}
    assert {"validate_data", "__sklearn_tags__"} <= set(used)  # the scan sees the real code
    floor = _floor(pyproject["project"]["dependencies"], "scikit-learn")
    for api, since in used.items():
        assert floor >= since, f"the code uses scikit-learn's {api} (new in {since}) but requires >= {floor}"
    assert isinstance(pyproject["project"]["license"], str), "project.license must be an SPDX string"
    assert _floor(pyproject["build-system"]["requires"], "setuptools") >= (77,)
