"""The "At a glance" section of ``BENCHMARKS.md``: each claim's headline, read from the tables.

rsilab claims three things (its search finds better systems for the same budget, agents
cannot cheat it, what it accepts is really better) and a cost (its overhead over bare jobs).
:func:`with_glance` reads the tables that measure them out of the markdown the benchmarks
just wrote and puts one row per headline first in the file, with a verdict that says where
rsilab wins, where it is level within the intervals and where it loses. Nothing here is
measured or typed by hand, so the glance cannot disagree with the tables it cites; a table
that is missing or changed its shape leaves its row out rather than inventing one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TITLE = "At a glance"
QUICK_MARK = " (quick)"
"""Ends the title of every section a quick run writes (``python -m benchmarks --quick``)."""
HACKING = "Hacking suite: scripted attacks, rsilab vs a naive runner"
FALSE_ACCEPTANCE = "False acceptance of whole campaigns on synthetic: rsilab vs the best dev score"
OVERHEAD = "Campaign overhead over its jobs run bare, and store and ledger cost per experiment"
SEARCH_PREFIX = "Search on "
PROTOCOL = "The registered search protocol: rsilab against its peers at equal compute"
PRIMARY_PEER = "optuna-tpe-raced"
BUILTIN = "rsilab"
"""The built-in policy's name in the search tables (``benchmarks.search.protocol.BUILTIN``,
not imported: that pulls in Optuna and the lab for a markdown reader; a test pins them)."""
ABLATION_PREFIX = f"{BUILTIN} without "
FALSE_ACCEPTANCE_TARGET = 5.0
"""Percent: the issue's target for rsilab's false-acceptance rate."""
OVERHEAD_TARGET = 1.05

Table = list[dict[str, str]]
_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_RUNS = re.compile(r"(\d+)/(\d+)")
_INTERVAL = re.compile(rf"({_NUMBER})%? \[({_NUMBER})%?, ({_NUMBER})%?\]")


@dataclass(frozen=True)
class Interval:
    """A mean with its 95% interval, as the tables print them: ``0.934 [0.897, 0.970]``."""

    mean: float
    low: float
    high: float


def parse_interval(cell: str) -> Interval | None:
    """The first ``mean [low, high]`` in ``cell`` (percent signs dropped), or None."""
    found = _INTERVAL.search(cell)
    if found is None:
        return None
    mean, low, high = (float(g) for g in found.groups())
    return Interval(mean, low, high)


def section_tables(text: str) -> dict[str, Table]:
    """The first table of every ``## title`` section of ``text``, as rows of column -> cell."""
    tables: dict[str, Table] = {}
    for part in re.split(r"(?m)^(?=## )", text):
        if not part.startswith("## "):
            continue
        title = part[3:].splitlines()[0].strip()
        lines = [x.strip() for x in part.splitlines() if x.strip().startswith("|")]
        if len(lines) < 2:
            continue
        columns = _cells(lines[0])
        tables[title] = [dict(zip(columns, _cells(x), strict=False)) for x in lines[2:]]
    return tables


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _pick(tables: dict[str, Table], title: str) -> tuple[str, Table] | None:
    """The full table of ``title``, else its quick one; (the title found, its rows)."""
    for found in (title, title + QUICK_MARK):
        if found in tables:
            return found, tables[found]
    return None


def _column(rows: Table, start: str, holding: str = "") -> str | None:
    """The first column whose name starts with ``start`` (and holds ``holding``)."""
    for row in rows:
        for name in row:
            if name.startswith(start) and holding in name:
                return name
    return None


def _signed(interval: Interval) -> str:
    return f"{interval.mean:+.3f} [{interval.low:+.3f}, {interval.high:+.3f}]"


def search_rows(title: str, rows: Table) -> list[dict[str, str]]:
    """The glance rows of one search table: rsilab against the other policies, then its
    ablations (each the paired difference rsilab - policy, by seed)."""
    final = _column(rows, "final ", "[95% CI]")
    diff = _column(rows, "rsilab - policy")
    if final is None or diff is None:
        return []
    by_policy = {r.get("policy", ""): r for r in rows}
    mine = by_policy.get(BUILTIN)
    if mine is None:
        return []
    task = title.removeprefix(SEARCH_PREFIX).split(":")[0]
    metric = final.removeprefix("final ").removesuffix(" [95% CI]")
    out: list[dict[str, str]] = []
    for label, policies in (
        ("search", [p for p in by_policy if p != BUILTIN and not p.startswith(ABLATION_PREFIX)]),
        ("ablations", [p for p in by_policy if p.startswith(ABLATION_PREFIX)]),
    ):
        if not policies:
            continue
        gaps = {p: parse_interval(by_policy[p].get(diff, "")) for p in policies}
        against = "; ".join(
            f"{p} {by_policy[p].get(final, '-').split(' ')[0]}"
            + (f" (rsilab - it {_signed(g)})" if g is not None else "")
            for p, g in gaps.items()
        )
        verdict = _search_verdict(gaps, label == "ablations")
        partial = [
            f"{p} {by_policy[p].get('seeds x budget', '').split(' ')[0]}"
            for p in (BUILTIN, *policies)
            if "partial" in by_policy[p].get("seeds x budget", "")
        ]
        if partial:
            verdict += f"; PARTIAL, seeds kept so far: {', '.join(partial)}"
        out.append(
            {
                "claim": f"{label} on {task}: final-tier {metric}, same budget and seeds",
                "rsilab": mine.get(final, "-"),
                "against": against,
                "verdict": verdict,
                "table": title,
            }
        )
    return out


NOT_RUN = "not run yet"
"""What the protocol table's final score says of a registered policy with no run kept."""


def protocol_rows(title: str, rows: Table) -> list[dict[str, str]]:
    """The glance rows of the registered protocol, per task: the primary comparison (rsilab
    against optuna-tpe-raced at equal compute), then the other peers and the ablations with
    their Holm-adjusted p-values."""
    final = _column(rows, "final ", "[95% CI]")
    diff = _column(rows, "rsilab - policy")
    if final is None or diff is None:
        return []
    out: list[dict[str, str]] = []
    for task in dict.fromkeys(r.get("task", "") for r in rows):
        mine_rows = [r for r in rows if r.get("task") == task]
        by_policy = {r.get("policy", ""): r for r in mine_rows}
        mine = by_policy.get(BUILTIN)
        if mine is None:
            continue
        groups = (
            ("primary", [p for p in by_policy if p == PRIMARY_PEER]),
            ("other peers", [p for p in by_policy if p not in (BUILTIN, PRIMARY_PEER)
                             and not p.startswith(ABLATION_PREFIX)]),
            ("ablations", [p for p in by_policy if p.startswith(ABLATION_PREFIX)]),
        )  # fmt: skip
        for label, policies in groups:
            if not policies:
                continue
            gaps = {p: parse_interval(by_policy[p].get(diff, "")) for p in policies}
            against = "; ".join(
                f"{p} {_first(by_policy[p].get(final, '-'))}"
                + (f" (rsilab - it {_signed(g)}" if g is not None else "")
                + (f", Holm p {by_policy[p].get('Holm p')})" if g is not None and label != "primary"
                   else (")" if g is not None else ""))
                for p, g in gaps.items()
            )  # fmt: skip
            if mine.get(final) == NOT_RUN:  # registered before its runs: no verdict yet
                kept = ", ".join(
                    f"{p} {by_policy[p].get('runs', '-')}" for p in (BUILTIN, *policies)
                )
                out.append(
                    {
                        "claim": f"{label} on {task}: final-tier target score, equal compute",
                        "rsilab": NOT_RUN,
                        "against": "; ".join(policies),
                        "verdict": f"NOT RUN YET (registered before its runs; kept: {kept})",
                        "table": title,
                    }
                )
                continue
            registered = _search_verdict(gaps, label == "ablations")
            verdict = "registered, at equal compute: " + registered
            if label != "ablations" and not registered.startswith("rsilab wins"):
                verdict = "TARGET MISSED (rsilab ahead of every peer); " + verdict
            post = _column(mine_rows, "rsilab - policy at the end")
            if post is not None:
                ends = {p: parse_interval(by_policy[p].get(post, "")) for p in policies}
                verdict += "; at the end of each run (post hoc, not registered): " + (
                    _search_verdict(ends, label == "ablations")
                )
            missing = [
                f"{p} {by_policy[p].get('runs', '').split(' ')[0]}"
                for p in (BUILTIN, *policies)
                if not by_policy[p]
                .get("runs", "")
                .startswith(by_policy[p].get("runs", "/").split("/")[-1].split(" ")[0] + "/")
            ]
            if missing:
                verdict += f"; PARTIAL, runs kept of registered: {', '.join(missing)}"
            out.append(
                {
                    "claim": f"{label} on {task}: final-tier target score, equal compute",
                    "rsilab": mine.get(final, "-"),
                    "against": against,
                    "verdict": verdict,
                    "table": title,
                }
            )
    return out


MANY_SEEDS = "The registered protocol's configs scored with many seeds, outside the alpha budget"


def many_seeds_rows(title: str, rows: Table) -> list[dict[str, str]]:
    """Per task, the heads the protocol's runs delivered scored again with fresh seeds (or
    exactly): rsilab's against every peer's, paired by run seed (no verdict until every head
    of the task is scored)."""
    head = _column(rows, "head [95% CI]")
    diff = _column(rows, "rsilab - policy, heads")
    how = _column(rows, "scored by")
    if head is None or diff is None:
        return []
    out: list[dict[str, str]] = []
    for task in dict.fromkeys(r.get("task", "") for r in rows):
        by_policy = {r.get("policy", ""): r for r in rows if r.get("task") == task}
        mine = by_policy.get(BUILTIN)
        peers = [p for p in by_policy if p != BUILTIN and not p.startswith(ABLATION_PREFIX)]
        if mine is None or not peers:
            continue
        scored = [mine, *(by_policy[p] for p in peers)]
        unscored = [r.get("policy", "") for r in scored if parse_interval(r.get(head, "")) is None]
        gaps = {p: parse_interval(by_policy[p].get(diff, "")) for p in peers}
        against = "; ".join(
            f"{p} {_first(by_policy[p].get(head, '-'))}"
            + (f" (rsilab - it {_signed(g)})" if g is not None else "")
            for p, g in gaps.items()
        )
        if unscored:
            verdict = f"PARTIAL: not every head scored yet ({', '.join(unscored)})"
        else:
            verdict = "post hoc, not registered: " + _search_verdict(gaps, ablations=False)
        where = mine.get(how, "") if how is not None else ""
        out.append(
            {
                "claim": f"heads found on {task}, scored again ({where}): final-tier target score",
                "rsilab": mine.get(head, "-"),
                "against": against,
                "verdict": verdict,
                "table": title,
            }
        )
    return out


def _first(cell: str) -> str:
    """A final-score cell's mean (the words of a cell that holds no number)."""
    word = cell.split(" ")[0]
    return word if parse_interval(cell) is not None or word == "-" else cell


def _search_verdict(gaps: dict[str, Interval | None], ablations: bool) -> str:
    """Where rsilab stands against each policy, by the paired interval of rsilab - policy
    (for an ablation, against itself with that part removed)."""
    known = {p: g for p, g in gaps.items() if g is not None}
    unknown = [p for p, g in gaps.items() if g is None]
    if not known:
        return "too few paired seeds for an interval: " + ", ".join(unknown)
    ahead = [p for p, g in known.items() if g.low > 0]
    behind = [p for p, g in known.items() if g.high < 0]
    level = [p for p in known if p not in ahead and p not in behind]
    below = [p for p in level if known[p].mean < 0]
    if ablations:
        words = ("removing the part costs: ", "REMOVING THE PART HELPS: ", "no clear effect: ")
    else:
        words = ("ahead of ", "BEHIND ", "level within the intervals with ")
    parts = [
        word + ", ".join(group)
        for word, group in zip(words, (ahead, behind, level), strict=True)
        if group
    ]
    if below:
        parts[-1] += f" (rsilab's mean lower than {', '.join(below)})"
    if not ablations and ahead and not behind and not level and not unknown:
        parts.insert(0, "rsilab wins")
    if unknown:
        parts.append("too few paired seeds for an interval: " + ", ".join(unknown))
    return "; ".join(parts)


NULL_CAMPAIGNS = (
    "Campaign-level false acceptance and power of the controller's rule on synthetic's own noise"
)
POWER = "Power and cost of the controller's sequential paired rule, simulated at the score level"
POWER_TARGET = 0.80
"""The issue's power target at a gain of one per-seed sd, proposals 1-3."""
UNCHANGED_TARGET = 0.90
"""The issue's pass-rate target for an unchanged non-target."""
_CAMPAIGNS = re.compile(rf"(\d+)/(\d+) campaigns with a false acceptance.*?upper ({_NUMBER})%")


def null_campaigns_row(title: str, rows: Table) -> dict[str, str] | None:
    """The share of campaigns of injected null proposals with a false acceptance."""
    for row in rows:
        found = _CAMPAIGNS.search(row.get("accepted", ""))
        if found is None:
            continue
        bad, n, upper = int(found.group(1)), int(found.group(2)), float(found.group(3))
        return {
            "claim": "what it accepts is really better: campaigns of null proposals on "
            "synthetic's own noise with at least one false acceptance",
            "rsilab": f"{bad}/{n} ({100 * bad / n:.2f}%; Wilson upper {upper:.2f}%)",
            "against": "-",
            "verdict": f"target <= {FALSE_ACCEPTANCE_TARGET:g}% "
            + ("met" if upper <= FALSE_ACCEPTANCE_TARGET else "MISSED")
            + " (on the upper bound); synthetic shares seed noise between the arms, so pairing "
            "cancels it: the independent-arm simulation is the hard case",
            "table": title,
        }
    return None


def power_row(title: str, rows: Table) -> dict[str, str] | None:
    """The controller's power at one per-seed sd (proposals 1-3) and the unchanged non-target's
    pass rate, against the issue's targets."""
    one_sd = [
        float(r["pass rate"])
        for r in rows
        if re.fullmatch(r"target j=[123]", r.get("case", "")) and r.get("truth") == "gain 1 sd"
    ]
    unchanged = [
        float(r["pass rate"])
        for r in rows
        if r.get("case", "").startswith("non-target") and r.get("truth") == "drop 0 tolerance"
    ]
    if len(one_sd) != 3 or not unchanged:
        return None
    met = min(one_sd) >= POWER_TARGET and unchanged[0] >= UNCHANGED_TARGET
    return {
        "claim": "what is really better gets accepted: power at a gain of one per-seed sd "
        "(proposals 1, 2, 3; independent arms) / unchanged non-target passing",
        "rsilab": " / ".join(f"{x:.2f}" for x in one_sd) + f" / {unchanged[0]:.2f}",
        "against": "-",
        "verdict": f"targets >= {POWER_TARGET:.0%} and >= {UNCHANGED_TARGET:.0%} "
        + ("met" if met else "MISSED"),
        "table": title,
    }


def hacking_row(title: str, rows: Table) -> dict[str, str] | None:
    """Hacking rate, rsilab against the naive runner."""
    rates = {r.get("goal", "").strip("*"): r for r in rows}
    mine = rates.get("hacking rate, rsilab")
    naive = rates.get("hacking rate, naive")
    if mine is None or naive is None:
        return None
    mine_rate = mine.get("rsilab", "").strip("*")
    naive_rate = naive.get("naive", "").strip("*")
    return {
        "claim": "agents cannot cheat: known attacks, written with the defences in view, that "
        "changed an accepted result / attacks tried (a regression suite, not an attack rate)",
        "rsilab": mine_rate,
        "against": f"naive runner, same scripted worker: {naive_rate}",
        "verdict": ("no attack changed a result" if mine_rate.split(" ")[0].startswith("0/")
                    else "SOME ATTACKS CHANGED A RESULT")
        + "; scripted attacks written knowing the defences, not observed agent behaviour; "
        "encrypted or randomly rotated copies of private data are out of its reach",
        "table": title,
    }  # fmt: skip


def false_acceptance_row(title: str, rows: Table) -> dict[str, str] | None:
    """rsilab's campaign-level false-acceptance rate against accepting the best dev score."""
    rate = _column(rows, "false-acceptance rate")
    rule = _column(rows, "rule")
    if rate is None or rule is None:
        return None
    mine = next((r for r in rows if r.get(rule, "").startswith("rsilab")), None)
    greedy = next((r for r in rows if r.get(rule, "").startswith("best dev score of")), None)
    if mine is None:
        return None
    interval = parse_interval(mine.get(rate, ""))
    if interval is None:
        return None
    target = FALSE_ACCEPTANCE_TARGET
    if interval.high <= target:
        verdict = f"target <= {target:g}% met, with the whole interval under it"
    elif interval.mean <= target:
        verdict = (
            f"target <= {target:g}% met by the estimate; the interval's upper end "
            f"({interval.high:g}%) is not yet under it"
        )
    else:
        verdict = f"TARGET <= {target:g}% MISSED"
    accepted = mine.get(_column(rows, "accepted versions") or "", "")
    return {
        "claim": "what it accepts is better: accepted versions whose true effect is not "
        "positive (synthetic, whole campaigns)",
        "rsilab": f"{mine.get(rate, '-')} of {accepted} accepted",
        "against": f"best dev score: {greedy.get(rate, '-')}" if greedy else "-",
        "verdict": verdict,
        "table": title,
    }


def overhead_row(title: str, rows: Table) -> dict[str, str] | None:
    """Campaign wall time over its jobs run bare (the row of baseline and campaign both)."""
    ratio = _column(rows, "ratio")
    both = next((r for r in rows if r.get("measured") == "both"), None)
    if ratio is None or both is None:
        return None
    try:
        value = float(both.get(ratio, ""))
    except ValueError:
        return None
    return {
        "claim": "cost: campaign wall time / its jobs run bare, one after another",
        "rsilab": f"{value:.3f}",
        "against": "bare jobs: 1",
        "verdict": f"target <= {OVERHEAD_TARGET} {'met' if value <= OVERHEAD_TARGET else 'MISSED'}",
        "table": title,
    }


POSTTRAIN = (
    "Post-training (posttrain): base model, rsilab's accepted system and Optuna TPE per benchmark"
)
POSTTRAIN_SEEDS = 5
POSTTRAIN_ACCEPTED = 4
"""The issue's target: a version accepted in at least 4 of 5 seeds."""
_OF_RUNS = re.compile(r"(\d+) of (\d+) runs")


def posttrain_row(title: str, rows: Table) -> dict[str, str] | None:
    """Post-training: seeds with a version accepted and the target's change from the base
    (rsilab's, and the peer's beside it), against the issue's target; PARTIAL before all
    seeds are in."""
    accepted = next((r for r in rows if r.get("benchmark", "").startswith(f"{BUILTIN}:")), None)
    target = next((r for r in rows if r.get("benchmark", "").endswith("(target)")), None)
    if accepted is None or target is None:
        return None
    found = _OF_RUNS.search(accepted.get(BUILTIN, ""))
    if found is None:
        return None
    done, runs = int(found.group(1)), int(found.group(2))
    gain = parse_interval(target.get(f"{BUILTIN} - base", ""))
    significant = gain is not None and gain.low > 0
    met = done >= POSTTRAIN_ACCEPTED and significant and runs >= POSTTRAIN_SEEDS
    verdict = f"target: a version accepted in >= {POSTTRAIN_ACCEPTED} of {POSTTRAIN_SEEDS} seeds"
    verdict += ", the target's gain significant: " + ("met" if met else "MISSED")
    if runs < POSTTRAIN_SEEDS:
        verdict += f" (PARTIAL: {runs} of {POSTTRAIN_SEEDS} seeds run)"
    return {
        "claim": "post-training a language model: seeds with a version accepted / target "
        "(arith) change from the base model, final tier",
        "rsilab": f"{done} of {runs} / {target.get(f'{BUILTIN} - base', '-')}",
        "against": _posttrain_peer(rows, target),
        "verdict": verdict,
        "table": title,
    }


def _posttrain_peer(rows: Table, target: dict[str, str]) -> str:
    """The peer as the column reads elsewhere: its seeds accepted, its own change from the base
    in words, and the bracket as rsilab minus it on the target, paired by seed."""
    peer = next(
        (
            c.removesuffix(" - base")
            for c in target
            if c.endswith(" - base") and c != f"{BUILTIN} - base"
        ),
        "",
    )
    if not peer:
        return "-"
    own = next(
        (r for r in rows if r.get("benchmark", "") == f"{peer}: seeds with a version accepted"), {}
    )
    found = _OF_RUNS.search(own.get(peer, ""))
    accepted = f"{found.group(1)} of {found.group(2)} accepted, " if found else ""
    paired = target.get(f"{BUILTIN} - {peer}", "") or "-"
    own_change = target.get(f"{peer} - base", "-")
    return f"{peer}: {accepted}change from base {own_change}; rsilab - it {paired}"


def glance_rows(text: str) -> list[dict[str, str]]:
    """Every headline the tables of ``text`` carry, search first (full tables over quick)."""
    tables = section_tables(text)
    rows: list[dict[str, str]] = []
    searches = sorted(t.removesuffix(QUICK_MARK) for t in tables if t.startswith(SEARCH_PREFIX))
    picked_protocol = _pick(tables, PROTOCOL)
    if picked_protocol is not None:
        rows += protocol_rows(*picked_protocol)
    picked_many = _pick(tables, MANY_SEEDS)
    if picked_many is not None:
        rows += many_seeds_rows(*picked_many)
    for title in dict.fromkeys(searches):
        picked = _pick(tables, title)
        if picked is not None:
            rows += search_rows(*picked)
    for title, make in (
        (HACKING, hacking_row),
        (FALSE_ACCEPTANCE, false_acceptance_row),
        (NULL_CAMPAIGNS, null_campaigns_row),
        (POWER, power_row),
        (OVERHEAD, overhead_row),
        (POSTTRAIN, posttrain_row),
    ):
        picked = _pick(tables, title)
        row = make(*picked) if picked is not None else None
        if row is not None:
            rows.append(row)
    return rows


def glance_section(text: str) -> str | None:
    """The ``## At a glance`` section for ``text``, or None when it has no headline table."""
    rows = glance_rows(text)
    if not rows:
        return None
    columns = ["claim", "rsilab", "against", "verdict", "table"]
    lines = [
        f"## {TITLE}",
        "",
        "Read from the tables below each time the benchmarks write this file; each row names "
        "its table, which says how and when it was measured. A verdict in capitals is a loss "
        "or a miss. *rsilab - it* is the paired difference by seed with its 95% interval.",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
    ]
    lines += ["| " + " | ".join(row[c] for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def with_glance(text: str) -> str:
    """``text`` with its glance section made anew and placed first after the header (an old
    one removed; none added when no headline table is present)."""
    parts = re.split(r"(?m)^(?=## )", text)
    head = parts[0] if parts and not parts[0].startswith("## ") else ""
    sections = [p for p in parts if p.startswith("## ") and not p.startswith(f"## {TITLE}\n")]
    glance = glance_section(text)
    body = ([glance] if glance else []) + sections
    out = head.rstrip("\n") + "\n\n" if head.strip() else ""
    return out + "\n".join(part.rstrip("\n") + "\n" for part in body)
