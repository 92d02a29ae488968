"""How each adapter says a case's model was shrunk by its extra arguments (FrameworkAdapter.model_shape), for
every framework of suites/seeds-cpu.yaml with that suite's own extra_args, and the flag reading behind it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf_core.frameworks import ADAPTERS, ModelShape, get_adapter
from dlperf_core.frameworks.shape import FullSize, flag_values, overrides, shape_against
from dlperf_core.plan.suite import load_suite

REPO = Path(__file__).resolve().parents[3]
SEEDS_CPU = load_suite(REPO / "suites" / "seeds-cpu.yaml")

# framework -> what its seeds-cpu entry trains, as the reports will say it (read from the drivers' flags:
# docker/mindspore-cpu/train.py, docker/ngc-mxnet-cpu/train.py, dlperf_core/workload/train.py,
# docker/oneflow-cpu/of_cnn_train_val.py, docker/paddle-cpu/configs/IResNet50_arcface_synthetic_cpu.yaml)
EXPECTED = {
    "mindspore": (
        ModelShape(16, 64, 10, width_name="bottleneck width"),
        "bottleneck width 16, 64x64 images, 10 classes",
    ),
    "ngc_mxnet": (ModelShape(None, 64, 10), "64x64 images, 10 classes"),
    "ngc_pytorch": (ModelShape(16, 64, None), "width 16, 64x64 images"),
    "oneflow": (ModelShape(None, 32, 10, width_name="bottleneck width"), "32x32 images, 10 classes"),
    # the CPU config's 32x32 input, and -o Model.class_num=100 over its 1000 classes
    "paddle_plsc": (ModelShape(None, 32, 100, width_name="embedding"), "32x32 images, 100 classes"),
}


def test_every_seeds_cpu_framework_is_covered():
    assert {bench.framework for bench in SEEDS_CPU.benchmarks} == set(EXPECTED)


@pytest.mark.parametrize("bench", SEEDS_CPU.benchmarks, ids=lambda b: b.framework)
def test_seeds_cpu_shapes_follow_the_suites_extra_args(bench):
    shape, words = EXPECTED[bench.framework]
    got = get_adapter(bench.framework).model_shape(bench.model, bench.extra_args)
    assert got == shape
    assert got is not None and got.describe() == words


@pytest.mark.parametrize(
    "framework,model,args",
    [
        ("pytorch_reference", "resnet50_v1.5", ("--device", "cuda")),
        ("pytorch_reference", "resnet50_v1.5", ("--image-size", "224", "--width=64", "--num-classes", "1000")),
        ("pytorch_reference_mpi", "resnet50_v1.5", ()),
        ("pytorch_reference", "llm_tiny", ("--image-size", "64")),  # a transformer: its size is its name
        ("ngc_pytorch", "resnet50_v1.5", ()),
        ("ngc_mxnet", "resnet50_v1.5", ("--image-shape", "3,224,224")),
        ("mindspore", "resnet50_v1.5", ("--lr=1e12",)),
        ("oneflow", "resnet50_v1.5", ("--learning_rate=1e12",)),
        ("paddle_plsc", "arcface_resnet50", ()),
        ("paddle_plsc", "arcface_resnet50", ("--num_classes", "85742")),
        (
            "paddle_plsc",
            "arcface_iresnet50",
            ("-o", "Model.input_image_width=112", "-o", "Model.input_image_height=112", "-o", "Model.class_num=93431"),
        ),
        ("allreduce_probe", "allreduce", ("--min-bytes", "1024")),
    ],
)
def test_none_when_nothing_is_shrunk(framework, model, args):
    assert get_adapter(framework).model_shape(model, args) is None


def test_the_reference_workloads_flags_either_spelling_and_the_last_wins():
    reference = get_adapter("pytorch_reference")
    args = ("--image-size", "128", "--width=32", "--num-classes", "100", "--image-size=96")
    assert reference.model_shape("resnet50_v1.5", args) == ModelShape(32, 96, 100)
    assert reference.model_shape("resnet50_v1.5", args).describe() == "width 32, 96x96 images, 100 classes"
    assert get_adapter("pytorch_reference_mpi").model_shape("resnet50_v1.5", args) == ModelShape(32, 96, 100)


def test_mxnet_image_shape_may_be_non_square():
    shape = get_adapter("ngc_mxnet").model_shape("resnet50_v1.5", ("--image-shape", "3,64,32"))
    assert shape == ModelShape(image_size=32, image_height=64) and shape.describe() == "32x64 images"


def test_plsc_gpu_reads_train_py_num_classes_and_cpu_reads_config_overrides():
    plsc = get_adapter("paddle_plsc")
    # GPU images: the seed's 1.8.5 train.py takes --num_classes (its input is 112x112 with no flag), the engine
    # releases the -o Model.* overrides, against the seed's size (112x112, embedding 512, 85742 classes)
    assert plsc.model_shape("arcface_resnet50", ("--num_classes", "1000")).describe() == "1000 classes"
    engine = plsc.model_shape("arcface_resnet50", ("-o", "Model.class_num=100", "-o", "Model.input_image_width=56"))
    assert engine.describe() == "56x56 images, 100 classes"
    assert plsc.model_shape("arcface_resnet50", ("-o", "Model.class_num=85742")) is None
    # CPU image: without overrides, the CPU config's own size
    assert plsc.model_shape("arcface_iresnet50", ()).describe() == "32x32 images, 1000 classes"
    shape = plsc.model_shape(
        "arcface_iresnet50",
        ("-o", "Model.input_image_width=64", "-oModel.num_features=128", "--override=Model.class_num=7"),
    )
    assert shape == ModelShape(128, 64, 7, image_height=32, width_name="embedding")
    assert shape.describe() == "embedding 128, 64x32 images, 7 classes"
    assert plsc.model_shape("nope", ("--num_classes", "3")) is None


def test_flag_reading_is_argparse_s():
    args = ("--a", "1", "--b=2", "--a=3", "--c")
    assert flag_values(args, ["--a", "--b", "--c", "--d"]) == {"--a": "3", "--b": "2"}  # --c has no value
    assert overrides(("-o", "A.b=1", "x", "-o", "A.b=2", "-oC=3", "--override", "D=4")) == {
        "A.b": "2",
        "C": "3",
        "D": "4",
    }
    assert shape_against(FullSize(64, 224, 1000), width=64, image_size=224, num_classes=1000) is None
    assert shape_against(FullSize(None, 224, 1000), image_size=224, image_height=200) == ModelShape(
        image_size=224, image_height=200
    )


def test_every_adapter_answers_without_raising():
    for name in ADAPTERS:
        adapter = get_adapter(name)
        for model in sorted(adapter.models):
            shape = adapter.model_shape(model, ("--image-size", "x", "-o", "Model.class_num=oops", "--num_classes"))
            assert shape is None or isinstance(shape.describe(), str)
