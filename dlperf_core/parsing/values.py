"""Small value readers shared by the format parsers: they never raise, a bad value is None."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timezone


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


MPIRUN_PREFIX = re.compile(r"[^\n\[]{0,40}\[\d{1,9},(\d{1,9})\]<std(?:out|err)>:")
"""An mpirun ``--tag-output`` prefix (``[1,3]<stderr>:``, maybe behind a date) at a line's start; group 1
is the rank."""


def anchored_matches(text: str, needle: str, rx: re.Pattern[str], tries: int) -> Iterator[tuple[re.Match[str], int]]:
    """``rx`` matched where ``needle`` occurs, on at most the first ``tries`` lines holding it (linear time:
    one anchored try per line); yields each match and the end of its line. Detectors use it."""
    start = 0
    for _ in range(tries):
        i = text.find(needle, start)
        if i < 0:
            return
        start = text.find("\n", i)
        end = len(text) if start < 0 else start
        m = rx.match(text, i, end)
        if m is not None:
            yield m, end
        if start < 0:
            return


def stamp_seconds(m: re.Match[str]) -> tuple[float | None, bool]:
    """Unix seconds (read as UTC) of a match whose groups are year, month, day, hour, minute, second and an
    optional fraction; and whether it has sub-second digits. (None, False) for no real date."""
    y, mo, d, h, mi, s, frac = m.groups()
    try:
        t = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None, False
    return (t + float("0." + frac), True) if frac else (t, False)
