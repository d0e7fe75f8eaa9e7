"""Cpusets: the cpus and memory nodes a group of tasks may use (kernel/cgroup/cpuset.c, the parts placement sees).

Moving a task into a cpuset, or changing a cpuset's ``mems``, sets the tasks' ``mems_allowed`` and rebinds
their task policy and the policy of every VMA (``cpuset_change_task_nodemask`` -> ``mpol_rebind_task`` and
``mpol_rebind_mm``, see :func:`numasim.kernel.mempolicy.mpol_rebind_policy`). The allocator then filters nodes
by ``mems_allowed`` (``AllocRequest.mems_allowed``) once more than the root cpuset exists
(``cpusets_enabled()``).
"""

from __future__ import annotations

from dataclasses import dataclass

from numasim.kernel.mempolicy import mpol_rebind_policy
from numasim.kernel.task import Task

__all__ = ["Cpuset", "ROOT_CPUSET", "rebind_task"]

ROOT_CPUSET = "/"


@dataclass
class Cpuset:
    """A cpuset: a name, its cpus and memory nodes (``cpuset.cpus``, ``cpuset.mems``)."""

    name: str
    cpus: frozenset[int]
    mems: frozenset[int]


def rebind_task(task: Task, mems: frozenset[int]) -> None:
    """Give ``task`` the new ``mems_allowed`` and rebind its task and VMA policies to it."""
    task.mems_allowed = frozenset(mems)
    task.mempolicy = mpol_rebind_policy(task.mempolicy, mems)
    for vma in task.mm.vmas:
        vma.policy = mpol_rebind_policy(vma.policy, mems)
