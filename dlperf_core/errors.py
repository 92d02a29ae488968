"""Errors that reach users: each names the file and the field at fault."""

from __future__ import annotations

from pydantic import ValidationError


class ConfigError(ValueError):
    """A suite, inventory or trigger form that is refused before any work starts."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = list(problems)
        lines = "\n".join(f"  {source}: {p}" for p in self.problems)
        super().__init__(f"invalid {source} ({len(self.problems)} problem(s)):\n{lines}")


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def format_validation_error(exc: ValidationError) -> list[str]:
    """Turn pydantic's errors into ``field.path: message`` lines."""
    problems = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        problems.append(f"{_loc(loc)}: {msg}")
    return problems
