"""What the benchmark asks of cuDNN beyond the binding: one problem's descriptors.

The binding is :mod:`ucudnn.cudnn` (every call, hooked or not, its rows and its errors): a backend holds a ``Cudnn``
on the cuDNN library itself (``real``) and one whose hooked calls go to the preload library (``hooked``). The
preload library's control API is :mod:`ucudnn.bridge`; the graph API :mod:`ucudnn.graph_api`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from ucudnn.bench.problems import Problem
from ucudnn.cudnn import ConvDesc, ConvSpec, Cudnn, FilterDesc, Op, TensorDesc

Shape = tuple[int, ...]


@dataclass
class Descriptors:
    """x (N,C,H,W), w (K,C,R,S), y (N,K,P,Q) float32 NCHW and a 2-D cross-correlation, owned until ``close``."""

    x: TensorDesc
    w: FilterDesc
    y: TensorDesc
    conv: ConvDesc
    x_shape: Shape
    w_shape: Shape
    y_shape: Shape

    @classmethod
    def make(cls, cudnn: Cudnn, p: Problem) -> Descriptors:
        """The descriptors of problem ``p``; y's shape comes from the library itself."""
        x_shape, w_shape = (p.n, p.c, p.h, p.w), (p.k, p.c, p.filter_h, p.filter_w)
        with contextlib.ExitStack() as made:
            x = made.enter_context(TensorDesc(cudnn, x_shape))
            w = made.enter_context(FilterDesc(cudnn, w_shape))
            spec = ConvSpec(pads=(p.pad_h, p.pad_w), strides=(p.stride_h, p.stride_w))
            conv = made.enter_context(ConvDesc(cudnn, spec))
            y_shape = conv.output_shape(x, w)
            y = made.enter_context(TensorDesc(cudnn, y_shape))
            made.pop_all()  # all made: kept until close()
        return cls(x, w, y, conv, x_shape, w_shape, y_shape)

    def args(self) -> tuple[TensorDesc, FilterDesc, TensorDesc, ConvDesc]:
        """(x, w, y, conv): the arguments of the binding's queries and executors after the handle and the op."""
        return self.x, self.w, self.y, self.conv

    def operand_shapes(self, op: Op) -> tuple[Shape, Shape, Shape]:
        """The shapes of ``op``'s first input, second input and output."""
        return op.operands(self.x_shape, self.w_shape, self.y_shape)

    def close(self) -> None:
        for d in (self.x, self.w, self.conv, self.y):
            d.close()
