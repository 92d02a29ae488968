"""Every flag an adapter passes exists in its release's argument parser, with a value where that parser takes one.

The images cannot be built here, so the parsers are read from their sources: ``scripts/dump-argparse.py`` dumped
each training script's ``add_argument`` calls at the commit the release's Dockerfile checks out
(tests/data/argparse/<framework>-<release>-<program>.json, with repository, commit and paths). A flag the parser
would only accept as argparse's abbreviation of a longer one (``--mom`` for ``--momentum``) is listed, and must
be one of ``ABBREVIATIONS``: an abbreviation breaks the day a second option starts the same way.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from dataclasses import dataclass, field

import pytest
import yaml

from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.frameworks import ADAPTERS, LaunchContext, get_adapter
from dlperf_core.frameworks.releases import release_named, releases_of
from dlperf_core.model import Case
from helpers import REPO

DUMPS = REPO / "tests" / "data" / "argparse"
_spec = importlib.util.spec_from_file_location("dump_argparse", REPO / "scripts" / "dump-argparse.py")
DUMPER = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(DUMPER)
TOPOLOGIES = ["1n1g", "1n8g", "2n8g"]

# (framework, release) -> {abbreviation passed: the option it stands for}
ABBREVIATIONS = {
    ("ngc_pytorch", "20.03"): {"--mom": "--momentum"},  # the seed's command line (seed 002 printed it)
    ("oneflow", "0.1.8"): {"--num_epoch": "--num_epochs"},  # the seed's local_run.sh (seed 003)
}

# framework -> (program in the dump's name, the script path that starts its arguments in an argv)
PROGRAMS = {
    "ngc_pytorch": [("multiproc", "/workspace/rn50/multiproc.py"), ("main", "/workspace/rn50/main.py")],
    "ngc_mxnet": [("train", "/workspace/rn50/train.py")],
    "oneflow": [("train", "/workspace/cnns/of_cnn_train_val.py")],
    # dlperf's own entry (docker/paddle-plsc/train.py); paddle.distributed.launch's flags are not dumped
    "paddle_plsc": [("train", "/workspace/PLSC/train.py")],
}
# releases whose programs differ from their framework's (a launcher dumped, dlperf's driver instead of the script)
RELEASE_PROGRAMS = {
    ("oneflow", "1.0.0"): [
        ("launch", "oneflow.distributed.launch"),  # Oneflow-Inc/oneflow v1.0.0
        ("train", "/workspace/cnns/of_cnn_train_val.py"),  # dlperf's driver (docker/oneflow-cpu/)
    ],
    # the model zoo's ResNet train.py of mindspore-ai/models r2.0 and d70060f3 (the seed's 1.1 model zoo is on gitee:
    # not dumped)
    ("mindspore", "2.0.0"): [("train", "/workspace/resnet/train.py")],
    ("mindspore", "2.3.1"): [("train", "/workspace/resnet/train.py")],
    ("paddle_plsc", "3.2.0"): [
        ("launch", "paddle.distributed.launch"),  # PaddlePaddle 3's launcher
        ("train", "/workspace/plsc/train.py"),  # PLSC 2.4's tools/train.py (its flags: plsc/utils/config.py)
    ],
}
# dumps read from another repository than the release's source (a launcher): (repo, commit)
OTHER_SOURCES = {
    # Paddle's repository cannot be mirrored here: its launcher's parser was read file by file at the one commit
    # the code index holds, not at the v3.2.0 tag (the dump's note and read_via say so)
    ("paddle_plsc", "3.2.0", "launch"): ("PaddlePaddle/Paddle", "076ae7ef30f75f06122e96d6bd073d702e7e4b6d"),
}
# programs whose sources are dlperf's own: their dump must be what the file in this repository declares now
OWN = {
    ("paddle_plsc", "1.8.5", "train"): "docker/paddle-plsc/train.py",
    ("oneflow", "1.0.0", "train"): "docker/oneflow-cpu/of_cnn_train_val.py",
}


def programs_of(framework: str, release: str) -> list[tuple[str, str]]:
    if (framework, release) in RELEASE_PROGRAMS:
        return RELEASE_PROGRAMS[(framework, release)]
    return PROGRAMS[framework]


def own_path(framework: str, release: str, program: str) -> str | None:
    return OWN.get((framework, release, program))


# the options each case varies over, per framework (besides precision and topology)
VARIANTS: dict[str, list[dict[str, object]]] = {
    "ngc_pytorch": [{}, {"loss_scale": "static"}, {"data_backend": "syntetic"}],
    "ngc_mxnet": [{}, {"data_backend": "synthetic"}],
    "oneflow": [{}, {"data_dir": ""}],
    "paddle_plsc": [{}, {"loss_type": "dist_softmax"}],
    "mindspore": [{}, {"data_sink_steps": 20}],
}


@dataclass
class Parser:
    """The options of one dump: option string -> (takes a value, nargs); the positional arguments' nargs."""

    options: dict[str, tuple[bool, object]]
    positionals: list[object]
    allow_abbrev: bool
    source: str
    abbreviations: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, framework: str, release: str, program: str) -> Parser:
        dump = json.loads((DUMPS / f"{framework}-{release}-{program}.json").read_text())
        assert dump["unresolved"] == [], f"{dump['script']}: calls the dump could not read: {dump['unresolved']}"
        options = {o: (a["takes_value"], a["nargs"]) for a in dump["arguments"] for o in a["options"]}
        positionals = [a["nargs"] for a in dump["arguments"] if a["positional"]]
        return cls(options, positionals, dump["allow_abbrev"], f"{dump['repo']}@{dump['commit'][:8]}")

    def resolve(self, flag: str) -> str | None:
        """The option ``flag`` names: itself, or the one option it abbreviates (recorded), else None."""
        if flag in self.options:
            return flag
        if not self.allow_abbrev or not flag.startswith("--"):
            return None
        matches = [o for o in self.options if o.startswith(flag)]
        if len(matches) == 1:
            self.abbreviations[flag] = matches[0]
            return matches[0]
        return None

    def problems(self, args: list[str]) -> list[str]:
        """What argparse would refuse in ``args`` (an option it has not, a missing value, extra positionals)."""
        out, positionals, i = [], 0, 0
        while i < len(args):
            token = args[i]
            i += 1
            if not token.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?(e-?\d+)?", token):
                positionals += 1
                continue
            name, eq, _ = token.partition("=")
            option = self.resolve(name)
            if option is None and not eq and not token.startswith("--") and len(token) > 2:
                option, eq = self.resolve(token[:2]), "attached"  # -j8: a short option with its value
            if option is None:
                out.append(f"{token}: no such option in {self.source}")
                continue
            takes_value, nargs = self.options[option]
            if eq:
                if not takes_value:
                    out.append(f"{token}: {option} takes no value")
                continue
            if not takes_value or nargs == "?":
                if nargs == "?" and i < len(args) and not args[i].startswith("-"):
                    i += 1
                continue
            if i >= len(args) or (args[i].startswith("-") and not re.fullmatch(r"-\d.*", args[i])):
                out.append(f"{token}: {option} expects a value")
                continue
            i += 1
            if nargs in ("+", "*"):
                while i < len(args) and not args[i].startswith("-"):
                    i += 1
        if "..." in self.positionals or "A..." in self.positionals:  # REMAINDER: checked as its own program
            return out
        if positionals > len(self.positionals):
            out.append(f"{positionals} positional arguments, the parser has {len(self.positionals)}")
        return out


def program_args(framework: str, argv: tuple[str, ...], script: str, following: str | None) -> list[str]:
    """The arguments of ``script`` in ``argv`` (up to the next program's script); mpirun's are in its shell line."""
    tokens = list(argv)
    if ADAPTERS[framework].launcher == "mpirun":
        tokens = shlex.split(argv[-1].splitlines()[-1])
    start = tokens.index(script) + 1
    end = tokens.index(following) if following else len(tokens)
    return tokens[start:end]


def cases(framework: str, release: str) -> list[Case]:
    adapter = ADAPTERS[framework]
    out = []
    for model, precision in ((m, p) for m in sorted(adapter.models) for p in sorted(adapter.precisions)):
        for topo in TOPOLOGIES:
            nodes, gpus = (int(x) for x in re.match(r"(\d+)n(\d+)g", topo).groups())
            for variant in VARIANTS[framework]:
                options = {**variant, "release": release}
                out.append(
                    Case(
                        framework=framework,
                        model=model,  # a model the GPU image does not train is refused, and skipped below
                        precision=precision,
                        batch_size_per_device=adapter.default_batch[precision],
                        nodes=nodes,
                        gpus_per_node=gpus,
                        warmup_iterations=adapter.default_warmup or 0,
                        measured_iterations=adapter.default_measured or 0,
                        options=tuple(sorted(options.items())),
                    )
                )
    return out


CHECKED = [(fw, r.name) for fw in PROGRAMS for r in releases_of(fw)] + [
    key for key in RELEASE_PROGRAMS if key[0] not in PROGRAMS
]


@pytest.mark.parametrize(("framework", "release"), CHECKED)
def test_every_flag_exists_in_the_release_parser(framework, release):
    cluster = load_inventory(REPO / "tests" / "data" / "seed-cluster.yaml")
    adapter = get_adapter(framework)
    ctx = LaunchContext(python="python3", workload_dir="/opt/dlperf/workload")
    programs = programs_of(framework, release)
    parsers = {program: Parser.load(framework, release, program) for program, _ in programs}
    checked = 0
    for case in cases(framework, release):
        nodes = cluster.first(case.nodes)
        if adapter.refuses(case, nodes):
            continue  # refused at planning, never launched
        for launch in adapter.launches(case, nodes, ctx):
            if launch.role == "sshd":
                continue
            for n, (program, script) in enumerate(programs):
                following = programs[n + 1][1] if n + 1 < len(programs) else None
                args = program_args(framework, launch.argv, script, following)
                assert parsers[program].problems(args) == [], f"{case.key}: {program} {shlex.join(args)}"
                checked += 1
    assert checked >= len(TOPOLOGIES)
    abbreviations = {k: v for p in parsers.values() for k, v in p.abbreviations.items()}
    assert abbreviations == ABBREVIATIONS.get((framework, release), {}), "abbreviated options passed"


@pytest.mark.parametrize(("framework", "release"), CHECKED)
def test_dumps_come_from_the_release_sources(framework, release):
    """Each dump was read at the commit the release's Dockerfile checks out (the catalog's source commit)."""
    rel = release_named(framework, release)
    for program, _ in programs_of(framework, release):
        dump = json.loads((DUMPS / f"{framework}-{release}-{program}.json").read_text())
        assert dump["generated_by"] == "scripts/dump-argparse.py" and dump["arguments"]
        assert re.fullmatch(r"[0-9a-f]{40}", dump["commit"])
        path = own_path(framework, release, program)
        if path:  # dlperf's own file: the dump is what it declares today
            found, unresolved, _ = DUMPER.arguments_of((REPO / path).read_text(), path)
            assert (found, unresolved) == (dump["arguments"], dump["unresolved"]), f"regenerate the dump of {path}"
            continue
        for resolved in dump.get("resolved_by_yaml", []):  # flags made of a config's keys: that config today
            first = next(yaml.safe_load_all((REPO / resolved["yaml"]).read_text()))
            keys = {f"--{k}" for k, v in first.items() if not isinstance(v, list | dict)}
            assert keys == {o for a in dump["arguments"] if a["path"] == resolved["yaml"] for o in a["options"]}
        repo, commit = OTHER_SOURCES.get((framework, release, program), (rel.source_repo, rel.source_commit))
        assert dump["commit"].startswith(commit), (dump["commit"], commit)
        assert dump["repo"] == repo


def test_the_checker_refuses_what_argparse_refuses():
    """The checker is able to fail: the seed's flags against DLE's last commit (what issue 35 found by hand)."""
    new = Parser.load("ngc_pytorch", "25.12", "main")
    problems = new.problems(["--dynamic-loss-scale", "-c", "fanin", "-b", "--lr", "1", "/data"])
    assert "--dynamic-loss-scale: no such option in NVIDIA/DeepLearningExamples@729963dd" in problems
    assert any(p.startswith("-c: no such option") for p in problems)
    assert "-b: -b expects a value" in problems
    new.problems(["--mom", "0.9", "/data"])
    assert new.abbreviations == {"--mom": "--momentum"}
    assert Parser.load("ngc_pytorch", "20.03", "main").problems(["-j8", "--amp", "/data", "/extra"]) == [
        "2 positional arguments, the parser has 1"
    ]
