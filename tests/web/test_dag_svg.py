"""The research DAG drawn as SVG: layout, edges by relation, wrapped titles, its legend."""

import xml.etree.ElementTree as ET

from rsilab.web._dag_svg import STATE_COLOURS, DagNode, dag_legend, dag_svg, wrap_title

NS = "{http://www.w3.org/2000/svg}"


def node(nid: str, *parents: tuple[str, str], title: str = "", state: str = "open") -> DagNode:
    return DagNode(nid, title or nid, state, 2, tuple(parents), f"/directions/{nid}")


def dag_nodes(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    return {a.attrib["data-direction-id"]: a for a in root.iter(f"{NS}a")}


def node_top(a: ET.Element) -> float:
    rect = a.find(f"{NS}rect")
    assert rect is not None
    return float(rect.attrib["y"])


def test_empty_dag_says_so() -> None:
    svg = dag_svg([])
    root = ET.fromstring(svg)
    assert root.attrib["class"] == "dag"
    assert "no directions yet" in svg


def test_dag_nodes_edges_and_root_attributes() -> None:
    nodes = [
        node("a", state="supported"),
        node("b", ("a", "continue"), state="promising"),
        node("c", ("a", "verify"), ("ghost", "branch"), state="mystery"),
        node("d", ("b", "revise"), ("c", "branch")),
    ]
    svg = dag_svg(nodes)
    root = ET.fromstring(svg)
    assert root.attrib["class"] == "dag"
    assert root.attrib["role"] == "img"
    w, h = root.attrib["width"], root.attrib["height"]
    assert root.attrib["viewBox"] == f"0 0 {w} {h}"
    found = dag_nodes(svg)
    assert list(found) == ["a", "b", "c", "d"]
    assert found["b"].attrib["href"] == "/directions/b"
    assert found["b"].attrib["class"] == "dag-node"
    fills = {nid: a.find(f"{NS}rect").attrib["fill"] for nid, a in found.items()}  # type: ignore[union-attr]
    assert fills["a"] == STATE_COLOURS["supported"]
    assert fills["b"] == STATE_COLOURS["promising"]
    assert fills["c"] not in STATE_COLOURS.values()
    edges = [p for p in root.iter(f"{NS}path") if p.attrib.get("class") == "dag-edge"]
    assert sorted(e.attrib["data-relation"] for e in edges) == [
        "branch",
        "continue",
        "revise",
        "verify",
    ]
    assert all(e.attrib["marker-end"] == "url(#dag-arrow)" for e in edges)
    dashes = {e.attrib["data-relation"]: e.attrib.get("stroke-dasharray") for e in edges}
    assert dashes["continue"] is None and dashes["verify"] and dashes["revise"]
    assert dashes["verify"] != dashes["revise"]
    # Longest path: d sits below both b and c, which sit below a.
    assert node_top(found["a"]) < node_top(found["b"]) == node_top(found["c"])
    assert node_top(found["c"]) < node_top(found["d"])


def test_dag_wraps_long_titles_and_escapes_text() -> None:
    long = "Try <bigger> batches & a much longer warmup schedule"
    svg = dag_svg([DagNode('x"<', long, "open", 1, (), "/d?a=1&b=2")])
    a = next(iter(dag_nodes(svg).values()))
    assert a.attrib["data-direction-id"] == 'x"<'
    assert a.attrib["href"] == "/d?a=1&b=2"
    assert a.attrib["data-title"] == long
    title = a.find(f"{NS}title")
    assert title is not None and long in (title.text or "")
    spans = [t.text or "" for t in a.iter(f"{NS}tspan")]
    assert " ".join(spans) == long  # wrapped at spaces, nothing cut
    assert len(spans) == 2 and all(len(line) <= 28 for line in spans)
    texts = [t for t in a.iter(f"{NS}text") if t.attrib.get("class") != "dag-title"]
    assert [t.text for t in texts] == ["1 experiment"]


def test_only_a_title_beyond_three_lines_is_cut() -> None:
    words = " ".join(f"word{i:02d}" for i in range(20))  # 139 characters
    lines = wrap_title(words)
    assert len(lines) == 3 and lines[-1].endswith("\u2026")
    assert " ".join(lines).replace("\u2026", "") in words
    assert wrap_title("x" * 60) == ["x" * 28, "x" * 28, "x" * 4]  # a long word is split
    assert wrap_title("") == [""]


def test_dag_legend_names_every_state_and_the_relations_used() -> None:
    nodes = [
        DagNode("a", "a", "open", 1, (), "/a"),
        DagNode("b", "b", "open", 1, (("a", "builds-on"),), "/b"),
    ]
    legend = dag_legend(nodes)
    assert [s for s, _ in legend.states] == [
        "open",
        "promising",
        "supported",
        "refuted",
        "exhausted",
    ]
    relations = [e.relation for e in legend.edges]
    assert relations == ["continue", "verify", "branch", "revise", "builds-on"]
    dashes = {e.relation: e.dash for e in legend.edges}
    assert dashes["verify"] == "6 4" and dashes["continue"] == ""


def test_dag_survives_cycles_and_self_loops() -> None:
    nodes = [
        node("a", ("c", "continue")),
        node("b", ("a", "continue")),
        node("c", ("b", "continue")),
        node("s", ("s", "revise")),
        node("r"),
        node("k", ("r", "branch"), ("k", "verify")),
    ]
    svg = dag_svg(nodes)
    assert set(dag_nodes(svg)) == {"a", "b", "c", "s", "r", "k"}


def test_dag_is_deterministic_and_keeps_first_of_repeated_ids() -> None:
    nodes = [node("a"), node("b", ("a", "branch")), node("a", title="second")]
    assert dag_svg(nodes) == dag_svg(list(nodes))
    assert dag_svg(nodes).count('data-direction-id="a"') == 1
    assert "second" not in dag_svg(nodes)


def test_dag_barycentre_keeps_children_under_their_parent() -> None:
    # First-appearance order would interleave the two families; the sweeps should not.
    nodes = [
        node("p"),
        node("q"),
        node("q1", ("q", "branch")),
        node("p1", ("p", "branch")),
        node("q2", ("q", "branch")),
        node("p2", ("p", "branch")),
    ]
    found = dag_nodes(dag_svg(nodes))

    def x(nid: str) -> float:
        return float(found[nid].find(f"{NS}rect").attrib["x"])  # type: ignore[union-attr]

    assert max(x("p1"), x("p2")) < min(x("q1"), x("q2"))


def test_dag_of_500_nodes_is_complete() -> None:
    nodes = [node("n0")] + [
        node(f"n{i}", (f"n{(i - 1) // 3}", ("continue", "verify", "branch", "revise")[i % 4]))
        for i in range(1, 500)
    ]
    svg = dag_svg(nodes)
    ET.fromstring(svg)
    for i in range(500):
        assert svg.count(f'data-direction-id="n{i}"') == 1
