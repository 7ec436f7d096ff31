"""The one plan and kernel notation of ``ucudnn db list``, ``ucudnn plan`` and ``ucudnn-bench``."""

from __future__ import annotations

from ucudnn.plan_text import algo_name, format_plan, op_of_key, short_kernel_name

KEY = (
    "op=bwd_filter;dtype=half;x=16,28,28/*,12544,28,1;w=half,nchw,32,16,3,3;y=32,28,28/*,25088,28,1;"
    "pad=1,1;stride=2,2;dilation=1,1;mode=cross_correlation;compute=float;groups=4;math=default"
)


def test_plan_reads_count_x_size_algorithm() -> None:
    steps = [(8, 2, 0)] * 32 + [(2, 4, 0)]
    assert format_plan(steps, "fwd") == "32 x 8 GEMM + 1 x 2 FFT"
    assert format_plan([(4, 1, 1), (4, 1, 1), (4, 1, 0)], "bwd-data") == "2 x 4 ALGO_1 (math 1) + 1 x 4 ALGO_1"
    assert format_plan([(4, 3)], None) == "1 x 4 algo3"  # an unknown op keeps the number


def test_op_and_algorithm_names() -> None:
    assert op_of_key(KEY) == "bwd_filter" and op_of_key("conv2.fwd") == "fwd" and op_of_key("conv2") is None
    assert algo_name("bwd_filter", 3) == "ALGO_3" and algo_name("fwd", 99) == "algo99"


def test_short_kernel_name_keeps_what_tells_kernels_apart() -> None:
    assert short_kernel_name(KEY) == "bwd_filter half x16x28x28 w32x16x3x3 pad1,1 stride2,2 groups4"
    assert short_kernel_name("x" * 100, 20) == "x" * 17 + "..."
    assert short_kernel_name("conv2.fwd") == "conv2.fwd"
