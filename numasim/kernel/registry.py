"""Finding placement policies: built-ins by name, third-party plug-ins by entry point, files by path.

Lookup order of :func:`load_policy` for a name: the kernel's built-in modes (:data:`BUILTIN_POLICY_NAMES`),
policies registered in this process with :func:`register_policy`, the importlib.metadata entry-point group
``numasim.policies``, and finally the example policies shipped in the top-level ``policies/`` folder. A string
ending in ``.py`` (or naming an existing file) is loaded from that file.

A policy module (file or entry point target) provides a factory ``make_policy(**params)`` returning an object
with a ``name`` and a ``place(ctx, count)`` method (see :mod:`numasim.kernel.protocol`); a class or a ready
instance also works.

Registering a third-party policy
--------------------------------
In the plug-in package's ``pyproject.toml``::

    [project.entry-points."numasim.policies"]
    my_policy = "my_package.my_module:make_policy"

After ``pip install``, ``load_policy("my_policy", threshold=0.5)`` finds it.

Examples
--------
>>> load_policy("interleave", nodes=[0, 1]).name
'interleave'
>>> "bind" in available_policies()
True
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from numasim.errors import PolicyError
from numasim.kernel.mempolicy import (
    MPOL_F_RELATIVE_NODES,
    MPOL_F_STATIC_NODES,
    MPOL_PREFERRED,
    MemPolicy,
)
from numasim.kernel.modes import BUILTIN_MODES, KernelMode
from numasim.kernel.protocol import PlacementPolicy

__all__ = [
    "ENTRY_POINT_GROUP",
    "BUILTIN_POLICY_NAMES",
    "register_policy",
    "unregister_policy",
    "load_policy",
    "load_policy_file",
    "available_policies",
    "shipped_policy_dirs",
    "split_params",
]

def split_params(spec: str, what: str) -> tuple[str, dict[str, Any]]:
    """``NAME[:KEY=VALUE,...]`` as the name and its parameters (numbers read as numbers), the one grammar of
    ``--policy PLUGIN:...``, ``--daemon NAME:...`` and sweep files.

    >>> split_params("fill_local_then_spread:threshold=0.5,name=x", "--policy")
    ('fill_local_then_spread', {'threshold': 0.5, 'name': 'x'})
    """
    name, _, text = spec.partition(":")
    params: dict[str, Any] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise PolicyError(f"{what} {spec}: parameter {item!r} is not KEY=VALUE")
        try:
            params[key.strip()] = float(value) if any(ch in value for ch in ".eE") else int(value)
        except ValueError:
            params[key.strip()] = value
    return name, params


ENTRY_POINT_GROUP = "numasim.policies"
BUILTIN_POLICY_NAMES: tuple[str, ...] = tuple(BUILTIN_MODES)

_registered: dict[str, Callable[..., Any]] = {}


def register_policy(name: str, factory: Callable[..., Any]) -> None:
    """Make ``factory(**params)`` loadable as ``name`` in this process (tests, notebooks)."""
    if name in BUILTIN_MODES:
        raise PolicyError(f"policy name {name!r} is a built-in kernel mode")
    _registered[name] = factory


def unregister_policy(name: str) -> None:
    _registered.pop(name, None)


def shipped_policy_dirs() -> list[Path]:
    """Folders holding the example policies: ``policies/`` of a source checkout, or the wheel's copy."""
    pkg = Path(__file__).resolve().parents[1]
    candidates = [pkg / "_shipped" / "policies", pkg.parent / "policies"]
    return [p for p in candidates if p.is_dir()]


def _shipped_files(kind: str = "make_policy") -> dict[str, Path]:
    """The shipped modules defining ``kind`` (``make_policy``: placement policies; ``make_daemon``: daemons)."""
    found: dict[str, Path] = {}
    for folder in shipped_policy_dirs():
        for f in sorted(folder.glob("*.py")):
            if not f.name.startswith("_") and f"def {kind}(" in f.read_text(encoding="utf-8"):
                found.setdefault(f.stem, f)
    return found


def shipped_daemons() -> dict[str, Path]:
    """``{name: file}`` of the shipped user-space daemons (``policies/numad.py`` is ``numad``)."""
    return _shipped_files("make_daemon")


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_policies() -> dict[str, str]:
    """``{name: origin}`` of every policy :func:`load_policy` can find by name."""
    out: dict[str, str] = {name: "builtin" for name in BUILTIN_MODES}
    out.update({name: "registered" for name in _registered})
    for name, ep in _entry_points().items():
        out.setdefault(name, f"entry point {ep.value}")
    for name, path in _shipped_files().items():
        out.setdefault(name, str(path))
    return out


def _builtin(name: str, params: dict[str, Any]) -> PlacementPolicy:
    nodes = params.pop("nodes", None)
    flags = int(params.pop("flags", 0))
    home_node = int(params.pop("home_node", -1))
    if params:
        raise PolicyError(f"built-in policy {name!r} takes nodes=, flags=, home_node=; got {sorted(params)}")
    if name in ("default", "local") or nodes is None:
        if nodes is not None:
            raise PolicyError(f"built-in policy {name!r} takes no nodes")
        return KernelMode(name)
    node_set = frozenset(int(n) for n in _as_iterable(nodes, name))
    if not node_set:
        raise PolicyError(f"built-in policy {name!r}: nodes must not be empty")
    mode = BUILTIN_MODES[name]
    if mode == MPOL_PREFERRED:
        node_set = frozenset({min(node_set)})
    user = node_set if flags & (MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES) else frozenset()
    pol = MemPolicy(mode, flags, node_set, user_nodemask=user, home_node=home_node)
    return KernelMode(name, pol)


def _as_iterable(nodes: Any, name: str) -> Iterable[Any]:
    if isinstance(nodes, str):
        from numasim.topology.cpulist import parse_cpulist

        try:
            return parse_cpulist(nodes)
        except ValueError as exc:
            raise PolicyError(f"policy {name!r}: nodes {nodes!r} is not a node list like '0-3,5'") from exc
    if isinstance(nodes, int):
        return [nodes]
    return list(nodes)


def _instantiate(obj: Any, params: dict[str, Any], origin: str) -> PlacementPolicy:
    if isinstance(obj, ModuleType):
        if hasattr(obj, "make_policy"):
            obj = obj.make_policy
        elif hasattr(obj, "POLICY"):
            obj = obj.POLICY
        else:
            raise PolicyError(f"{origin}: defines neither make_policy(**params) nor POLICY")
    if isinstance(obj, PlacementPolicy) and not isinstance(obj, type):
        if params:
            raise PolicyError(f"{origin}: a ready policy instance takes no parameters, got {sorted(params)}")
        policy = obj
    elif callable(obj):
        try:
            policy = obj(**params)
        except TypeError as exc:
            raise PolicyError(f"{origin}: cannot build the policy with {params}: {exc}") from exc
    else:
        raise PolicyError(f"{origin}: {obj!r} is not a placement policy or a factory")
    if not isinstance(policy, PlacementPolicy):
        raise PolicyError(f"{origin}: built {policy!r}, which has no 'name' and 'place(ctx, count)'")
    return policy


def load_policy_file(path: str | Path, **params: Any) -> PlacementPolicy:
    """Import a policy module from a ``.py`` file and build its policy with ``params``."""
    p = Path(path)
    if not p.is_file():
        raise PolicyError(f"policy file {str(p)!r} does not exist")
    mod_name = f"numasim_policy_{p.stem}_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise PolicyError(f"policy file {str(p)!r} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(mod_name, None)
        raise PolicyError(f"policy file {str(p)!r} failed to import: {exc}") from exc
    return _instantiate(module, params, str(p))


def load_policy(spec: str | Path, **params: Any) -> PlacementPolicy:
    """A placement policy by built-in name, registered name, entry point, shipped example, or file path.

    Parameters
    ----------
    spec : str or Path
        ``"interleave"``, ``"bandwidth_interleave"``, ``"policies/cxl_tiering.py"``, ...
    **params
        Passed to the policy factory. Built-ins take ``nodes=`` (set, list or ``"0-3"``), ``flags=`` and
        ``home_node=``.
    """
    text = str(spec)
    if isinstance(spec, Path) or text.endswith(".py") or Path(text).is_file():
        return load_policy_file(text, **params)
    if text in BUILTIN_MODES:
        return _builtin(text, dict(params))
    if text in _registered:
        return _instantiate(_registered[text], params, f"registered policy {text!r}")
    eps = _entry_points()
    if text in eps:
        try:
            target = eps[text].load()
        except Exception as exc:
            raise PolicyError(f"entry point {text!r} ({eps[text].value}) failed to load: {exc}") from exc
        return _instantiate(target, params, f"entry point {text!r}")
    shipped = _shipped_files()
    if text in shipped:
        return load_policy_file(shipped[text], **params)
    raise PolicyError(f"no placement policy {text!r} (available: {', '.join(sorted(available_policies()))})")
