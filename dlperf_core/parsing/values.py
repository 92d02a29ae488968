"""Small value readers shared by the format parsers: they never raise, a bad value is None."""

from __future__ import annotations

import re


def to_float(text: str | None) -> float | None:
    """``float(text)``, or None when it is missing or not a number."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def positive_int(text: str | None, max_digits: int = 9) -> int | None:
    """A positive decimal integer of at most ``max_digits`` digits (surrounding spaces allowed), else None."""
    text = text.strip() if text is not None else None
    if not text or not text.isdecimal() or len(text) > max_digits:
        return None
    return int(text) or None


def match_at(line: str, needle: str, rx: re.Pattern[str]) -> re.Match[str] | None:
    """``rx`` matched where ``needle`` first occurs in ``line`` (one anchored try: linear time)."""
    i = line.find(needle)
    return rx.match(line, i) if i >= 0 else None
