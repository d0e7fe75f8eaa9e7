"""match_cpu: the OS's processor names, bare models and catalog names find the right platform and SKU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numasim.errors import CalibrationError
from numasim.timing.catalog import load_catalog, match_cpu, model_key

HWLOC = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "hwloc"
needs_data = pytest.mark.skipif(not HWLOC.is_dir(), reason="shared/data/hwloc not beside the checkout")

# The x86 CPUModel strings of the hwloc files and the platform each must resolve to.
HWLOC_X86 = {
    "Intel(R) Xeon(R) CPU E5-4640 0 @ 2.40GHz": "intel-sandy-bridge-ep",
    "Intel(R) Xeon(R) CPU E7- 4870  @ 2.40GHz": "intel-westmere-ex",
    "AMD Opteron(TM) Processor 6272                 ": "amd-opteron-bulldozer",
    "AMD Opteron(TM) Processor 6276                 ": "amd-opteron-bulldozer",
    "AMD Opteron(tm) Processor 6134": "amd-opteron-magny-cours",
    "Dual Core AMD Opteron(tm) Processor 865": "amd-opteron-k8",
    "Dual-Core AMD Opteron(tm) Processor 8218": "amd-opteron-k8-socket-f",
    "Intel(R) Xeon(R) CPU E5-2650 0 @ 2.00GHz": "intel-sandy-bridge-ep",
    "Intel(R) Xeon(R) CPU E5-2680 0 @ 2.70GHz": "intel-sandy-bridge-ep",
    "Intel(R) Xeon(R) CPU E5-2683 v3 @ 2.00GHz": "intel-haswell-ep",
    "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz": "intel-cascade-lake-sp",
    "Intel(R) Xeon(R) Platinum 8174 CPU @ 3.10GHz": "intel-skylake-sp",
    "Intel(R) Xeon(R) Silver 4108 CPU @ 1.80GHz": "intel-skylake-sp",
    "Quad-Core AMD Opteron(tm) Processor 8347 HE": "amd-opteron-k10",
}
# x86 CPUModel values that name no catalog part: an error naming the string is the right answer.
HWLOC_UNNAMED = {"AMD Engineering Sample", "06/57", "QEMU Virtual CPU version 2.5+"}
NOT_X86 = re.compile(r"POWER|Itanium|Madison")


def _hwloc_models() -> set[str]:
    found: set[str] = set()
    for f in HWLOC.glob("*.xml"):
        found |= set(re.findall(r'name="CPUModel" value="([^"]*)"', f.read_text(encoding="utf-8")))
    return found


@needs_data
def test_the_table_covers_every_x86_cpumodel_of_the_hwloc_files() -> None:
    models = _hwloc_models()
    x86 = {m for m in models if not NOT_X86.search(m)}
    assert x86 == set(HWLOC_X86) | HWLOC_UNNAMED


@pytest.mark.parametrize(("model", "platform"), sorted(HWLOC_X86.items()))
def test_every_x86_hwloc_cpumodel_resolves(model: str, platform: str) -> None:
    found = match_cpu(model)
    assert found.platform.name == platform
    assert found.sku is not None and found.how == "sku"


@pytest.mark.parametrize("model", sorted(HWLOC_UNNAMED))
def test_unnamed_parts_are_a_clear_error(model: str) -> None:
    with pytest.raises(CalibrationError, match=re.escape(repr(model))):
        match_cpu(model)


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz", "intel-cascade-lake-sp / Xeon Gold 6240"),
        ("CPU E5-2680 v2 @ 2.80GHz", "intel-ivy-bridge-ep / Xeon E5-2680 v2"),
        ("Intel(R) Xeon(R) CPU E5-2680 0 @ 2.70GHz", "intel-sandy-bridge-ep / Xeon E5-2680"),
        ("AMD EPYC 7452 32-Core Processor", "amd-epyc-rome / EPYC 7452"),
        ("Gold 6240", "intel-cascade-lake-sp / Xeon Gold 6240"),
        ("8180", "intel-skylake-sp / Xeon Platinum 8180"),
        ("EPYC 9654", "amd-epyc-genoa / EPYC 9654"),
        ("Intel(R) Xeon(R) Platinum 8480+", "intel-sapphire-rapids / Xeon Platinum 8480+"),
        ("intel-skylake-sp", "intel-skylake-sp"),
        ("  INTEL-SKYLAKE-SP ", "intel-skylake-sp"),
    ],
)
def test_spellings(text: str, label: str) -> None:
    assert match_cpu(text).label == label


def test_a_version_suffix_is_not_swallowed() -> None:
    # E5-2680 (Sandy Bridge) must not answer for an E5-2680 v9 that does not exist.
    with pytest.raises(CalibrationError, match=r"E5-2680 V9.*closest: .*E5-2680 V4"):
        match_cpu("Intel Xeon E5-2680 v9")


def test_a_cpuid_family_model_pair_is_not_matched_as_digits() -> None:
    """hwloc's CPUModel without a brand string ("06/57": family 6, model 0x57) is said to be one, and no
    digit-alike SKU is suggested (it used to offer Granite Rapids' 6527P for a Knights Landing)."""
    with pytest.raises(CalibrationError, match=r"family 6, model 0x57\): Xeon Phi x200 \(Knights Landing\)") as err:
        match_cpu("06/57")
    assert "closest" not in str(err.value)
    with pytest.raises(CalibrationError, match=r"family 6, model 0x55\), not a processor model.*--cpu"):
        match_cpu("06/55")


def test_unlisted_sku_of_a_known_family_finds_its_platform() -> None:
    found = match_cpu("Intel(R) Xeon(R) CPU E5-2699A v4 @ 2.40GHz")
    assert (found.platform.name, found.sku, found.how) == ("intel-broadwell-ep", None, "pattern")
    assert match_cpu("AMD EPYC 7F72 24-Core Processor").platform.name == "amd-epyc-rome"


@pytest.mark.parametrize(("text", "platform"), [
    # Cooper Lake's H and HL parts share Ice Lake-SP's numbers (83xx, 63xx, 53xx): the suffix tells them apart
    ("Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz", "intel-cooper-lake"),
    ("Intel(R) Xeon(R) Platinum 8397HL CPU @ 2.00GHz", "intel-cooper-lake"),  # (unlisted: by its pattern)
    ("Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", "intel-ice-lake-sp"),
    ("Intel(R) Xeon(R) Gold 6397 CPU @ 2.30GHz", "intel-ice-lake-sp"),  # (unlisted)
    ("Intel(R) Xeon(R) CPU E7-8890 v3 @ 2.50GHz", "intel-haswell-ex"),
    ("Intel(R) Xeon(R) CPU E7-8890 v4 @ 2.20GHz", "intel-broadwell-ex"),
    ("Intel(R) Xeon(R) CPU           X7560  @ 2.27GHz", "intel-nehalem-ex"),
    ("Intel(R) Xeon(R) CPU D-1541 @ 2.10GHz", "intel-broadwell-de"),
    ("Intel(R) Xeon(R) D-2146NT CPU @ 2.30GHz", "intel-skylake-d"),
    ("Intel(R) Xeon(R) D-2796NT CPU @ 2.00GHz", "intel-ice-lake-d"),
    ("Intel(R) Atom(TM) CPU C3858 @ 2.00GHz", "intel-denverton"),
    ("Intel(R) Atom(TM) P5362 processor", "intel-snow-ridge"),  # (unlisted)
    ("Intel(R) Xeon(R) 6780E", "intel-sierra-forest"),
    ("Intel(R) Xeon(R) 6787P", "intel-granite-rapids-sp"),
    ("Intel(R) Xeon(R) 6980P", "intel-granite-rapids"),
    ("AMD EPYC 8534P 64-Core Processor", "amd-epyc-siena"),
    ("AMD EPYC 4564P 16-Core Processor", "amd-epyc-4004"),
    ("AMD EPYC 4585PX 16-Core Processor", "amd-epyc-4005"),
    ("Intel(R) Xeon(R) CPU E5-2420 0 @ 1.90GHz", "intel-sandy-bridge-en"),
    ("Intel(R) Xeon(R) CPU E5-2470 v2 @ 2.40GHz", "intel-ivy-bridge-en"),
    ("AMD Opteron(tm) Processor 4180", "amd-opteron-lisbon"),
    ("AMD Opteron(tm) Processor 4386", "amd-opteron-valencia"),
    ("AMD EPYC 3251 8-Core Processor", "amd-epyc-3000"),
    ("Intel(R) Xeon(R) CPU Max 9462", "intel-sapphire-rapids-hbm"),
    ("Intel(R) Xeon(R) W-2145 CPU @ 3.70GHz", "intel-skylake-w"),
    ("Intel(R) Xeon(R) W-3275M CPU @ 2.50GHz", "intel-cascade-lake-w"),
    ("Intel(R) Xeon(R) W-3375 CPU @ 2.50GHz", "intel-ice-lake-w"),
    ("Intel(R) Xeon(R) w9-3495X", "intel-sapphire-rapids-w"),
    ("Intel(R) Xeon(R) CPU E3-1230 V2 @ 3.30GHz", "intel-ivy-bridge-e3"),
    ("Intel(R) Xeon(R) CPU E3-1270 v6 @ 3.80GHz", "intel-skylake-e3"),
    ("Intel(R) Xeon(R) E-2288G CPU @ 3.70GHz", "intel-coffee-lake-e"),
    ("Intel(R) Xeon(R) CPU           X3470  @ 2.93GHz", "intel-nehalem-1s"),
    ("Intel(R) Xeon(R) CPU           W3690  @ 3.47GHz", "intel-westmere-1s"),
    # cloud providers' own parts put a letter in the second place, as the Rome and Milan patterns allowed
    ("AMD EPYC 9R14 96-Core Processor", "amd-epyc-genoa"),
    ("AMD EPYC 9B14 96-Core Processor", "amd-epyc-genoa"),
    ("AMD EPYC 9R45 192-Core Processor", "amd-epyc-turin"),
    # Bergamo's 97x4 (Zen 4c: two complexes a die) is not Genoa, listed or not
    ("AMD EPYC 9754 128-Core Processor", "amd-epyc-bergamo"),
    ("AMD EPYC 9744 128-Core Processor", "amd-epyc-bergamo"),
])
def test_the_parts_beside_the_main_server_lines_find_their_platform(text: str, platform: str) -> None:
    """Xeon D, Atom, the EX lines, Cooper Lake, Xeon 6 and the single-socket EPYCs: an importer given one of
    these used to stop at "not in the platform catalog" (or, for Cooper Lake, take Ice Lake-SP's 8 channels)."""
    assert match_cpu(text).platform.name == platform


def test_vendor_words_keep_vendors_apart() -> None:
    assert match_cpu("AMD Opteron 6174").platform.vendor == "amd"
    with pytest.raises(CalibrationError, match="not in the platform catalog"):
        match_cpu("Intel Xeon 6174")


def test_unknown_names_the_string_and_close_matches() -> None:
    with pytest.raises(CalibrationError) as err:
        match_cpu("Intel Xeon E5-2690 v9")
    assert "'Intel Xeon E5-2690 v9'" in str(err.value) and "E5-2690 V4" in str(err.value)
    with pytest.raises(CalibrationError, match="'Intel Xeon Phi 7250'"):
        match_cpu("Intel Xeon Phi 7250")


ALL_SKUS = [(p.name, s.model) for p in load_catalog() for s in p.skus]


@settings(max_examples=150, deadline=None)
@given(
    pick=st.sampled_from(ALL_SKUS),
    pad=st.sampled_from(["", " ", "   "]),
    case=st.sampled_from([str.upper, str.lower, lambda s: s]),
    vendor=st.booleans(),
    clock=st.sampled_from(["", " @ 2.40GHz", " CPU @ 3.10GHz", " Processor"]),
)
def test_os_style_variations_of_every_sku_resolve_to_it(pick, pad, case, vendor, clock) -> None:  # type: ignore[no-untyped-def]
    platform, model = pick
    brand = ("Intel(R) " if platform.startswith("intel") else "AMD ") if vendor else ""
    text = pad + case(brand + model.replace("Xeon", "Xeon(R)") + clock) + pad
    found = match_cpu(text)
    assert (found.platform.name, found.sku.model if found.sku else None) == (platform, model)


def test_model_key_strips_only_noise() -> None:
    assert model_key("Quad-Core AMD Opteron(tm) Processor 8347 HE") == "OPTERON 8347 HE"
    assert model_key("Intel(R) Xeon(R) CPU E7- 4870  @ 2.40GHz") == "E7-4870"


@pytest.mark.parametrize(("text", "says"), [
    ("intel-sky", "'intel-sky' is part of the platform name(s) intel-skylake-e3, intel-skylake-sp, intel-skylake-w, intel-skylake-d"),
    ("rome", "part of the platform name(s) amd-epyc-rome"),
    ("Xeon", "cpu 'Xeon' names no model (a brand alone)"),
])
def test_a_part_of_a_name_or_a_brand_alone_gets_an_error_that_says_what_to_give(text: str, says: str) -> None:
    """They read "(model '-SKY') is not in the platform catalog" and "(model '')", which named nothing to try."""
    with pytest.raises(CalibrationError, match=re.escape(says)):
        match_cpu(text)
