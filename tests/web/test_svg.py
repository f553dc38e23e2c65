"""Score line charts drawn as SVG: ticks, units, series, marks and escaping."""

import itertools
import math
import re
import xml.etree.ElementTree as ET

from rsilab.web._svg import Mark, Series, downsample_steps, line_chart_svg

NS = "{http://www.w3.org/2000/svg}"


# ---------------------------------------------------------------- line chart


def chart_root(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.attrib["class"] == "chart"
    return root


def tick_values(root: ET.Element, cls: str) -> list[float]:
    return [float(t.text or "") for t in root.iter(f"{NS}text") if t.attrib.get("class") == cls]


def is_nice(step: float) -> bool:
    mantissa = step / 10 ** math.floor(math.log10(step))
    return any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1, 2, 5, 10))


def test_empty_chart_says_so() -> None:
    for svg in (
        line_chart_svg([], x_label="x", y_label="y"),
        line_chart_svg([Series("s", ((math.nan, 1.0), (1.0, math.inf)))], x_label="x", y_label="y"),
    ):
        chart_root(svg)
        assert "no scores yet" in svg


def test_ticks_are_nice_numbers() -> None:
    for lo, hi in ((0.0, 1.0), (0.137, 0.912), (-3.2, 71.9), (1234.0, 98765.0), (0.5, 0.5004)):
        s = Series("s", ((0.0, lo), (17.3, hi)))
        root = chart_root(line_chart_svg([s], x_label="n", y_label="score"))
        for cls in ("y-tick", "x-tick"):
            values = tick_values(root, cls)
            assert len(values) >= 2, (lo, hi, cls)
            steps = {round(b - a, 9) for a, b in itertools.pairwise(values)}
            assert len(steps) == 1 and is_nice(steps.pop()), (lo, hi, cls, values)


def test_equal_values_do_not_collapse_the_axes() -> None:
    svg = line_chart_svg([Series("flat", ((3.0, 0.7), (3.0, 0.7)))], x_label="x", y_label="y")
    root = chart_root(svg)
    assert "nan" not in svg and "inf" not in svg
    assert len(tick_values(root, "y-tick")) >= 2
    assert len(tick_values(root, "x-tick")) >= 2


def test_duration_tick_labels() -> None:
    def labels(seconds: float) -> list[str]:
        s = Series("s", ((0.0, 1.0), (seconds, 2.0)))
        root = chart_root(line_chart_svg([s], x_label="t", y_label="y", x_is_seconds=True))
        return [t.text or "" for t in root.iter(f"{NS}text") if t.attrib.get("class") == "x-tick"]

    assert labels(50)[:2] == ["0 s", "10 s"]
    assert "10 min" in labels(3600)
    assert any(re.fullmatch(r"\d+(\.\d)? h", label) for label in labels(12 * 3600))


def test_series_marks_scatter_and_escaping() -> None:
    series = [
        Series("a<&>", ((0.0, 0.1), (1.0, 0.1), (2.0, 0.4), (3.0, math.nan))),
        Series("b", ((0.0, 0.2), (3.0, 0.3)), colour="#123456"),
    ]
    svg = line_chart_svg(
        series,
        marks=[
            Mark(2.0, 0.4, "v1 <&>", "/v?a=1&b=2"),
            Mark(1.0, 0.1, "v0"),
            Mark(math.inf, 1, "x"),
        ],
        scatter=[(0.5, 0.15), (1.5, math.nan), (2.5, 0.35)],
        x_label="experiments <&>",
        y_label="score & more",
    )
    root = chart_root(svg)
    paths = {p.attrib.get("class"): p for p in root.iter(f"{NS}path") if p.attrib.get("class")}
    names = [
        p.attrib["data-name"] for p in root.iter(f"{NS}path") if p.attrib.get("class") == "series"
    ]
    assert names == ["a<&>", "b"]
    assert paths["scatter"].attrib["d"].count("h0") == 2
    assert root.find(f".//{NS}g[@class='legend']") is not None
    marks = [c for c in root.iter(f"{NS}circle") if c.attrib.get("class") == "mark"]
    assert len(marks) == 2
    links = [a for a in root.iter(f"{NS}a")]
    assert len(links) == 1 and links[0].attrib["href"] == "/v?a=1&b=2"
    texts = [t.text for t in root.iter() if t.text]
    assert "v1 <&>" in texts and "experiments <&>" in texts and "score & more" in texts
    assert "#123456" in svg
    assert line_chart_svg(series, x_label="x", y_label="y") == line_chart_svg(
        list(series), x_label="x", y_label="y"
    )


def test_step_shape_and_single_series_has_no_legend() -> None:
    s = Series("best", ((0.0, 1.0), (1.0, 1.0), (2.0, 2.0)))
    root = chart_root(line_chart_svg([s], x_label="x", y_label="y"))
    d = next(p.attrib["d"] for p in root.iter(f"{NS}path") if p.attrib.get("class") == "series")
    assert re.fullmatch(r"M[\d.]+ [\d.]+H[\d.]+V[\d.]+", d), d
    assert root.find(f".//{NS}g[@class='legend']") is None
    root = chart_root(line_chart_svg([s], x_label="x", y_label="y", step=False))
    d = next(p.attrib["d"] for p in root.iter(f"{NS}path") if p.attrib.get("class") == "series")
    assert d.count("L") == 2


def test_10k_points_make_one_path_each() -> None:
    n = 10_000
    raw = [(float(i), math.sin(i / 50) + i / n) for i in range(n)]
    series = [Series("raw", tuple(raw))]  # y changes at every point: nothing to downsample

    def render() -> str:
        return line_chart_svg(series, scatter=raw, x_label="x", y_label="y")

    root = chart_root(render())
    paths = {p.attrib.get("class"): p.attrib["d"] for p in root.iter(f"{NS}path")}
    assert paths["series"].count("V") == n - 1
    assert paths["scatter"].count("h0") == n


# ---------------------------------------------------------------- downsample_steps


def test_downsample_steps() -> None:
    assert downsample_steps([]) == []
    assert downsample_steps([(0.0, 1.0)]) == [(0.0, 1.0)]
    pts = [(0.0, 1.0), (1.0, 1.0), (2.0, 2.0), (3.0, 2.0), (4.0, 2.0), (5.0, 3.0), (6.0, 3.0)]
    assert downsample_steps(pts) == [(0.0, 1.0), (2.0, 2.0), (5.0, 3.0), (6.0, 3.0)]
    assert downsample_steps([(0.0, 1.0), (1.0, 2.0)]) == [(0.0, 1.0), (1.0, 2.0)]


def test_a_count_axis_has_whole_number_ticks() -> None:
    for n in (2, 3, 6, 7, 40):
        points = tuple((float(i), 0.1 * i) for i in range(1, n + 1))
        root = chart_root(
            line_chart_svg(
                [Series("s", points)], x_label="experiments", y_label="y", x_integer=True
            )
        )
        labels = [t.text or "" for t in root.iter(f"{NS}text") if t.attrib.get("class") == "x-tick"]
        assert labels and all(re.fullmatch(r"\d+", label) for label in labels), (n, labels)
        assert len(set(labels)) == len(labels)


def test_a_time_axis_is_labelled_in_one_unit() -> None:
    for seconds, unit in ((50, "s"), (130, "s"), (3600, "min"), (12 * 3600, "h")):
        s = Series("s", ((0.0, 1.0), (float(seconds), 2.0)))
        root = chart_root(line_chart_svg([s], x_label="t", y_label="y", x_is_seconds=True))
        labels = [t.text or "" for t in root.iter(f"{NS}text") if t.attrib.get("class") == "x-tick"]
        units = {label.split(" ")[1] for label in labels}
        assert units == {unit}, (seconds, labels)
