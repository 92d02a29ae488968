"""dlperf's PLSC ArcFace entry (the role of the seed's scripts/train.py): ResNet50 backbone, synthetic data.

Run on every node by ``python -m paddle.distributed.launch ... train.py --batch_size 128 ...``; the patched
plsc/entry.py stops after DLPERF_MAX_ITERS batches. Synthetic data: a reader of random images and labels
replaces the dataset reader (the seed trained on synthetic data; its script is not part of the report).
"""

import argparse

import numpy as np
from plsc import Entry
from plsc.models.resnet import ResNet50


def synthetic_reader(num_classes: int, image_shape=(3, 112, 112), samples: int = 1 << 30):
    def reader():
        rng = np.random.default_rng(0)
        image = rng.random(image_shape, dtype=np.float32)
        for i in range(samples):
            yield image, int(i % num_classes)

    return reader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="ResNet50", choices=["ResNet50"])
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--loss_type", default="dist_arcface")
    parser.add_argument("--num_classes", type=int, default=85742)
    parser.add_argument("--dtype", choices=["fp32", "fp16"], default="fp32")
    args = parser.parse_args()

    ins = Entry()
    ins.set_model(ResNet50())
    ins.set_train_batch_size(args.batch_size)
    ins.set_loss_type(args.loss_type)
    ins.set_class_num(args.num_classes)
    ins.set_with_test(False)
    ins.set_mixed_precision(args.dtype == "fp16")
    ins.train_reader = synthetic_reader(args.num_classes)
    ins.train()


if __name__ == "__main__":
    main()
