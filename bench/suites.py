"""Built-in problem suites, written from the published architecture shapes (no data files are shipped).

Each entry is ``(name, w, h, c, k, filter, pad, stride)`` with square filters, pads and strides; the suite's
default batch is the mini-batch the architecture was published with (``--batch`` overrides it). Layers that
repeat with identical shapes are listed once. Grouped convolutions (AlexNet's two-GPU split) are written
ungrouped, as DeepBench-style tuples cannot express groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from ucudnn.bench.problems import Problem, ProblemError, make_problem

Layer = tuple[str, int, int, int, int, int, int, int]


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    batch: int
    layers: tuple[Layer, ...]

    def problems(self) -> list[Problem]:
        return [
            make_problem(name, (w, h, c, self.batch, k, f, f, pad, pad, stride, stride), f"suite {self.name}:{name}")
            for name, w, h, c, k, f, pad, stride in self.layers
        ]


# Krizhevsky et al. 2012 as in Caffe's bvlc_alexnet (227x227 input), mini-batch 128.
ALEXNET = Suite(
    "alexnet",
    "AlexNet conv1-5 (Krizhevsky et al. 2012, Caffe's 227x227 input, ungrouped)",
    128,
    (
        ("conv1", 227, 227, 3, 96, 11, 0, 4),
        ("conv2", 27, 27, 96, 256, 5, 2, 1),
        ("conv3", 13, 13, 256, 384, 3, 1, 1),
        ("conv4", 13, 13, 384, 384, 3, 1, 1),
        ("conv5", 13, 13, 384, 256, 3, 1, 1),
    ),
)

# Simonyan & Zisserman 2015, configuration D (224x224 input), mini-batch 256; the 9 distinct 3x3 layers of 13.
VGG16 = Suite(
    "vgg16",
    "VGG-16 (configuration D), its 9 distinct 3x3 convolutions",
    256,
    (
        ("conv1_1", 224, 224, 3, 64, 3, 1, 1),
        ("conv1_2", 224, 224, 64, 64, 3, 1, 1),
        ("conv2_1", 112, 112, 64, 128, 3, 1, 1),
        ("conv2_2", 112, 112, 128, 128, 3, 1, 1),
        ("conv3_1", 56, 56, 128, 256, 3, 1, 1),
        ("conv3_2-3", 56, 56, 256, 256, 3, 1, 1),
        ("conv4_1", 28, 28, 256, 512, 3, 1, 1),
        ("conv4_2-3", 28, 28, 512, 512, 3, 1, 1),
        ("conv5_1-3", 14, 14, 512, 512, 3, 1, 1),
    ),
)

# He et al. 2016 (the original ResNet-50: stride 2 on the first 1x1 of stages 3-5), mini-batch 256.
RESNET50 = Suite(
    "resnet50",
    "ResNet-50 (He et al. 2016), its 20 distinct convolutions incl. projection shortcuts",
    256,
    (
        ("conv1", 224, 224, 3, 64, 7, 3, 2),
        ("res2a_branch2a", 56, 56, 64, 64, 1, 0, 1),
        ("res2x_branch2b", 56, 56, 64, 64, 3, 1, 1),
        ("res2x_branch2c+2a_branch1", 56, 56, 64, 256, 1, 0, 1),
        ("res2x_branch2a", 56, 56, 256, 64, 1, 0, 1),
        ("res3a_branch1", 56, 56, 256, 512, 1, 0, 2),
        ("res3a_branch2a", 56, 56, 256, 128, 1, 0, 2),
        ("res3x_branch2b", 28, 28, 128, 128, 3, 1, 1),
        ("res3x_branch2c", 28, 28, 128, 512, 1, 0, 1),
        ("res3x_branch2a", 28, 28, 512, 128, 1, 0, 1),
        ("res4a_branch1", 28, 28, 512, 1024, 1, 0, 2),
        ("res4a_branch2a", 28, 28, 512, 256, 1, 0, 2),
        ("res4x_branch2b", 14, 14, 256, 256, 3, 1, 1),
        ("res4x_branch2c", 14, 14, 256, 1024, 1, 0, 1),
        ("res4x_branch2a", 14, 14, 1024, 256, 1, 0, 1),
        ("res5a_branch1", 14, 14, 1024, 2048, 1, 0, 2),
        ("res5a_branch2a", 14, 14, 1024, 512, 1, 0, 2),
        ("res5x_branch2b", 7, 7, 512, 512, 3, 1, 1),
        ("res5x_branch2c", 7, 7, 512, 2048, 1, 0, 1),
        ("res5x_branch2a", 7, 7, 2048, 512, 1, 0, 1),
    ),
)

# Caffe's CIFAR-10 "quick" network (the model μ-cuDNN trained in its README), mini-batch 100 in Caffe.
CIFAR10 = Suite(
    "cifar10",
    "Caffe's CIFAR-10 quick network conv1-3 (5x5, pad 2)",
    100,
    (
        ("conv1", 32, 32, 3, 32, 5, 2, 1),
        ("conv2", 16, 16, 32, 32, 5, 2, 1),
        ("conv3", 8, 8, 32, 64, 5, 2, 1),
    ),
)

# What `--quick` runs: small enough for seconds on two CPU cores through the host backend, while the im2col-style
# workspaces at the full batch still exceed the quick limits (so micro-batching has work to do).
QUICK = Suite(
    "quick",
    "CIFAR-10 quick's conv2 and conv3 (5x5) and alexnet_conv5/4: AlexNet's conv5 (3x3 at 13x13) with a quarter "
    "of its channels (96->64), N=32",
    32,
    (
        ("cifar10_conv2", 16, 16, 32, 32, 5, 2, 1),
        ("cifar10_conv3", 8, 8, 32, 64, 5, 2, 1),
        ("alexnet_conv5/4", 13, 13, 96, 64, 3, 1, 1),
    ),
)

SUITES: dict[str, Suite] = {s.name: s for s in (QUICK, CIFAR10, ALEXNET, VGG16, RESNET50)}


def get_suite(name: str) -> Suite:
    try:
        return SUITES[name.lower()]
    except KeyError:
        raise ProblemError(f"unknown suite {name!r}; built-in suites: {', '.join(SUITES)}") from None
