"""The layers of docs/design (DESIGN.md "How the layers depend on each other") hold in the code: every import
statement of a package, at module level or inside a function, stays below it. Read from the source (ast), so an
import a test run never reaches is checked too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "numasim"

ABOVE = {
    # the kernel never imports user space (tools: numactl, numastat, the programs), nor what drives it
    "kernel": {"tools", "cli", "persist", "sweep", "report", "calibrate", "workload"},
    # the topology is the bottom layer
    "topology": {"kernel", "engine", "tools", "cli", "persist", "sweep", "report", "calibrate", "workload"},
    # user space calls the kernel and the engine, never the command line or the sweeps that drive it
    "tools": {"cli", "sweep"},
    # the persistent machines hold the kernel's state; the command line drives them, not the reverse
    "persist": {"cli", "sweep", "tools"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


@pytest.mark.parametrize("layer", sorted(ABOVE))
def test_a_layer_never_imports_the_layers_above_it(layer: str) -> None:
    bad = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for line, module in _imports(path):
            parts = module.split(".")
            if parts[0] == "numasim" and len(parts) > 1 and parts[1] in ABOVE[layer]:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


def test_the_checker_sees_imports_inside_functions(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from numasim.tools.programs import find_program\n    import numasim.cli\n")
    assert _imports(source) == [(2, "numasim.tools.programs"), (3, "numasim.cli")]
