"""The "At a glance" section: headlines read from the tables, verdicts from their intervals."""

from __future__ import annotations

from pathlib import Path

from benchmarks.__main__ import _suite, main
from benchmarks.bench_search import ABLATED
from benchmarks.glance import (
    ABLATION_PREFIX,
    BUILTIN,
    FALSE_ACCEPTANCE,
    HACKING,
    MANY_SEEDS,
    NULL_CAMPAIGNS,
    OVERHEAD,
    POWER,
    PRIMARY_PEER,
    PROTOCOL,
    TITLE,
    glance_rows,
    null_campaigns_row,
    parse_interval,
    posttrain_row,
    power_row,
    section_tables,
    with_glance,
)
from benchmarks.search.protocol import BUILTIN as PROTOCOL_BUILTIN

HEAD = "# Benchmarks\n\nFull tables: measured on day 1.\n"
SEARCH = """\
## Search on toy: final-tier score of the accepted system, same budget and seeds

| task | policy | seeds x budget | final quality [95% CI] | rsilab - policy, final [95% CI] |
|---|---|---|---|---|
| toy | rsilab | 10 x 8 | 0.700 [0.650, 0.750] | - |
| toy | optuna-tpe | 10 x 8 | 0.600 [0.550, 0.650] | +0.100 [+0.050, +0.150] |
| toy | random | 4 x 8 (partial: 10 planned) | 0.800 [0.700, 0.900] | -0.100 [-0.150, -0.050] |
| toy | hill-climb | 10 x 8 | 0.710 [0.600, 0.800] | -0.010 [-0.040, +0.020] |
| toy | rsilab without Workers | 10 x 8 | 0.650 [0.600, 0.700] | +0.050 [+0.010, +0.090] |

notes
"""


def _rows(text: str) -> dict[str, dict[str, str]]:
    return {row["claim"].split(":")[0]: row for row in glance_rows(text)}


def test_intervals_are_read_as_the_tables_print_them() -> None:
    assert parse_interval("0.934 [0.897, 0.970]") == (i := parse_interval("x 0.934 [0.897, 0.970]"))
    assert i is not None and (i.mean, i.low, i.high) == (0.934, 0.897, 0.970)
    signed = parse_interval("-0.029 [-0.076, +0.017] (3/0/7)")
    assert signed is not None and (signed.low, signed.high) == (-0.076, 0.017)
    percent = parse_interval("3.3% [1.1%, 9.2%]")
    assert percent is not None and percent.high == 9.2
    assert parse_interval("-") is None


def test_a_search_table_says_where_rsilab_wins_ties_and_loses() -> None:
    rows = _rows(HEAD + "\n" + SEARCH)
    search = rows["search on toy"]
    assert search["rsilab"] == "0.700 [0.650, 0.750]"
    assert "optuna-tpe 0.600 (rsilab - it +0.100 [+0.050, +0.150])" in search["against"]
    verdict = search["verdict"]
    assert "ahead of optuna-tpe" in verdict and "BEHIND random" in verdict
    assert "level within the intervals with hill-climb" in verdict
    assert "rsilab wins" not in verdict  # it loses to one policy
    assert "PARTIAL, seeds kept so far: random 4" in verdict
    ablations = rows["ablations on toy"]
    assert ablations["verdict"] == "removing the part costs: rsilab without Workers"
    assert search["table"].startswith("Search on toy")


def test_rsilab_wins_only_when_every_interval_is_above_zero() -> None:
    won = SEARCH.replace("-0.100 [-0.150, -0.050]", "+0.100 [+0.050, +0.150]").replace(
        "-0.010 [-0.040, +0.020]", "+0.010 [+0.005, +0.020]"
    )
    assert _rows(won)["search on toy"]["verdict"].startswith("rsilab wins; ahead of ")
    one_seed = won.replace("+0.010 [+0.005, +0.020]", "+0.010 [1 value: no interval]")
    verdict = _rows(one_seed)["search on toy"]["verdict"]
    assert (
        verdict == "ahead of optuna-tpe, random; too few paired seeds for an interval: "
        "hill-climb; PARTIAL, seeds kept so far: random 4"
    )


def _section(title: str, table: str) -> str:
    return f"## {title}\n\n_Measured somewhere._\n\n{table}\nnotes\n"


HACKING_TABLE = """\
| goal | variant | task | rsilab | naive |
|---|---|---|---|---|
| reach a helper | predict asks 127.0.0.1 | synthetic | blocked: sandbox | MISSED: accepted |
| **hacking rate, rsilab** |  |  | **0/33 = 0.0%** |  |
| **hacking rate, naive** |  |  |  | **30/33 = 90.9%** |
"""
ACCEPTANCE_TABLE = """\
| rule | campaigns | accepted versions | false-acceptance rate [Wilson 95%] | target |
|---|---|---|---|---|
| rsilab: the campaign's accepted versions | 172 | 91 | 3.3% [1.1%, 9.2%] | <= 5% |
| best dev score of the campaign's experiments | 172 | 172 | 56.4% [48.9%, 63.6%] | reference |
"""
OVERHEAD_TABLE = """\
| measured | jobs | ratio (target <= 1.05) | per experiment |
|---|---|---|---|
| campaign of 12 experiments | 38 | 1.041 |  |
| both | 50 | 1.037 |  |
"""


def test_hacking_false_acceptance_and_overhead_have_their_headlines() -> None:
    text = HEAD + "".join(
        _section(t, table)
        for t, table in (
            (HACKING, HACKING_TABLE),
            (FALSE_ACCEPTANCE, ACCEPTANCE_TABLE),
            (OVERHEAD, OVERHEAD_TABLE),
        )
    )
    rows = _rows(text)
    hacking = rows["agents cannot cheat"]
    assert hacking["rsilab"] == "0/33 = 0.0%" and "30/33 = 90.9%" in hacking["against"]
    assert hacking["verdict"].startswith("no attack changed a result")
    assert "not an attack rate" in hacking["claim"] and "out of its reach" in hacking["verdict"]
    accepted = rows["what it accepts is better"]
    assert accepted["rsilab"] == "3.3% [1.1%, 9.2%] of 91 accepted"
    assert accepted["against"] == "best dev score: 56.4% [48.9%, 63.6%]"
    assert "met by the estimate" in accepted["verdict"] and "(9.2%)" in accepted["verdict"]
    assert rows["cost"]["rsilab"] == "1.037" and rows["cost"]["verdict"] == "target <= 1.05 met"
    missed = text.replace("3.3% [1.1%, 9.2%]", "7.0% [4.0%, 12.0%]").replace("1.037", "1.2")
    assert _rows(missed)["what it accepts is better"]["verdict"].startswith("TARGET <= 5% MISSED")
    assert _rows(missed)["cost"]["verdict"].endswith("MISSED")


def test_the_full_table_is_preferred_to_the_quick_one_and_a_broken_table_is_left_out() -> None:
    quick = SEARCH.replace("same budget and seeds\n", "same budget and seeds (quick)\n", 1)
    quick = quick.replace("0.700 [0.650", "0.111 [0.650")
    text = HEAD + quick + SEARCH
    assert _rows(text)["search on toy"]["rsilab"] == "0.700 [0.650, 0.750]"
    assert _rows(HEAD + quick)["search on toy"]["rsilab"].startswith("0.111")
    broken = SEARCH.replace("final quality [95% CI]", "final quality")
    assert glance_rows(HEAD + broken) == []
    assert section_tables("no sections at all") == {}


def test_the_glance_goes_first_after_the_header_and_is_made_anew() -> None:
    text = with_glance(HEAD + "\n## Ledger\n\n| a |\n|---|\n| 1 |\n\n" + SEARCH)
    assert text.startswith(HEAD + f"\n## {TITLE}\n")
    assert text.index("## Ledger") < text.index("## Search on toy")
    changed = text.replace("| toy | rsilab | 10 x 8 | 0.700", "| toy | rsilab | 10 x 8 | 0.720")
    again = with_glance(changed)
    assert again.count(f"## {TITLE}") == 1 and "| 0.720 [0.650, 0.750] |" in again
    assert with_glance(HEAD + "\n## Ledger\n\nx\n") == HEAD + "\n## Ledger\n\nx\n"  # no headline


def test_running_the_benchmarks_writes_the_glance(tmp_path: Path) -> None:
    """A run of any suite rewrites the file with the glance of the tables it holds."""
    out = tmp_path / "B.md"
    out.write_text(HEAD + "\n" + SEARCH)
    assert main(["--quick", "--only", "search_digits", "--out", str(out)]) == 0  # runs nothing
    written = out.read_text()
    assert written.startswith(HEAD + f"\n## {TITLE}\n") and "search on toy" in written


def test_the_glance_names_the_tables_and_policies_the_suites_write() -> None:
    """A suite whose title or policy names change would drop its row silently: pinned here."""
    for title, entry in (
        (HACKING, "benchmarks.bench_hacking:run_hacking"),
        (FALSE_ACCEPTANCE, "benchmarks.bench_campaigns:run_campaign_acceptance"),
        (OVERHEAD, "benchmarks.bench_campaigns:run_campaign_overhead"),
        (PROTOCOL, "benchmarks.bench_protocol:run_protocol"),
        (MANY_SEEDS, "benchmarks.bench_many_seeds:run_many_seeds"),
        (NULL_CAMPAIGNS, "benchmarks.bench_null_campaigns"),
        (POWER, "benchmarks.bench_power"),
    ):
        assert _suite(entry)[0] == title
    assert PRIMARY_PEER == "optuna-tpe-raced"
    assert _suite("benchmarks.bench_search:run_search_digits")[0].startswith("Search on digits:")
    assert BUILTIN == PROTOCOL_BUILTIN
    assert ABLATED and all(name.startswith(ABLATION_PREFIX) for name in ABLATED)


def test_the_controller_headlines_read_their_tables() -> None:
    rows = [
        {"case": "campaigns of 3 null proposals",
         "accepted": "6/600 campaigns with a false acceptance (1.00%; Wilson 95% upper 2.16%; "
                     "target <= 5%)"},
    ]  # fmt: skip
    row = null_campaigns_row("T", rows)
    assert row is not None and row["rsilab"].startswith("6/600 (1.00%")
    assert "met" in row["verdict"]
    high = [{"accepted": "40/600 campaigns with a false acceptance (6.67%; Wilson 95% upper 8.9%)"}]
    missed = null_campaigns_row("T", high)
    assert missed is not None and "MISSED" in missed["verdict"]
    assert null_campaigns_row("T", [{"accepted": "nothing"}]) is None

    def power(one_sd: list[str], unchanged: str) -> list[dict[str, str]]:
        out = [
            {"case": f"target j={j}", "truth": "gain 1 sd", "pass rate": rate}
            for j, rate in enumerate(one_sd, start=1)
        ]
        out.append({"case": "target j=1, seed correlation 0.5", "truth": "gain 1 sd",
                    "pass rate": "0.99"})  # fmt: skip
        out.append({"case": "non-target, tolerance 1 sd", "truth": "drop 0 tolerance",
                    "pass rate": unchanged})  # fmt: skip
        return out

    met = power_row("P", power(["0.90", "0.88", "0.85"], "0.99"))
    assert met is not None and met["rsilab"] == "0.90 / 0.88 / 0.85 / 0.99"
    assert met["verdict"].endswith("met")
    low = power_row("P", power(["0.90", "0.79", "0.85"], "0.99"))
    assert low is not None and low["verdict"].endswith("MISSED")
    assert power_row("P", power(["0.90", "0.88"], "0.99")) is None


def test_the_posttrain_headline_reads_its_table() -> None:
    def table(accepted: str, gain: str) -> list[dict[str, str]]:
        return [
            {"benchmark": "arith (target)", "base": "0.110", "rsilab - base": gain,
             "optuna-tpe - base": "+0.050 [-0.010, +0.110]",
             "rsilab - optuna-tpe": "+0.120 [-0.030, +0.270]"},
            {"benchmark": "fncall", "base": "0.840", "rsilab - base": "-0.010 [-0.030, +0.010]"},
            {"benchmark": "rsilab: seeds with a version accepted", "rsilab": accepted},
            {"benchmark": "optuna-tpe: seeds with a version accepted", "optuna-tpe": "2 of 5 runs"},
        ]  # fmt: skip

    met = posttrain_row("PT", table("4 of 5 runs", "+0.250 [+0.150, +0.350]"))
    assert met is not None and met["verdict"].endswith(": met")
    assert met["rsilab"] == "4 of 5 / +0.250 [+0.150, +0.350]"
    assert met["against"] == (
        "optuna-tpe: 2 of 5 accepted, change from base +0.050 [-0.010, +0.110]; "
        "rsilab - it +0.120 [-0.030, +0.270]"
    )
    few = posttrain_row("PT", table("3 of 5 runs", "+0.250 [+0.150, +0.350]"))
    assert few is not None and "MISSED" in few["verdict"]
    flat = posttrain_row("PT", table("5 of 5 runs", "+0.050 [-0.020, +0.120]"))
    assert flat is not None and "MISSED" in flat["verdict"], "a gain whose interval holds 0"
    partial = posttrain_row("PT", table("2 of 2 runs", "+0.250 [+0.150, +0.350]"))
    assert partial is not None and "PARTIAL: 2 of 5 seeds run" in partial["verdict"]
    assert "MISSED" in partial["verdict"]
    assert posttrain_row("PT", table("none", "+0.2 [+0.1, +0.3]")) is None


def test_the_heads_scored_again_are_read_per_task_and_partial_until_all_are_scored() -> None:
    table = f"""\
## {MANY_SEEDS}

| task | policy | scored by | head [95% CI] | rsilab - policy, heads [95% CI] | W/T/L |
|---|---|---|---|---|---|
| toy | rsilab | 10 fresh seeds | 0.900 [0.880, 0.920] |  |  |
| toy | optuna-tpe-raced | 10 fresh seeds | 0.850 [0.800, 0.900] | +0.050 [+0.010, +0.090] | 3/0/1 |
| toy | random | 10 fresh seeds | 0.920 [0.900, 0.940] | -0.020 [-0.060, +0.020] | 1/0/3 |
| toy | rsilab without Workers | 10 seeds | 0.700 [0.600, 0.800] | +0.200 [+0.100, +0.300] | 4/0/0 |
| big | rsilab | 10 fresh seeds | 1 of 3 scored yet |  |  |
| big | optuna-tpe-raced | 10 fresh seeds | 0.600 [0.500, 0.700] |  |  |

notes
"""
    rows = {row["claim"].split(",")[0]: row for row in glance_rows(HEAD + "\n" + table)}
    toy = rows["heads found on toy"]
    assert toy["rsilab"] == "0.900 [0.880, 0.920]"
    assert "optuna-tpe-raced 0.850 (rsilab - it +0.050 [+0.010, +0.090])" in toy["against"]
    assert "without Workers" not in toy["against"]  # ablations are not peers
    assert toy["verdict"] == (
        "post hoc, not registered: ahead of optuna-tpe-raced; level within the intervals "
        "with random (rsilab's mean lower than random)"
    )
    assert toy["table"] == MANY_SEEDS and "(10 fresh seeds)" in toy["claim"]
    assert rows["heads found on big"]["verdict"].startswith("PARTIAL")
    assert "rsilab" in rows["heads found on big"]["verdict"]
