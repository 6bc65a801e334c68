"""Pure parts of the sandbox: value conversion, input encoding, wire format, limits (no processes)."""

from __future__ import annotations

import math
import os
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from finharness.sandbox import Limits
from finharness.sandbox._zygote import _CappedText, decode_value, read_frame, to_jsonable, write_frame
from finharness.sandbox.pool import _encode_default, encode_input


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3.0),
        (True, True),
        (np.int64(7), 7.0),
        (np.float32(0.5), 0.5),
        (np.bool_(False), False),
        (Decimal("1.25"), 1.25),
        (Fraction(1, 4), 0.25),
        ("12.5%", "12.5%"),
        (None, None),
        ((1, 2), [1.0, 2.0]),
        (np.array([[1, 2], [3, 4]]), [[1.0, 2.0], [3.0, 4.0]]),
        (pd.Series([1, 2]), [1.0, 2.0]),
        (pd.DataFrame({"a": [1, 2]}), [{"a": 1.0}, {"a": 2.0}]),
        ({1: np.int8(2)}, {"1": 2.0}),
        ({3, 1}, [1.0, 3.0]),
    ],
)
def test_to_jsonable_makes_numbers_floats_and_containers_plain(value, expected):
    assert to_jsonable(value) == expected


def test_to_jsonable_keeps_nan_and_falls_back_to_repr():
    assert math.isnan(to_jsonable(float("nan")))
    assert to_jsonable(1 + 2j) == "(1+2j)"
    assert to_jsonable(10**400) == repr(10**400)  # too large for a float: kept exactly, as text
    assert to_jsonable(object).startswith("<class")


def test_dataframe_and_series_inputs_survive_the_round_trip():
    frame = pd.DataFrame({"revenue": [10.5, 20.0], "year": [2022, 2023]}, index=["a", "b"])
    series = pd.Series([1.5, 2.5], index=[2022, 2023], name="eps")
    encoded = encode_input({"frame": frame, "nested": [series]})
    decoded = decode_value(encoded)
    pd.testing.assert_frame_equal(decoded["frame"], frame)
    pd.testing.assert_series_equal(decoded["nested"][0], series)


def test_frames_travel_intact_through_a_pipe():
    read_end, write_end = os.pipe()
    try:
        write_frame(write_end, {"x": [1, 2.5, None], "nan": float("nan"), "text": "é"})
        os.close(write_end)
        message = read_frame(read_end)
        assert message["x"] == [1, 2.5, None] and message["text"] == "é" and math.isnan(message["nan"])
        assert read_frame(read_end) is None  # end of stream
    finally:
        os.close(read_end)


def test_capped_stdout_keeps_the_head_and_counts_the_rest():
    capture = _CappedText(5)
    capture.write("abc")
    capture.write("defgh")
    assert capture.getvalue().startswith("abcde")
    assert "3 more characters dropped" in capture.getvalue()


@pytest.mark.parametrize("field", ["cpu_s", "wall_s", "memory_mb", "file_mb", "nproc", "tmpfs_mb"])
def test_limits_refuse_non_positive_values(field):
    with pytest.raises(ValueError, match=field):
        Limits(**{field: 0})


@pytest.mark.parametrize(
    ("code", "scientific"),
    [
        ("x = 1\nx * 2", False),
        ("import math\nmath.log(2)", False),
        ("from decimal import Decimal\nDecimal('1.1')", False),
        ("import numpy as np\nnp.log(2)", True),
        ("from pandas import DataFrame\n1", True),
        ("import scipy.stats\n1", True),
        ("__import__('numpy').log(2)", True),
        ("x = (", False),  # a syntax error fails the same way anywhere
    ],
)
def test_jobs_go_to_the_worker_kind_they_need(code, scientific):
    from finharness.sandbox import needs_scientific

    assert needs_scientific(code, "") is scientific


def test_dataframe_inputs_need_a_scientific_worker():
    import json

    from finharness.sandbox import needs_scientific

    assert needs_scientific("len(df)", json.dumps(encode_input({"df": pd.DataFrame({"a": [1]})})))
    # numpy arrays travel as plain lists: a plain worker takes them.
    assert not needs_scientific("len(xs)", json.dumps(encode_input({"xs": np.arange(3)}), default=_encode_default))
