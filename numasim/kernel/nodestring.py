"""numactl's node and cpu list grammar (libnuma ``__numa_parse_nodestring`` / ``__numa_parse_cpustring``).

Re-implements numactl/libnuma.c (``get_nr``, ``__numa_parse_nodestring``, ``__numa_parse_cpustring``) and
the I/O-affinity prefixes of numactl/affinity.c, character for character where it shows:

* ``""`` is a valid, empty mask;
* an optional ``!`` (invert over ``0 .. configured-1``) then an optional ``+`` (numbers are ordinals in the
  allowed set, "cpuset-relative");
* items ``N`` or ``A-B`` separated by commas, numbers read like ``strtoul(s, &end, 0)`` (``0x10`` hex, ``010``
  octal, leading blanks and a sign accepted); every number must be in the allowed set, else the libnuma
  warning ``node argument N is out of range``; inside a range only allowed ids are set; ``B < A`` sets only A;
* ``all`` copies the allowed set and must be the rest of the string (``1,all`` works, ``all,1`` does not);
* ``netdev:DEV``, ``block:DEV``, ``pci:ID``, ``ip:HOST``, ``file:PATH`` name a device and take its node;
* a trailing comma or any trailing garbage makes the whole string invalid.

A failed parse raises :class:`NodeStringError`; its ``warning`` is the exact libnuma warning text (or ``None``
where libnuma fails silently, e.g. trailing garbage), which numactl prints on stderr as
``libnuma: Warning: <text>``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from numasim.errors import PolicyError

__all__ = [
    "NodeStringError",
    "ParseContext",
    "parse_nodestring",
    "parse_cpustring",
    "strtoul",
    "DEFAULT_NODEMASK_BITS",
]

DEFAULT_NODEMASK_BITS = 1024
"""Size of libnuma's node bitmask on an x86_64 distribution kernel (MAX_NUMNODES, read from Mems_allowed)."""

_ULONG = 1 << 64


class NodeStringError(PolicyError):
    """A node or cpu string numactl rejects.

    ``warning`` is libnuma's message exactly as formatted (without the ``libnuma: Warning: `` prefix, and
    with the format's own trailing newline when it has one, which makes numactl print a blank line), or None.
    """

    def __init__(self, text: str, warning: str | None) -> None:
        self.text = text
        self.warning = warning
        super().__init__(f"<{text}> is invalid" + (f" ({warning.rstrip()})" if warning else ""))


@dataclass(frozen=True)
class ParseContext:
    """What libnuma knows when it parses a list.

    Parameters
    ----------
    allowed : frozenset of int
        ``numa_all_nodes_ptr`` (memory nodes of the task's cpuset) or, with ``numactl --all``, the possible nodes;
        for cpus the task's ``Cpus_allowed`` or all configured cpus.
    configured : int
        ``numa_num_configured_nodes()`` (a count of node directories) or ``numa_num_configured_cpus()``:
        ``!`` inverts over ``0 .. configured-1``.
    mask_bits : int
        Size of the bitmask; a relative ``+N`` past the allowed set resolves to this value.
    devices : callable, optional
        ``devices(kind, name) -> node or None`` for the I/O-affinity prefixes (kind = ``netdev``, ``block``,
        ``pci``, ``ip``, ``file``).
    """

    allowed: frozenset[int]
    configured: int
    mask_bits: int = DEFAULT_NODEMASK_BITS
    devices: Callable[[str, str], int | None] | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls, allowed: Iterable[int], configured: int, mask_bits: int = DEFAULT_NODEMASK_BITS
    ) -> ParseContext:
        return cls(frozenset(allowed), configured, mask_bits)


def strtoul(s: str, pos: int = 0) -> tuple[int, int]:
    """C ``strtoul(s + pos, &end, 0)``: returns ``(value, end)``; ``end == pos`` when nothing was converted.

    Examples
    --------
    >>> strtoul("0x10,3")
    (16, 4)
    >>> strtoul("010")
    (8, 3)
    >>> strtoul("-1")[0] == 2**64 - 1
    True
    >>> strtoul("abc")
    (0, 0)
    """
    i = pos
    n = len(s)
    while i < n and s[i] in " \t\n\v\f\r":
        i += 1
    negative = False
    if i < n and s[i] in "+-":
        negative = s[i] == "-"
        i += 1
    base = 10
    if i < n and s[i] == "0":
        if i + 2 < n and s[i + 1] in "xX" and s[i + 2] in "0123456789abcdefABCDEF":
            base = 16
            i += 2
        else:
            base = 8
    digits = "0123456789abcdef"[:base]
    start = i
    value = 0
    while i < n and s[i].lower() in digits:
        value = value * base + digits.index(s[i].lower())
        i += 1
    if i == start:
        return 0, pos
    if value >= _ULONG:
        value = _ULONG - 1
    elif negative:
        value = (-value) % _ULONG
    return value, i


def _signed(value: int) -> int:
    # printf("%ld") of an unsigned long
    return value - _ULONG if value >= 1 << 63 else value


def _get_nr(s: str, pos: int, ctx: ParseContext, relative: bool) -> tuple[int, int]:
    value, end = strtoul(s, pos)
    if not relative or end == pos:
        return value, end
    nr = _signed(value)
    if nr < 0:
        return _ULONG - 1, end
    # the nr-th set bit of the allowed set; past its end libnuma lands on mask_bits
    ordered = sorted(b for b in ctx.allowed if b < ctx.mask_bits)
    return (ordered[nr] if nr < len(ordered) else ctx.mask_bits), end


def _resolve_device(text: str, ctx: ParseContext, what: str) -> set[int] | None:
    """``resolve_affinity``: ``None`` when ``text`` has no I/O prefix; raises when the device is unknown."""
    for prefix, cls in (
        ("netdev:", "net"),
        ("ip:", None),
        ("file:", None),
        ("block:", "block"),
        ("pci:", None),
    ):
        if text.startswith(prefix):
            dev = text[len(prefix) :].lstrip()
            node = ctx.devices(prefix[:-1], dev) if ctx.devices is not None else None
            if node is None:
                if cls is not None:
                    raise NodeStringError(text, f"Cannot read node mask for {cls} device `{dev}'")
                raise NodeStringError(text, f"Cannot resolve {prefix[:-1]} `{dev}'")
            if node < 0:
                raise NodeStringError(text, f"Kernel does not know node for {dev}\n")
            return {node}
    return None


def _parse(text: str, ctx: ParseContext, what: str) -> frozenset[int]:
    if text == "":
        return frozenset()
    s = text
    i = 0
    invert = relative = False
    if s[i : i + 1] == "!":
        invert = True
        i += 1
    if s[i : i + 1] == "+":
        relative = True
        i += 1
    mask: set[int] = set()
    allowed = ctx.allowed
    while True:
        rest = s[i:]
        if rest == "all":
            mask = set(allowed)
            i = len(s) + 1  # s += 4: one past the terminating NUL
            break
        if what == "node" and rest[:1].isalpha():
            dev = _resolve_device(rest, ctx, what)
            if dev is not None:
                mask |= dev
                i = len(s) + 1
                break
        arg, end = _get_nr(s, i, ctx, relative)
        if end == i:
            raise NodeStringError(text, f"unparseable {what} description `{rest}'\n")
        if arg >= ctx.mask_bits or arg not in allowed:
            if what == "node":
                raise NodeStringError(text, f"node argument {_signed(arg)} is out of range\n")
            raise NodeStringError(text, f"cpu argument {rest} is out of range\n")
        mask.add(arg)
        i = end
        if s[i : i + 1] == "-":
            i += 1
            arg2, end2 = _get_nr(s, i, ctx, relative)
            if end2 == i:
                raise NodeStringError(text, f"missing {what} argument {s[i:]}\n")
            if arg2 >= ctx.mask_bits or arg2 not in allowed:
                if what == "node":
                    raise NodeStringError(text, f"node argument {_signed(arg2)} out of range\n")
                raise NodeStringError(text, f"cpu argument {s[i:]} out of range\n")
            mask.update(b for b in allowed if arg <= b <= arg2)
            i = end2
        # do { ... } while (*s++ == ',')
        c = s[i] if i < len(s) else "\0"
        i += 1
        if c != ",":
            break
    last = s[i - 1] if i - 1 < len(s) else "\0"
    if last != "\0":
        raise NodeStringError(text, None)
    if invert:
        universe = set(range(ctx.configured))
        mask = (universe - mask) | (mask - universe)
    return frozenset(mask)


def parse_nodestring(text: str, ctx: ParseContext) -> frozenset[int]:
    """Parse a numactl node list against ``ctx`` (``numa_parse_nodestring`` / ``..._all``).

    Examples
    --------
    >>> ctx = ParseContext.of({0, 1, 2, 3}, configured=4)
    >>> sorted(parse_nodestring("0-1,3", ctx)), sorted(parse_nodestring("!0", ctx)), sorted(parse_nodestring("+1", ctx))
    ([0, 1, 3], [1, 2, 3], [1])
    >>> parse_nodestring("7", ctx)
    Traceback (most recent call last):
    ...
    numasim.kernel.nodestring.NodeStringError: <7> is invalid (node argument 7 is out of range)
    """
    return _parse(text, ctx, "node")


def parse_cpustring(text: str, ctx: ParseContext) -> frozenset[int]:
    """Parse a numactl cpu list (``numa_parse_cpustring``); same grammar, cpu wording, no device prefixes.

    Examples
    --------
    >>> sorted(parse_cpustring("0-2,5", ParseContext.of(range(8), configured=8)))
    [0, 1, 2, 5]
    """
    return _parse(text, ctx, "cpu")
