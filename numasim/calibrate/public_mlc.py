"""Public mlc runs of machines the project never measured, and the catalog machine each is judged on.

Each case is one file under ``tests/data/measurements/public_mlc`` (mlc output transcribed from a public
source, the source and what it says of the machine in the file's header) and what the validation suite needs to
build its machine: the processor as the OS names it, the socket count and the NUMA nodes per socket of the idle
latency matrix, cores per socket and threads per core. The machine's timing numbers come from the platform
catalog (:func:`numasim.timing.catalog.catalog_machine`); nothing in the catalog was taken from these files, so
they are held-out data: never tune catalog numbers on them.

Examples
--------
>>> case = next(c for c in PUBLIC_MLC_CASES if c.file == "plantegg-2s-cascadelake-8269CY-snc2.md")
>>> m = public_machine(case)
>>> len(m.nodes), m.cpu_model
(4, 'Intel(R) Xeon(R) Platinum 8269CY CPU @ 2.50GHz')
"""

from __future__ import annotations

from dataclasses import dataclass

from numasim.topology.model import Machine
from numasim.units import GiB

__all__ = ["PublicMlcCase", "PUBLIC_MLC_CASES", "public_machine"]

@dataclass(frozen=True)
class PublicMlcCase:
    """One public mlc file and the machine layout its source states (see the file's header for the evidence)."""

    label: str
    file: str
    cpu: str
    """The processor as lscpu names it (what :func:`numasim.timing.catalog.match_cpu` reads)."""
    sockets: int
    nodes_per_socket: int
    cores_per_socket: int
    threads_per_core: int = 2
    turbo: bool = True
    """The cores ran at their all-core turbo (the firmware's default) unless the source says turbo was off."""
    cxl_socket: int | None = None
    """The socket a CXL memory expander hangs off (the last node of the run's tables), or None: no expander.
    Timed as the catalog's default device: the sources name none the catalog has."""

    @property
    def mode(self) -> str:
        """The builder's NUMA mode: ``SNCn`` on Intel, ``NPSn`` on AMD (``SNC1``/``NPS1``: one node a socket)."""
        from numasim.timing.catalog import match_cpu

        amd = match_cpu(self.cpu).platform.vendor == "amd"
        return f"{'NPS' if amd else 'SNC'}{self.nodes_per_socket}"


PUBLIC_MLC_CASES: tuple[PublicMlcCase, ...] = (
    PublicMlcCase("2x Xeon Platinum 8269CY (plantegg blog, mlc 3.9)", "plantegg-2s-cascadelake-8269CY.md",
                  "Intel(R) Xeon(R) Platinum 8269CY CPU @ 2.50GHz", 2, 1, 26),
    PublicMlcCase("2x Xeon Platinum 8269CY SNC2 (plantegg blog, mlc 3.9)", "plantegg-2s-cascadelake-8269CY-snc2.md",
                  "Intel(R) Xeon(R) Platinum 8269CY CPU @ 2.50GHz", 2, 2, 26),
    PublicMlcCase("2x Xeon E5-2682 v4 (plantegg blog, mlc 3.9)", "plantegg-2s-broadwell-E5-2682v4.md",
                  "Intel(R) Xeon(R) CPU E5-2682 v4 @ 2.50GHz", 2, 1, 16),
    PublicMlcCase("2x Xeon Platinum 8163 (plantegg blog, mlc 3.9)", "plantegg-2s-skylake-8163.md",
                  "Intel(R) Xeon(R) Platinum 8163 CPU @ 2.50GHz", 2, 1, 24),
    PublicMlcCase("2x Xeon Silver 4416+ (public README, mlc 3.11)", "spr-2s-silver-4416plus.md",
                  "Intel(R) Xeon(R) Silver 4416+", 2, 1, 20),
    PublicMlcCase("2x Xeon Silver 4410Y, HT off (CXL notes, mlc 3.9a)", "cxl-2s-spr-silver4410Y.md",
                  "Intel(R) Xeon(R) Silver 4410Y", 2, 1, 12, threads_per_core=1, turbo=False,
                  cxl_socket=1),
    PublicMlcCase("2x EPYC 9224 NPS2 (public notes, mlc 3.10+)", "cxl-2s-genoa-epyc9224-nps2.md",
                  "AMD EPYC 9224 24-Core Processor", 2, 2, 24, cxl_socket=0),
    PublicMlcCase("1x EPYC 9354P NPS4 (DRAMHiT notes, mlc 3.11b)", "dramhit-1s-genoa-epyc9354P-nps4.md",
                  "AMD EPYC 9354P 32-Core Processor", 1, 4, 32),
    PublicMlcCase("1x EPYC 9354P NPS1 (DRAMHiT notes, mlc 3.11b)", "dramhit-1s-genoa-epyc9354P-nps1.md",
                  "AMD EPYC 9354P 32-Core Processor", 1, 1, 32),
    PublicMlcCase("2x Xeon Gold 6142 (k-mer project README, mlc 3.8)", "kmer-2s-skylake-gold6142.md",
                  "Intel(R) Xeon(R) Gold 6142 CPU @ 2.60GHz", 2, 1, 16),
    PublicMlcCase("2x Xeon E5-2630 v3 (CloudLab c220g1, course write-up)", "cloudlab-2s-haswell-E5-2630v3.md",
                  "Intel(R) Xeon(R) CPU E5-2630 v3 @ 2.40GHz", 2, 1, 8),
    PublicMlcCase("2x Xeon Platinum 8360Y (CloudLab r650, course write-up)", "cloudlab-2s-icelake-8360Y.md",
                  "Intel(R) Xeon(R) Platinum 8360Y CPU @ 2.40GHz", 2, 1, 36),
    PublicMlcCase("2x Xeon Platinum 8360Y, turbo off (RDMA benchmark comment, mlc c2c)",
                  "rdma-2s-icelake-8360Y-turbooff-c2c.md", "Intel(R) Xeon(R) Platinum 8360Y CPU @ 2.40GHz", 2, 1, 36,
                  turbo=False),
    PublicMlcCase("2x Xeon Silver 4114 (CloudLab c220g5, course repo, mlc 3.11)", "cloudlab-2s-skylake-silver4114.md",
                  "Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz", 2, 1, 10),
    PublicMlcCase("2x Xeon E5-2697 v4 (Intel svr-info example, mlc 3.10)", "intel-2s-broadwell-E5-2697v4-ht.md",
                  "Intel(R) Xeon(R) CPU E5-2697 v4 @ 2.30GHz", 2, 1, 18),
    PublicMlcCase("2x Xeon E5-2697 v4, HT off (Intel svr-info example, mlc 3.10)", "intel-2s-broadwell-E5-2697v4-htoff.md",
                  "Intel(R) Xeon(R) CPU E5-2697 v4 @ 2.30GHz", 2, 1, 18, threads_per_core=1),
)
"""Every public mlc file the suite judges, in the order of ``tests/data/measurements/public_mlc/README.md``."""


def public_machine(case: PublicMlcCase) -> Machine:
    """The case's layout (sockets split into its NUMA nodes) timed with its processor's catalog priors.

    Memory per node only has to hold mlc's buffers; links, controllers and caches are the catalog's, and so is
    the CXL expander of a case that has one.
    """
    from numasim.timing.catalog import catalog_machine
    from numasim.topology.builders import multi_die

    stem = case.file.removesuffix(".md")
    layout = multi_die(
        case.sockets,
        case.mode,
        cores_per_socket=case.cores_per_socket,
        threads_per_core=case.threads_per_core,
        memory_bytes=64 * GiB,
        name=f"public-{stem}",
    )
    if case.cxl_socket is None:
        return catalog_machine(layout, case.cpu)
    return catalog_machine(layout, case.cpu, cxl_expanders=1, cxl_socket=case.cxl_socket)
