"""docs/frameworks.md's release table says what the release catalogue (dlperf_core/frameworks/releases.py) says:
every release, its role, image, CUDA, GPU generations, minimum driver and sources, row for row."""

from __future__ import annotations

from dlperf_core.frameworks.releases import DEFAULT_RELEASE, RELEASES, Release
from helpers import REPO

HEADER = "| Framework | Release | Image (from) | CUDA | GPU generations | Minimum driver | Source |"


def row(r: Release) -> str:
    role = ", ".join(
        word for word, yes in (("seed", r.seed), ("default", DEFAULT_RELEASE[r.framework] == r.name)) if yes
    )
    driver = r.min_driver or "unverified"
    if r.compat_drivers:
        driver += " (data center GPUs: " + ", ".join(f"{low}+" for _, low in r.compat_drivers) + ")"
    name = f"`{r.name}` ({role})" if role else f"`{r.name}`"
    return (
        f"| `{r.framework}` | {name} | `{r.image}` from `{r.base_image}` | {r.cuda} | {r.generations}"
        f" | {driver} | {r.sources} |"
    )


def test_the_release_table_is_the_catalogue():
    lines = (REPO / "docs" / "frameworks.md").read_text().splitlines()
    start = lines.index(HEADER) + 2  # after the header and its |---| line
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    assert lines[start:end] == [row(r) for r in RELEASES]


def test_every_default_and_seed_release_is_in_the_catalogue():
    assert {r.framework for r in RELEASES} == set(DEFAULT_RELEASE)
    for framework, name in DEFAULT_RELEASE.items():
        assert any(r.framework == framework and r.name == name for r in RELEASES)
    assert all(any(r.seed for r in RELEASES if r.framework == f) for f in DEFAULT_RELEASE)
