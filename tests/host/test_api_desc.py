"""Host backend API: library info, handles and descriptors (round trips, output dims, NULL outputs)."""

from __future__ import annotations

import ctypes

import pytest

from ucudnn import cudnn as C

BAD = C.Status.BAD_PARAM
NS = C.Status.NOT_SUPPORTED


def test_version_and_properties(cudnn: C.Cudnn) -> None:
    v = cudnn.version()
    parts = []
    for prop in (0, 1, 2):
        out = ctypes.c_int(-1)
        assert cudnn.raw.cudnnGetProperty(prop, ctypes.byref(out)) == 0
        parts.append(out.value)
    assert parts[0] == 9
    assert v == parts[0] * 10000 + parts[1] * 100 + parts[2]
    assert cudnn.raw.cudnnGetProperty(3, ctypes.byref(ctypes.c_int())) == BAD
    assert cudnn.raw.cudnnGetProperty(0, None) == BAD


def test_error_strings_cover_every_status(cudnn: C.Cudnn) -> None:
    for s in C.Status:
        assert cudnn.error_string(s) == f"CUDNN_STATUS_{s.name}"
    assert cudnn.error_string(777) == "CUDNN_UNKNOWN_STATUS"
    assert cudnn.error_string(-5) == "CUDNN_UNKNOWN_STATUS"


def test_handle_stream_round_trip(cudnn: C.Cudnn) -> None:
    with cudnn.handle() as h:
        s = ctypes.c_void_p(1)
        assert cudnn.raw.cudnnGetStream(h.ptr, ctypes.byref(s)) == 0
        assert s.value is None  # the default stream
        assert cudnn.raw.cudnnSetStream(h.ptr, 0x1234) == 0
        assert cudnn.raw.cudnnGetStream(h.ptr, ctypes.byref(s)) == 0
        assert s.value == 0x1234
        assert cudnn.raw.cudnnGetStream(h.ptr, None) == BAD
    assert cudnn.raw.cudnnCreate(None) == BAD
    assert cudnn.raw.cudnnSetStream(None, None) == BAD
    assert cudnn.raw.cudnnDestroy(None) == 0


def test_tensor_round_trips(cudnn: C.Cudnn) -> None:
    with C.TensorDesc(cudnn, (2, 3, 4, 5)) as t:
        assert t.get() == (C.DataType.FLOAT, (2, 3, 4, 5), (60, 20, 5, 1))
        assert t.size_in_bytes() == 2 * 3 * 4 * 5 * 4
    with C.TensorDesc(cudnn, (2, 3, 4, 5), C.DataType.DOUBLE, fmt=C.TensorFormat.NHWC) as t:
        assert t.get() == (C.DataType.DOUBLE, (2, 3, 4, 5), (60, 1, 15, 3))
    with C.TensorDesc(cudnn, (2, 3, 4, 5, 6), fmt=C.TensorFormat.NHWC) as t:
        assert t.get()[2] == (360, 1, 90, 18, 3)
    with C.TensorDesc(cudnn, (2, 3, 4, 5, 6), strides=(1000, 300, 70, 12, 2)) as t:
        assert t.get() == (C.DataType.FLOAT, (2, 3, 4, 5, 6), (1000, 300, 70, 12, 2))
        assert t.size_in_bytes() == (1 + 1000 + 2 * 300 + 3 * 70 + 4 * 12 + 5 * 2) * 4
    # 4dEx and the 4-D getter
    with C.TensorDesc(cudnn, (1, 1, 1, 1)) as t:
        assert cudnn.raw.cudnnSetTensor4dDescriptorEx(t.ptr, 1, 2, 3, 4, 5, 100, 30, 6, 1) == 0
        out = [ctypes.c_int() for _ in range(9)]
        assert cudnn.raw.cudnnGetTensor4dDescriptor(t.ptr, *[ctypes.byref(o) for o in out]) == 0
        assert [o.value for o in out] == [1, 2, 3, 4, 5, 100, 30, 6, 1]


def test_nd_getter_with_fewer_dims_requested(cudnn: C.Cudnn) -> None:
    with C.TensorDesc(cudnn, (2, 3, 4, 5, 6)) as t:
        dt, nb = ctypes.c_int(), ctypes.c_int()
        dims, strides = (ctypes.c_int * 8)(*[-1] * 8), (ctypes.c_int * 8)(*[-1] * 8)
        assert cudnn.raw.cudnnGetTensorNdDescriptor(t.ptr, 3, ctypes.byref(dt), ctypes.byref(nb), dims, strides) == 0
        assert nb.value == 5
        assert list(dims) == [2, 3, 4, -1, -1, -1, -1, -1]
        assert list(strides) == [360, 120, 30, -1, -1, -1, -1, -1]
    with C.FilterDesc(cudnn, (8, 3, 2, 3, 3), fmt=C.TensorFormat.NHWC) as f:
        assert f.get() == (C.DataType.FLOAT, C.TensorFormat.NHWC, (8, 3, 2, 3, 3))
        assert f.size_in_bytes() == 8 * 3 * 2 * 3 * 3 * 4
        dt, fmt, nb = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        dims = (ctypes.c_int * 8)(*[-1] * 8)
        st = cudnn.raw.cudnnGetFilterNdDescriptor(f.ptr, 2, ctypes.byref(dt), ctypes.byref(fmt), ctypes.byref(nb), dims)
        assert st == 0 and nb.value == 5 and list(dims[:3]) == [8, 3, -1]


def test_filter_4d_round_trip(cudnn: C.Cudnn) -> None:
    with C.FilterDesc(cudnn, (1, 1, 1, 1)) as f:
        assert cudnn.raw.cudnnSetFilter4dDescriptor(f.ptr, 1, 1, 16, 8, 3, 5) == 0
        out = [ctypes.c_int() for _ in range(6)]
        assert cudnn.raw.cudnnGetFilter4dDescriptor(f.ptr, *[ctypes.byref(o) for o in out]) == 0
        assert [o.value for o in out] == [1, 1, 16, 8, 3, 5]
        assert f.size_in_bytes() == 16 * 8 * 3 * 5 * 8


def test_conv_and_activation_round_trips(cudnn: C.Cudnn) -> None:
    spec = C.ConvSpec(
        (1, 2, 0),
        (2, 1, 3),
        (1, 2, 2),
        groups=4,
        mode=C.ConvMode.CONVOLUTION,
        math_type=C.MathType.TENSOR_OP,
        compute_type=C.DataType.DOUBLE,
    )
    with C.ConvDesc(cudnn, spec) as c:
        assert c.get() == spec
        out = [ctypes.c_int() for _ in range(8)]
        assert cudnn.raw.cudnnGetConvolution2dDescriptor(c.ptr, *[ctypes.byref(o) for o in out]) == 0
        assert [o.value for o in out] == [1, 2, 2, 1, 1, 2, 0, 1]
    with C.ConvDesc(cudnn, C.ConvSpec((0, 0))) as c:
        assert cudnn.raw.cudnnSetConvolution2dDescriptor(c.ptr, 3, 4, 1, 2, 2, 1, 1, 0) == 0
        assert c.get() == C.ConvSpec((3, 4), (1, 2), (2, 1), compute_type=C.DataType.FLOAT)
    with C.ActivationDesc(cudnn, C.ActivationMode.CLIPPED_RELU, C.NanPropagation.PROPAGATE, 6.0) as a:
        assert a.get() == (C.ActivationMode.CLIPPED_RELU, C.NanPropagation.PROPAGATE, 6.0)


def test_fresh_descriptor_defaults(cudnn: C.Cudnn) -> None:
    with C.ConvDesc(cudnn, C.ConvSpec((0, 0))) as c:
        pass
    p = ctypes.c_void_p()
    assert cudnn.raw.cudnnCreateConvolutionDescriptor(ctypes.byref(p)) == 0
    g, m = ctypes.c_int(), ctypes.c_int(-1)
    assert cudnn.raw.cudnnGetConvolutionGroupCount(p, ctypes.byref(g)) == 0 and g.value == 1
    assert cudnn.raw.cudnnGetConvolutionMathType(p, ctypes.byref(m)) == 0 and m.value == 0
    assert cudnn.raw.cudnnDestroyConvolutionDescriptor(p) == 0
    assert c.ptr is None  # closed by the with block


@pytest.mark.parametrize(
    ("x", "w", "spec", "expected"),
    [
        ((2, 3, 8, 8), (4, 3, 3, 3), C.ConvSpec((0, 0)), (2, 4, 6, 6)),
        ((2, 3, 9, 10), (4, 3, 3, 3), C.ConvSpec((1, 2), (2, 3), (2, 1)), (2, 4, 4, 4)),
        ((1, 6, 7, 7), (9, 2, 3, 3), C.ConvSpec((1, 1), groups=3), (1, 9, 7, 7)),
        ((2, 3, 5, 8, 8), (4, 3, 3, 3, 3), C.ConvSpec((0, 1, 1), (1, 2, 1)), (2, 4, 3, 4, 8)),
    ],
)
def test_output_dims(
    cudnn: C.Cudnn, x: tuple[int, ...], w: tuple[int, ...], spec: C.ConvSpec, expected: tuple[int, ...]
) -> None:
    assert C.conv_output_shape(x, w, spec.pads, spec.strides, spec.dilations) == expected
    with C.TensorDesc(cudnn, x) as t, C.FilterDesc(cudnn, w) as f, C.ConvDesc(cudnn, spec) as c:
        out = (ctypes.c_int * len(x))()
        assert cudnn.raw.cudnnGetConvolutionNdForwardOutputDim(c.ptr, t.ptr, f.ptr, len(x), out) == 0
        assert tuple(out) == expected
        o4 = [ctypes.c_int() for _ in range(4)]
        assert cudnn.raw.cudnnGetConvolution2dForwardOutputDim(c.ptr, t.ptr, f.ptr, *[ctypes.byref(o) for o in o4]) == 0
        assert tuple(o.value for o in o4) == expected[:4]


def test_null_outputs_are_bad_param_not_crashes(cudnn: C.Cudnn) -> None:
    """The real library dereferences these NULL outputs; the host backend refuses them."""
    r = cudnn.raw
    i = ctypes.c_int()
    with (
        C.TensorDesc(cudnn, (1, 2, 3, 4)) as t,
        C.FilterDesc(cudnn, (2, 2, 1, 1)) as f,
        C.ConvDesc(cudnn, C.ConvSpec((0, 0))) as c,
        C.ActivationDesc(cudnn) as a,
    ):
        arr8 = (ctypes.c_int * 8)()
        assert r.cudnnSetTensorNdDescriptor(t.ptr, 0, 4, None, arr8) == BAD
        assert r.cudnnSetTensorNdDescriptor(t.ptr, 0, 4, arr8, None) == BAD
        assert r.cudnnSetTensorNdDescriptorEx(t.ptr, 0, 0, 4, None) == BAD
        assert r.cudnnGetTensorNdDescriptor(t.ptr, 4, None, ctypes.byref(i), arr8, arr8) == BAD
        assert r.cudnnGetTensorNdDescriptor(t.ptr, 4, ctypes.byref(i), ctypes.byref(i), None, arr8) == BAD
        assert r.cudnnGetTensorSizeInBytes(t.ptr, None) == BAD
        assert r.cudnnSetFilterNdDescriptor(f.ptr, 0, 0, 4, None) == BAD
        assert r.cudnnGetFilter4dDescriptor(f.ptr, None, *[ctypes.byref(i)] * 5, None) == BAD
        assert r.cudnnGetFilterNdDescriptor(f.ptr, 4, None, ctypes.byref(i), ctypes.byref(i), arr8) == BAD
        assert r.cudnnGetFilterSizeInBytes(f.ptr, None) == BAD
        assert r.cudnnSetConvolutionNdDescriptor(c.ptr, 2, None, arr8, arr8, 1, 0) == BAD
        assert (
            r.cudnnGetConvolutionNdDescriptor(c.ptr, 2, None, arr8, arr8, arr8, ctypes.byref(i), ctypes.byref(i)) == BAD
        )
        assert r.cudnnGetConvolution2dDescriptor(c.ptr, None, *[ctypes.byref(i)] * 7) == BAD
        assert r.cudnnGetConvolutionMathType(c.ptr, None) == BAD
        assert r.cudnnGetConvolutionGroupCount(c.ptr, None) == BAD
        assert r.cudnnGetConvolution2dForwardOutputDim(c.ptr, t.ptr, f.ptr, None, *[ctypes.byref(i)] * 3) == BAD
        assert r.cudnnGetActivationDescriptor(a.ptr, None, ctypes.byref(i), None) == BAD


def test_a_zero_stride_left_by_a_refused_set_is_refused_not_divided_by(cudnn: C.Cudnn) -> None:
    """cudnnSetConvolution2dDescriptor refuses a zero stride but, as cuDNN's does, leaves it written; the real
    library's output-dimension query then divides by it (SIGFPE, cuDNN 9.28). The host backend answers BAD_PARAM
    there and in the calls that build a problem from the descriptor."""
    r = cudnn.raw
    with (
        C.TensorDesc(cudnn, (2, 4, 8, 8)) as t,
        C.FilterDesc(cudnn, (6, 4, 3, 3)) as f,
        C.TensorDesc(cudnn, (2, 6, 8, 8)) as y,
        C.ConvDesc(cudnn, C.ConvSpec((1, 1))) as c,
        cudnn.handle() as h,
    ):
        assert r.cudnnSetConvolution2dDescriptor(c.ptr, 1, 1, 0, 1, 1, 1, 1, 0) == BAD
        u = ctypes.c_int(-1)
        i = ctypes.c_int()
        assert r.cudnnGetConvolution2dDescriptor(c.ptr, *[ctypes.byref(i)] * 2, ctypes.byref(u),
                                                 *[ctypes.byref(i)] * 5) == 0  # fmt: skip
        assert u.value == 0  # kept, as cuDNN keeps it
        out = (ctypes.c_int * 4)()
        assert r.cudnnGetConvolutionNdForwardOutputDim(c.ptr, t.ptr, f.ptr, 4, out) == BAD
        size = ctypes.c_size_t()
        ws = r.cudnnGetConvolutionForwardWorkspaceSize(h.ptr, t.ptr, f.ptr, c.ptr, y.ptr, 0, ctypes.byref(size))
        assert ws == BAD


def test_wrong_kind_of_descriptor_is_bad_param(cudnn: C.Cudnn) -> None:
    with C.FilterDesc(cudnn, (2, 2, 1, 1)) as f, C.TensorDesc(cudnn, (1, 2, 3, 4)) as t:
        # A filter where a tensor belongs (and the reverse) is refused, not misread.
        assert cudnn.raw.cudnnSetTensor4dDescriptor(f.ptr, 0, 0, 1, 2, 3, 4) == BAD
        assert cudnn.raw.cudnnGetFilterSizeInBytes(t.ptr, ctypes.byref(ctypes.c_size_t())) == BAD


def test_helpers_raise_cudnn_error_with_status(cudnn: C.Cudnn) -> None:
    with pytest.raises(C.CudnnError) as e:
        C.TensorDesc(cudnn, (1, 0, 3, 4))
    assert e.value.status == BAD
    assert "CUDNN_STATUS_BAD_PARAM" in str(e.value)
    with pytest.raises(C.CudnnError) as e:
        C.TensorDesc(cudnn, (1,) * 9)
    assert e.value.status == NS
