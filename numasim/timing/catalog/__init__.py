"""The platform catalog: processor generations with what the timing model needs, each number with its source.

One TOML file per platform under ``data/`` (Intel Xeon from Nehalem-EP to Granite Rapids, AMD Opteron K8 to
EPYC Turin): caches, memory channels and DDR speed, NUMA modes, socket links, core limits, public idle-latency
and bandwidth-efficiency measurements, and SKUs. :func:`match_cpu` finds an entry from the OS's processor
name; :func:`catalog_calibration` builds a complete, clearly labelled ``method="catalog"`` calibration from it
for a machine nothing was measured on. A CXL section (``data/cxl/devices.toml``, :func:`load_cxl_catalog`)
holds CXL links over PCIe 5.0 and Type-3 memory expanders, so a CXL memory node is timed from priors too.

Examples
--------
>>> match_cpu("Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz").label
'intel-ivy-bridge-ep / Xeon E5-2680 v2'
>>> len(load_catalog()) >= 24
True
"""

from numasim.timing.catalog.calibration import CatalogFigures, catalog_calibration, catalog_figures
from numasim.timing.catalog.cxl import CxlCatalog, CxlDevice, CxlLatency, CxlLinkSpec, load_cxl_catalog
from numasim.timing.catalog.cxl_timing import CxlFigures, cxl_figures
from numasim.timing.catalog.loader import get_platform, load_catalog, parse_platform_toml, platform_names
from numasim.timing.catalog.machine import catalog_machine
from numasim.timing.catalog.match import CatalogMatch, match_cpu, model_key
from numasim.timing.catalog.model import (
    CacheSpec,
    CoreLimits,
    CxlSupport,
    EfficiencyPrior,
    LatencyPrior,
    LinkSpec,
    MemorySpec,
    NumaMode,
    Platform,
    Sku,
    Source,
    StreamPrior,
)
from numasim.timing.catalog.modes import mode_offer, mode_offer_for_cpu

__all__ = [
    "CacheSpec",
    "CatalogFigures",
    "CatalogMatch",
    "CoreLimits",
    "CxlCatalog",
    "CxlDevice",
    "CxlFigures",
    "CxlLatency",
    "CxlLinkSpec",
    "CxlSupport",
    "EfficiencyPrior",
    "StreamPrior",
    "LatencyPrior",
    "LinkSpec",
    "MemorySpec",
    "NumaMode",
    "Platform",
    "Sku",
    "Source",
    "catalog_calibration",
    "catalog_figures",
    "catalog_machine",
    "cxl_figures",
    "get_platform",
    "load_catalog",
    "load_cxl_catalog",
    "match_cpu",
    "mode_offer",
    "mode_offer_for_cpu",
    "model_key",
    "parse_platform_toml",
    "platform_names",
]
