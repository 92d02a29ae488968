"""Small value readers shared by the format parsers: they never raise, a bad value is None. And the fast
literal searches the detectors and the text failure rules use (``find_literal``, ``search_literal``)."""

from __future__ import annotations

import re
from calendar import monthrange
from collections.abc import Iterator
from datetime import MAXYEAR, MINYEAR, UTC, datetime
from typing import TypeVar

_Text = TypeVar("_Text", str, bytes)


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


def anchored_matches(
    text: str, needle: str, rx: re.Pattern[str], tries: int, rare: str | None = None
) -> Iterator[tuple[re.Match[str], int]]:
    """``rx`` matched where ``needle`` occurs, on at most the first ``tries`` lines holding it (linear time:
    one anchored try per line); yields each match and the end of its line. Detectors use it. ``rare``: a
    character of ``needle`` that is rare in logs, to find it with ``find_literal``."""
    start = 0
    for _ in range(tries):
        i = find_literal(text, needle, rare, start) if rare else text.find(needle, start)
        if i < 0:
            return
        start = text.find("\n", i)
        end = len(text) if start < 0 else start
        m = rx.match(text, i, end)
        if m is not None:
            yield m, end
        if start < 0:
            return


def utc_minute(year: int, month: int, day: int, hour: int, minute: int) -> float | None:
    """Unix seconds of that minute read as UTC, None when it is no real time (what ``datetime`` refuses)."""
    if not (MINYEAR <= year <= MAXYEAR and 1 <= month <= 12 and 0 <= hour <= 23 and 0 <= minute <= 59):
        return None
    if not 1 <= day <= monthrange(year, month)[1]:
        return None
    return datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()


_MINUTE_STARTS: dict[tuple[str, str, str, str, str], float] = {}
"""Unix seconds of the minutes ``stamp_seconds`` has read, by their (year, month, day, hour, minute) texts:
the lines of a log share few minutes, and building a ``datetime`` costs more than the rest of the work."""


def stamp_seconds(m: re.Match[str]) -> tuple[float | None, bool]:
    """Unix seconds (read as UTC) of a match whose groups are year, month, day, hour, minute, second and an
    optional fraction; and whether it has sub-second digits. (None, False) for no real time."""
    y, mo, d, h, mi, s, frac = m.groups()
    minute = _MINUTE_STARTS.get((y, mo, d, h, mi))
    if minute is None:
        minute = utc_minute(int(y), int(mo), int(d), int(h), int(mi))
        if minute is None:
            return None, False
        if len(_MINUTE_STARTS) >= 4096:
            _MINUTE_STARTS.clear()
        _MINUTE_STARTS[(y, mo, d, h, mi)] = minute
    second = int(s)
    if second > 59:
        return None, False
    t = minute + second  # whole seconds: exactly what datetime(...).timestamp() gives
    return (t + float("0." + frac), True) if frac else (t, False)


def jump_tries(text: str | bytes) -> int:
    """How many candidates a fast search checks one by one before one plain scan takes over: occurrences of
    a rare character (``find_literal``, ``search_literal``), or literals a detector verifies with a regex:
    16, plus one per 4 KB of text. A check costs about what a substring scan spends on half a KB, so where
    candidates are common the checks add a few microseconds and about an eighth to the plain scan; where
    they are rare (the usual case) they save nearly all of it (10-50 x faster)."""
    return 16 + (len(text) >> 12)


def find_literal(text: _Text, needle: _Text, rare: _Text | None = None, start: int = 0) -> int:
    """``text.find(needle, start)`` (str or bytes), found by jumping with memchr between occurrences of the
    character ``rare`` of ``needle`` (default its first): pick one that is rare in logs (an upper-case letter,
    a bracket) and most texts are crossed in a few memchr calls instead of a substring scan. After
    ``jump_tries`` occurrences that start no ``needle``, ``text.find`` finishes the search."""
    at = needle.index(rare) if rare else 0
    char = needle[at : at + 1]
    i = text.find(char, start + at)
    tries = jump_tries(text)
    while i >= 0:
        if text.startswith(needle, i - at):
            return i - at
        tries -= 1
        if not tries:
            return text.find(needle, i - at + 1)
        i = text.find(char, i + 1)
    return -1


def search_literal(
    text: str, rx: re.Pattern[str], needle: str, rare: str | None = None, pos: int = 0
) -> re.Match[str] | None:
    """``rx.search(text, pos)`` for an ``rx`` whose every match starts with the literal ``needle``: ``rx`` is
    tried only where ``needle`` starts, found by jumping between occurrences of its character ``rare`` as in
    ``find_literal``; after ``jump_tries`` occurrences that start no match, ``rx.search`` finishes the search
    (the regex engine scans for a literal prefix itself, just more slowly than memchr)."""
    at = needle.index(rare) if rare else 0
    char = needle[at : at + 1]
    i = text.find(char, pos + at)
    tries = jump_tries(text)
    while i >= 0:
        if text.startswith(needle, i - at):
            m = rx.match(text, i - at)
            if m is not None:
                return m
        tries -= 1
        if not tries:
            return rx.search(text, i - at + 1)
        i = text.find(char, i + 1)
    return None


def literal_starts(text: str, needle: str, rare: str | None = None) -> Iterator[int]:
    """Every start of ``needle`` in ``text``, in order (``find_literal`` again and again)."""
    at = find_literal(text, needle, rare)
    while at >= 0:
        yield at
        at = find_literal(text, needle, rare, at + 1)


def literal_matches(text: str, rx: re.Pattern[str], needle: str, rare: str | None = None) -> Iterator[re.Match[str]]:
    """A match of ``rx`` at every start of ``needle`` where it matches, in order (``search_literal`` again and
    again; matches may overlap)."""
    m = search_literal(text, rx, needle, rare)
    while m is not None:
        yield m
        m = search_literal(text, rx, needle, rare, m.start() + 1)
