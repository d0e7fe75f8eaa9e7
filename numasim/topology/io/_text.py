"""Reading a machine file's text: an unreadable or undecodable file is a FormatError naming it."""

from __future__ import annotations

from pathlib import Path

from numasim.errors import FormatError


def read_machine_text(path: str | Path) -> tuple[str, str]:
    """(the path as the errors name it, the file's UTF-8 text)."""
    p = Path(path)
    try:
        return str(p), p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(str(p), f"cannot read: {exc}") from None
