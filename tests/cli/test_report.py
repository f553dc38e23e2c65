"""``rsilab report`` on a real campaign, in Markdown, JSON and to a file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab


def test_report_of_a_finished_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    ran = rsilab("run", "synthetic", "--budget", "experiments=4", "--lab", lab)
    assert ran.exit_code == 0, explain(ran)

    md = rsilab("report", "latest", "--lab", lab)
    assert md.exit_code == 0, explain(md)
    assert md.stdout.startswith("# Campaign report: cmp-")
    assert "Task **synthetic**" in md.stdout and "H0/M0" in md.stdout
    assert "- Experiments: 4 of 4 in the budget" in md.stdout
    assert "| quality (target, higher is better) |" in md.stdout
    assert "| train | 4 |" in md.stdout  # four experiments, one train job each

    as_json = rsilab("report", "latest", "--format", "json", "--lab", lab)
    assert as_json.exit_code == 0, explain(as_json)
    data = json.loads(as_json.stdout)
    cid = data["campaign"]["id"]
    assert data["campaign"]["experiments"] == 4 and data["campaign"]["state"] == "finished"
    assert data["measures"]["experiments"] == 4
    assert data["baseline"]["label"] == "H0/M0" and data["directions"]

    out = tmp_path / "r.json"  # the format follows the file's suffix
    wrote = rsilab("report", cid, "--out", out, "--lab", lab)
    assert wrote.exit_code == 0 and wrote.stdout.strip() == str(out), explain(wrote)
    assert json.loads(out.read_text())["campaign"]["id"] == cid
    out_md = tmp_path / "report.md"
    assert rsilab("report", cid, "--out", out_md, "--lab", lab).exit_code == 0
    assert out_md.read_text().startswith(f"# Campaign report: {cid}")

    page = tmp_path / "report.html"  # one file, no script, no address outside it
    html = rsilab("report", cid, "--html", page, "--lab", lab)
    assert html.exit_code == 0 and html.stdout.strip() == str(page), explain(html)
    text = page.read_text()
    assert text.startswith("<!doctype html>") and f"Campaign {cid}" in text
    assert "<script" not in text
    assert not re.findall(r'(?:src|href)="(?!#)[^"]*"', text)  # every link is within the file
    assert text.count('class="part"') >= 4 + 5  # overview, list, 4 experiments, lineage, ...
    by_suffix = tmp_path / "r.htm"
    assert rsilab("report", cid, "--out", by_suffix, "--lab", lab).exit_code == 0
    assert by_suffix.read_text().startswith("<!doctype html>")
    clash = rsilab("report", cid, "--html", page, "--format", "json", "--lab", lab)
    assert clash.exit_code == 2 and "--html writes HTML" in clash.stderr
    assert not list(tmp_path.glob(".*partial"))

    # A large campaign's report holds in full only the experiments that matter, and every
    # link in it still lands somewhere in the file.
    from rsilab.records import Candidate, Experiment
    from rsilab.store import Lab
    from rsilab.web import report_html
    from rsilab.web._read import read_campaign

    with Lab.open(lab) as opened:
        view = read_campaign(opened.store, cid)
        exps = opened.store.query_as(Experiment, campaign_id=cid)
        proposed = {c.experiment_id for c in opened.store.query_as(Candidate, campaign_id=cid)}
    assert report_html.experiments_in_full(view) is None  # small: every one in full
    monkeypatch.setattr(report_html, "ALL_IN_FULL_UP_TO", 2)
    monkeypatch.setattr(report_html, "LATEST_IN_FULL", 1)
    chosen = report_html.experiments_in_full(view)
    assert chosen is not None and proposed <= chosen
    assert {view.experiments[0].id, view.experiments[-1].id} <= chosen
    kept = {view.experiments[0].id, view.experiments[-1].id}
    monkeypatch.setattr(report_html, "experiments_in_full", lambda _view: kept)
    small = tmp_path / "small.html"
    assert rsilab("report", cid, "--html", small, "--lab", lab).exit_code == 0
    text = small.read_text()
    assert f"2 of the {len(exps)} experiments are in this file in full" in text
    anchors = set(re.findall(r'href="#([^"]+)"', text))
    assert anchors <= set(re.findall(r' id="([^"]+)"', text))
    assert all(e.id in text for e in exps)  # the others are still listed


def test_report_refuses_bad_input(lab: Path, tmp_path: Path) -> None:
    none_yet = rsilab("report", "latest", "--lab", lab)
    assert none_yet.exit_code == 2 and "no campaign yet" in none_yet.stderr
    unknown = rsilab("report", "cmp-000000000000", "--lab", lab)
    assert unknown.exit_code == 2 and "rsilab campaign list" in unknown.stderr
    missing = tmp_path / "nowhere" / "r.md"
    bad_out = rsilab("report", "latest", "--out", missing, "--lab", lab)
    assert bad_out.exit_code == 2 and "does not exist" in bad_out.stderr
    assert "mkdir -p" in bad_out.stderr
    bad_format = rsilab("report", "latest", "--format", "xml", "--lab", lab)
    assert bad_format.exit_code == 2
