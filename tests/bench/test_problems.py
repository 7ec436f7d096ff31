"""Problem parsing (three formats), batch options, de-duplication and the built-in suites."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ucudnn.bench.problems import (
    FIELDS,
    ProblemError,
    dedupe,
    load_problems,
    parse_conv_problems_h,
    parse_csv,
    with_batch,
)
from ucudnn.bench.suites import SUITES, get_suite

DATA = Path(__file__).parent / "data"
# DeepBench's three conv_problems.h sets as CSV files (w,h,c,n,k,... with an application column), kept outside the
# project: beside the checkout in shared/data/deepbench, or where UCUDNN_TEST_DEEPBENCH_DIR says.
DEEPBENCH = Path(
    os.environ.get("UCUDNN_TEST_DEEPBENCH_DIR") or Path(__file__).resolve().parents[3] / "shared" / "data" / "deepbench"
)
DEEPBENCH_MISSING = (
    f"DeepBench's problem sets as CSV (conv_train.csv, conv_inference.csv, conv_inference_device.csv) are not in "
    f"{DEEPBENCH}: put them there, or set UCUDNN_TEST_DEEPBENCH_DIR to their folder"
)


def test_deepbench_csv_with_header_and_label() -> None:
    text = (
        "application,w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,stride_w,stride_h\n"
        "DeepSpeech,700,161,1,4,32,20,5,0,0,2,2\n"
    )
    (p,) = parse_csv(text, "t.csv")
    assert p.label == "DeepSpeech"
    assert p.shape == (700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2)
    # The README's own example: a 20-wide x 5-high filter gives 341 x 79.
    assert (p.out_w, p.out_h) == (341, 79)
    assert p.origin == "t.csv:2"


def test_headerless_csv_with_and_without_label_blank_and_comment_lines() -> None:
    text = "# my layers\n\n700,161,1,4,32,20,5,0,0,2,2\nconvA, 32,32,3,16,8,3,3,1,1,1,1\n"
    a, b = parse_csv(text, "x.csv")
    assert a.label == "row3" and a.n == 4
    assert b.label == "convA" and (b.out_w, b.out_h) == (32, 32)


def test_original_ucudnn_header() -> None:
    text = "source,W,H,C_in,N,C_out,kernel_w,kernel_h,pad_w,pad_h,stride_w,stride_h\nOCR,480,48,1,16,16,3,3,1,1,1,1\n"
    (p,) = parse_csv(text)
    assert p.label == "OCR"
    assert (p.w, p.h, p.c, p.n, p.k, p.filter_w, p.filter_h) == (480, 48, 1, 16, 16, 3, 3)


def test_header_columns_may_be_reordered() -> None:
    header = ",".join(reversed(FIELDS))
    values = ",".join(str(v) for v in reversed((10, 12, 3, 2, 4, 3, 5, 1, 2, 1, 1)))
    (p,) = parse_csv(f"{header}\n{values}\n")
    assert p.shape == (10, 12, 3, 2, 4, 3, 5, 1, 2, 1, 1)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,stride_w,stride_h\n1,2,3\n", "t.csv:2"),
        ("700,161,1,4,32,20,5,0,0,2,2\n700,161,x1,4,32,20,5,0,0,2,2\n", "t.csv:2: c='x1'"),
        ("7,7,1,4,32,20,5,0,0,2,2\n", "output size"),
        ("7,7,1,0,32,3,3,0,0,1,1\n", "n=0"),
        ("w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,stride_w,bogus\n", "unknown header column 'bogus'"),
        ("w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,stride_w\n", "lacks column(s) stride_h"),
        ("1,2,3,4,5,6,7,8,9,10,11,12,13\n", "got 13 fields"),
        ("", "no problems"),
    ],
)
def test_bad_csv_names_the_row(text: str, needle: str) -> None:
    with pytest.raises(ProblemError, match=None) as info:
        parse_csv(text, "t.csv")
    assert needle in str(info.value)


def test_conv_problems_h_sets_comments_line_breaks_trailing_commas() -> None:
    train = load_problems(DATA / "conv_problems_small.h")
    assert [p.shape for p in train] == [
        (700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2),
        (341, 79, 32, 4, 32, 10, 5, 0, 0, 2, 2),
        (112, 112, 64, 8, 128, 3, 3, 1, 1, 1, 1),
        (56, 56, 128, 8, 256, 1, 1, 0, 0, 2, 2),
    ]
    assert [p.label for p in train] == ["DeepSpeech", "split over two lines", "ResNet-ish", "Vision"]
    assert train[1].origin.endswith("conv_problems_small.h:11")
    server = load_problems(DATA / "conv_problems_small.h", "inference_server")
    assert [(p.label, p.n) for p in server] == [("Speaker ID", 1)]
    device = load_problems(DATA / "conv_problems_small.h", "inference_device_set")
    assert len(device) == 2 and device[0].label == "inference_device_set#1"


def test_conv_problems_h_errors() -> None:
    with pytest.raises(ProblemError, match=r"no problem set 'nope_set'.*training, inference_server"):
        load_problems(DATA / "conv_problems_small.h", "nope")
    bad = "std::vector<int> training_set = {\n  std::make_tuple(1, 2, 3),\n};\n"
    with pytest.raises(ProblemError, match=r"<h>:2: make_tuple has 3 values"):
        parse_conv_problems_h(bad, source="<h>")
    junk = "auto training_set = {\n std::make_tuple(8, 8, 1, 1, 1, 3, 3, 0, 0, 1, 1),\n oops\n};\n"
    with pytest.raises(ProblemError, match="unexpected text 'oops'"):
        parse_conv_problems_h(junk, source="<h>")
    with pytest.raises(ProblemError, match="never closed"):
        parse_conv_problems_h("auto training_set = { std::make_tuple(8,8,1,1,1,3,3,0,0,1,1),", source="<h>")


def test_batch_options_and_dedupe() -> None:
    text = "a,8,8,1,4,2,3,3,1,1,1,1\nb,8,8,1,8,2,3,3,1,1,1,1\nc,8,8,1,4,2,3,3,1,1,1,1\n"
    ps = parse_csv(text)
    assert [p.n for p in with_batch(ps, multiplier=4)] == [16, 32, 16]
    forced = with_batch(ps, batch=256)
    assert [p.n for p in forced] == [256, 256, 256]
    assert [p.label for p in dedupe(ps)] == ["a", "b"]
    assert [p.label for p in dedupe(forced)] == ["a"]
    with pytest.raises(ProblemError, match="--batch 0"):
        with_batch(ps, batch=0)


@pytest.mark.skipif(not (DEEPBENCH / "conv_train.csv").exists(), reason=DEEPBENCH_MISSING)
def test_shared_deepbench_files_parse() -> None:
    train = load_problems(DEEPBENCH / "conv_train.csv")
    assert len(train) == 94 and len(dedupe(train)) == 90
    assert len(load_problems(DEEPBENCH / "conv_inference.csv")) == 107
    device = load_problems(DEEPBENCH / "conv_inference_device.csv")
    assert len(device) == 16 and all(p.n == 1 for p in device)


def test_suites_are_valid() -> None:
    assert {"quick", "alexnet", "vgg16", "resnet50"} <= set(SUITES)
    for suite in SUITES.values():
        problems = suite.problems()
        assert problems and all(p.out_w > 0 and p.out_h > 0 and p.n == suite.batch for p in problems)
        assert len({p.shape for p in problems}) == len(problems), f"{suite.name} repeats a layer"
    alex = get_suite("AlexNet").problems()
    assert [(p.out_h, p.out_w) for p in alex] == [(55, 55), (27, 27), (13, 13), (13, 13), (13, 13)]
    resnet = get_suite("resnet50").problems()
    assert len(resnet) == 20 and resnet[0].out_h == 112
    assert sorted({p.out_h for p in get_suite("vgg16").problems()}) == [14, 28, 56, 112, 224]
    with pytest.raises(ProblemError, match="unknown suite 'lenet'"):
        get_suite("lenet")
