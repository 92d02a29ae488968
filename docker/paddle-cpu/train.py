"""PLSC 2.4's tools/train.py (not shipped in the plsc wheel, whose ``plsc-train`` console script points at it)
with a compatibility shim for PaddlePaddle 3.x on CPU. and the synthetic data set. Everything else is PLSC's: config parsing
(``-c CONFIG -o Key.sub=value``), ``plsc.engine.Engine`` (model, MarginLoss, optimizer, data loader, the
training loop and its ``[Train][Epoch e/E][Iter: i/N]... ips: X images/sec`` logger lines).

Synthetic data (no data set is downloaded): when the config's training set is PLSC's image-folder
``FaceIdentificationDataset`` and its label file is missing, 64 random PNG images of the model's input size
(``Model.input_image_width`` x ``input_image_height``) and a label file of ``DLPERF_SYNTHETIC_SAMPLES`` lines
(default 51200, the size of PLSC's own FaceRandomDataset; label i mod class_num) are written first (each
launcher rank writes its own copy then renames it into place). PLSC's loader decodes them as real images.

The shim (this file prints nothing itself):
* ``paddle.fluid`` was removed in PaddlePaddle 2.6 (renamed ``paddle.base``); plsc 2.4 imports
  ``paddle.fluid.framework``/``core``/``unique_name`` and ``paddle.fluid.dygraph.amp.OptimizerState``, so
  ``import plsc`` fails with ``ModuleNotFoundError: No module named 'paddle.fluid'``. Those names are aliased
  to their PaddlePaddle 3 homes.
* PLSC's recognition loop moves every batch with ``Tensor.cuda()``, which fails on a CPU build; on a CPU
  build it is a no-op (the loader already yields tensors on the CPU place).
* The engine always sets cuDNN flags (``FLAGS_cudnn_exhaustive_search`` ...), which a CPU build does not have
  (``ValueError: Flag FLAGS_cudnn_exhaustive_search cannot set its value through this function.``); on a
  CPU build flags the build does not know are left out.
* ``paddle.nn.functional.margin_cross_entropy`` (the op behind PLSC's MarginLoss) has no CPU kernel
  (``RuntimeError: (Unavailable) Do not support margin_cross_entropy for cpu kernel now.``); on a CPU build it
  is computed from paddle ops with the op's definition (target logit cos(m1*theta + m2) - m3, times scale,
  softmax cross entropy; data parallel only, as the CPU config sets).
* PaddlePaddle 3's GradScaler sets ``_scale = None`` when disabled (fp32), and PLSC's GradScaler.step clips
  it whenever the attribute exists (``AttributeError: 'NoneType' object has no attribute 'clip_'``): a
  disabled scaler steps the optimizer as PaddlePaddle's own does.
* PaddlePaddle 3 puts a handler on the root logger, which would print every PLSC logger line a second time
  (on stderr, in another format); PLSC's logger is kept to its own handler as on the PaddlePaddle 2.x it was
  written for.
"""

import logging
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import paddle
import paddle.nn.functional as F

if not hasattr(paddle, "fluid"):
    import paddle.base
    import paddle.base.core
    import paddle.base.framework
    from paddle.amp.grad_scaler import OptimizerState

    fluid = types.ModuleType("paddle.fluid")
    fluid.__dict__.update({k: v for k, v in vars(paddle.base).items() if not k.startswith("__")})
    fluid.core = paddle.base.core
    fluid.framework = paddle.base.framework
    fluid.unique_name = paddle.utils.unique_name
    dygraph = types.ModuleType("paddle.fluid.dygraph")
    amp = types.ModuleType("paddle.fluid.dygraph.amp")
    amp.OptimizerState = OptimizerState
    dygraph.amp = amp
    fluid.dygraph = dygraph
    paddle.fluid = fluid
    sys.modules.update(
        {
            "paddle.fluid": fluid,
            "paddle.fluid.core": paddle.base.core,
            "paddle.fluid.framework": paddle.base.framework,
            "paddle.fluid.unique_name": paddle.utils.unique_name,
            "paddle.fluid.dygraph": dygraph,
            "paddle.fluid.dygraph.amp": amp,
        }
    )

if not paddle.is_compiled_with_cuda():
    paddle.Tensor.cuda = lambda self, *_args, **_kwargs: self
    _set_flags = paddle.set_flags

    def _known_flags(flags):
        known = {}
        for key, value in flags.items():
            try:
                paddle.get_flags([key])
            except ValueError:
                continue
            known[key] = value
        _set_flags(known)

    paddle.set_flags = _known_flags

    def _margin_cross_entropy(
        logits,
        label,
        margin1=1.0,
        margin2=0.5,
        margin3=0.0,
        scale=64.0,
        group=None,
        return_softmax=False,
        reduction="mean",
    ):
        assert group is False or paddle.distributed.get_world_size() == 1, "CPU: data parallel only"
        label = label.reshape([-1]).astype("int64")
        onehot = F.one_hot(label, logits.shape[-1]).astype(logits.dtype)
        if margin1 != 1.0 or margin2 != 0.0 or margin3 != 0.0:
            theta = paddle.acos(paddle.clip(logits, -1.0 + 1e-7, 1.0 - 1e-7))
            logits = logits * (1.0 - onehot) + (paddle.cos(margin1 * theta + margin2) - margin3) * onehot
        logits = logits * scale
        loss = F.cross_entropy(logits, label.unsqueeze(-1), reduction="none")
        if reduction == "mean":
            loss = loss.mean()
        elif reduction == "sum":
            loss = loss.sum()
        return (loss, F.softmax(logits)) if return_softmax else loss

    F.margin_cross_entropy = _margin_cross_entropy

logging.getLogger("plsc").propagate = False

from plsc.core import grad_scaler as _grad_scaler  # noqa: E402
from plsc.engine.engine import Engine  # noqa: E402
from plsc.utils import config  # noqa: E402

_plsc_step = _grad_scaler.GradScaler.step


def _step(self, optimizer):
    if getattr(self, "_scale", None) is None:  # disabled (fp32) on PaddlePaddle 3
        return optimizer.step()
    return _plsc_step(self, optimizer)


_grad_scaler.GradScaler.step = _step

paddle.disable_static()


def synthetic_faces(cfg) -> None:
    """Write the synthetic image folder and label file of the training set when they are missing."""
    ds = cfg["DataLoader"]["Train"]["dataset"]
    if ds.get("name") != "FaceIdentificationDataset" or Path(ds["cls_label_path"]).exists():
        return
    import cv2

    root = Path(os.path.normpath(ds["image_root"]))
    model = cfg["Model"]
    width, height = int(model.get("input_image_width", 112)), int(model.get("input_image_height", 112))
    classes = int(model.get("class_num", 1000))
    samples = int(os.environ.get("DLPERF_SYNTHETIC_SAMPLES", "51200"))
    root.parent.mkdir(parents=True, exist_ok=True)  # made beside root, on its file system: renamed into place
    tmp = Path(tempfile.mkdtemp(prefix=root.name + ".", dir=root.parent))
    rng = np.random.default_rng(0)
    names = []
    (tmp / "images").mkdir()
    for i in range(64):
        names.append(f"images/{i:03d}.png")
        cv2.imwrite(str(tmp / names[-1]), rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
    with (tmp / os.path.relpath(ds["cls_label_path"], root)).open("w") as f:
        f.writelines(f"{names[i % len(names)]}\t{i % classes}\n" for i in range(samples))
    try:
        tmp.rename(root)
    except OSError:  # another rank was first
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    args = config.parse_args()
    config = config.get_config(args.config, overrides=args.override, show=False)
    config.profiler_options = args.profiler_options
    synthetic_faces(config)
    engine = Engine(config, mode="train")
    engine.train()
