"""The simulated ``nproc`` that ``numasim machine exec`` puts first in ``PATH``: coreutils' nproc, on the machine.

coreutils' nproc (with gnulib's ``num_processors``) prints the number of cpus the calling process may run on,
``OMP_NUM_THREADS`` (its first value) instead when that is a positive number, at most ``OMP_THREAD_LIMIT`` when
that is one; ``--all`` prints the number of cpus installed and ignores both variables; ``--ignore=N`` (or
``--ignore N``) subtracts N, never going below 1. Its errors and exit status 1 are kept: ``nproc: invalid number:
'x'``, ``nproc: extra operand 'x'`` (followed by ``Try 'nproc --help' for more information.``).

The shim is a small ``sh`` script with the machine's counts written into it (the simulated machine has no cpu
hotplug), so it starts as fast as the real one. The cpus the caller may run on are every online cpu of the
machine, unless a shell it descends from pinned itself with ``taskset -p -c LIST $$`` on the machine
(:mod:`numasim.persist.shell_affinity`): then they are that list, as on a real box where the pinned shell's
children inherit its affinity. Only then does the shim start Python, to walk its real parent chain.
"""

from __future__ import annotations

import shlex
import stat
import sys
from pathlib import Path

from numasim.fileio import atomic_write_text
from numasim.persist.shell_affinity import FILE_NAME

__all__ = ["nproc_script", "write_nproc"]

_SCRIPT = r"""#!/bin/sh
# numasim: nproc of the simulated machine {name} (numasim machine exec); coreutils' options and messages
all={all}
current={current}
if [ -s {shells} ]; then  # a shell on this machine pinned itself (taskset -p -c LIST $$): the nearest one counts
  pinned=$(PYTHONPATH={source}${{PYTHONPATH:+:$PYTHONPATH}} {python} -c {lookup} {state} 2>/dev/null)
  [ -n "$pinned" ] && current=$pinned
fi
mode=current
ignore=0
try() {{ echo "Try 'nproc --help' for more information." >&2; exit 1; }}
while [ $# -gt 0 ]; do
  case $1 in
    --a|--al|--all) mode=all ;;
    --i=*|--ig=*|--ign=*|--igno=*|--ignor=*|--ignore=*) ignore=${{1#*=}} ;;
    --i|--ig|--ign|--igno|--ignor|--ignore)
      [ $# -gt 1 ] || {{ echo "nproc: option '--ignore' requires an argument" >&2; try; }}
      shift; ignore=$1 ;;
    --h|--he|--hel|--help)
      echo "Usage: nproc [OPTION]..."
      echo "Print the number of processing units available to the current process,"
      echo "which may be less than the number of online processors"
      echo
      echo "      --all      print the number of installed processors"
      echo "      --ignore=N  if possible, exclude N processing units"
      echo "      --help        display this help and exit"
      echo "      --version     output version information and exit"
      exit 0 ;;
    --v|--ve|--ver|--vers|--versi|--versio|--version) echo "nproc (GNU coreutils) 9.4 (numasim)"; exit 0 ;;
    --) shift; break ;;
    --*) echo "nproc: unrecognized option '$1'" >&2; try ;;
    -?*) echo "nproc: invalid option -- '$(printf %s "$1" | cut -c2)'" >&2; try ;;
    *) break ;;
  esac
  shift
done
[ $# -eq 0 ] || {{ echo "nproc: extra operand '$1'" >&2; try; }}
case $ignore in ''|*[!0-9]*) echo "nproc: invalid number: '$ignore'" >&2; exit 1 ;; esac
omp() {{  # gnulib parse_omp_threads: the first value of a comma list, blanks around it allowed; else 0
  v=$(printf %s "$1" | cut -d, -f1 | tr -d ' \t\n')
  case $v in ''|*[!0-9]*) echo 0 ;; *) echo "$v" ;; esac
}}
if [ "$mode" = all ]; then
  n=$all
else
  threads=$(omp "${{OMP_NUM_THREADS-}}")
  limit=$(omp "${{OMP_THREAD_LIMIT-}}")
  n=$current
  [ "$threads" -gt 0 ] && n=$threads
  [ "$limit" -gt 0 ] && [ "$limit" -lt "$n" ] && n=$limit
fi
if [ "$ignore" -lt "$n" ]; then n=$((n - ignore)); else n=1; fi
echo "$n"
"""


_LOOKUP = (
    "import sys; from pathlib import Path; from numasim.persist.shell_affinity import inherited; "
    "c = inherited(Path(sys.argv[1])); print(len(c) if c else '')"
)


def nproc_script(machine: str, all_cpus: int, current_cpus: int, state_dir: Path | None = None) -> str:
    """The shim's text for machine ``machine`` with ``all_cpus`` installed, ``current_cpus`` usable; with the
    machine's ``state_dir``, a pinned calling shell's affinity counts instead (module docstring)."""
    import numasim

    state = Path(state_dir) if state_dir is not None else Path("/nonexistent")
    return _SCRIPT.format(
        name=machine, all=int(all_cpus), current=int(current_cpus), shells=shlex.quote(str(state / FILE_NAME)),
        state=shlex.quote(str(state)), python=shlex.quote(sys.executable), lookup=shlex.quote(_LOOKUP),
        source=shlex.quote(str(Path(numasim.__file__).resolve().parents[1])),
    )


def write_nproc(directory: Path, machine: str, all_cpus: int, current_cpus: int, state_dir: Path | None = None) -> Path:
    """Write the executable ``directory/nproc``; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "nproc"
    atomic_write_text(path, nproc_script(machine, all_cpus, current_cpus, state_dir))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path
