"""Run by test_tensorflow.py in the interpreter of TensorFlow (a CUDA build) on a machine without a GPU, alone and
under `ucudnn run`: one forward and gradient of a convolution on the CPU. Prints one JSON line. It imports nothing
of ucudnn. Usage: python -m tests.frameworks.tf_probe"""

from __future__ import annotations

import hashlib
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # after its log level

from tests.frameworks._maps import mapped_libcudnn

x = tf.random.stateless_normal([4, 16, 16, 3], seed=[1, 2])
w = tf.Variable(tf.random.stateless_normal([3, 3, 3, 8], seed=[3, 4]))
with tf.GradientTape() as tape:
    y = tf.nn.conv2d(x, w, 1, "SAME")
    loss = tf.reduce_sum(y * y)
grad = tape.gradient(loss, w)
digest = hashlib.sha256(y.numpy().tobytes() + grad.numpy().tobytes()).hexdigest()
print(
    json.dumps(
        {
            "tensorflow": tf.__version__,
            "built_with_cuda": tf.test.is_built_with_cuda(),
            "cudnn_version": tf.sysconfig.get_build_info().get("cudnn_version"),
            "gpus": len(tf.config.list_physical_devices("GPU")),
            "digest": digest,
            "libcudnn": mapped_libcudnn(),
            "preloaded": "libucudnn.so" in os.environ.get("LD_PRELOAD", ""),
        }
    )
)
