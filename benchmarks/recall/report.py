"""Tables (plain text and Markdown) and a hand-written SVG chart of the benchmark's results."""

from __future__ import annotations

from html import escape
from typing import Any

from .context import STRATEGIES
from .facts import KINDS

COLORS = {"vaultlcm": "#3b6ea8", "window": "#c9812b", "window+summary": "#7a9a3c"}


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def table(headers: list[str], rows: list[list[Any]], markdown: bool) -> str:
    cells = [[str(c) for c in r] for r in rows]
    if markdown:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in cells]
        return "\n".join(out)
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(out)


def context_table(results: dict[str, Any], markdown: bool) -> str:
    rows = []
    for size, res in results["sizes"].items():
        for cell in res.get("contexts", []):
            if cell["strategy"] != "vaultlcm":
                continue
            b = cell["budget"]
            others = {c["strategy"]: c for c in res["contexts"] if c["budget"] == b}
            rows.append([size, f"{b:,}", *(pct(others[s]["score"]) for s in STRATEGIES if s in others),
                         pct(cell["extra"].get("budget_use")), "yes" if cell["extra"].get("vault_changed") else "no",
                         f"{cell['extra'].get('summaries', 0)} + {cell['extra'].get('raw_messages', 0)}"])
    return table(["history", "budget", *STRATEGIES, "vaultlcm budget use", "assemble wrote", "vaultlcm summaries + raw"],
                 rows, markdown)


def kind_table(results: dict[str, Any], markdown: bool) -> str:
    rows = []
    for size, res in results["sizes"].items():
        cells = res.get("contexts", [])
        for s in STRATEGIES:
            mine = [c for c in cells if c["strategy"] == s]
            if not mine:
                continue
            row = [size, s]
            for kind in KINDS:
                ids = [q for q, k in res["kinds"].items() if k == kind]
                hits = sum(c["found"][q] for c in mine for q in ids)
                row.append(pct(hits / (len(ids) * len(mine))) if ids else "–")
            rows.append(row)
    return table(["history", "strategy", *KINDS], rows, markdown)


def agent_table(results: dict[str, Any], markdown: bool) -> str:
    rows = []
    for size, res in results["sizes"].items():
        a = res.get("agent")
        if not a:
            continue
        n = a["questions"]
        row = [size, n, pct(a["found"] / n), pct(a["found_in_snippets"] / n),
               f"{a['latest_first']}/{a['updated_questions']}" + (f" ({pct(a['latest_first'] / a['updated_questions'])})" if a["updated_questions"] else ""),
               f"{a['calls'] / n:.1f}"]
        for kind in KINDS:
            k = a["by_kind"].get(kind)
            row.append(f"{pct(k['found'] / k['questions'])} of {k['questions']}" if k else "–")
        rows.append(row)
    return table(["history", "questions", "found", "in snippets alone", "latest first", "calls/question", *KINDS], rows, markdown)


def quality_table(results: dict[str, Any], markdown: bool) -> str:
    rows = []
    for name, q in results.get("quality", {}).items():
        for d, info in q["by_depth"].items():
            r, rc = info["ratio"], info["ratio_recounted"]
            span = f"{r['median']:.2f} [{r['p25']:.2f}–{r['p75']:.2f}]" if r.get("n") else "–"
            kept = f"{info['facts_kept']}/{info['facts_traced']} ({pct(info['facts_kept'] / info['facts_traced'])})" if info["facts_traced"] else "–"
            rows.append([name, d, info["notes"], span, f"{rc['median']:.2f}" if rc.get("n") else "–", kept])
    return table(["corpus", "depth", "notes", "body/source tokens: median [p25–p75]", "recounted median", "planted facts kept"],
                 rows, markdown)


def makeup_table(results: dict[str, Any], markdown: bool) -> str:
    rows = []
    for name, q in results.get("quality", {}).items():
        rep = q["condensed_repetition"]
        rows.append([name, q["notes"], pct(q["leaf_tool_share"]), pct(q["leaf_user_share"]),
                     f"{rep['median']:.0%}" if rep.get("n") else "–"])
    return table(["corpus", "notes", "leaf words from tool traffic", "leaf words from the user",
                  "condensed 8-gram repetition (median)"], rows, markdown)


def all_tables(results: dict[str, Any], markdown: bool = False) -> str:
    parts = []
    sections = [("Answers present in the context", context_table), ("By kind of question (mean over budgets)", kind_table),
                ("Scripted recall agent (grep + expand)", agent_table), ("Summary quality by depth", quality_table),
                ("What leaves are made of; repetition", makeup_table)]
    for title, fn in sections:
        body = fn(results, markdown)
        if body.count("\n") >= (2 if markdown else 1):
            parts.append((f"### {title}" if markdown else title) + "\n\n" + body)
    return "\n\n".join(parts)


def svg_chart(results: dict[str, Any]) -> str:
    """Grouped bars: share of answers in the context, per history size and budget, one bar per strategy."""
    groups = [(size, c["budget"]) for size, res in results["sizes"].items() for c in res.get("contexts", [])
              if c["strategy"] == "vaultlcm"]
    score = {(size, c["budget"], c["strategy"]): c["score"] for size, res in results["sizes"].items()
             for c in res.get("contexts", [])}
    bar, gap, group_gap = 16, 2, 26
    left, top, plot_h = 56, 40, 220
    group_w = len(STRATEGIES) * (bar + gap) - gap
    width = left + len(groups) * (group_w + group_gap) + 20
    height = top + plot_h + 70
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            'font-family="Helvetica, Arial, sans-serif" font-size="11">'),
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           (f'<text x="{left}" y="18" font-size="13" font-weight="bold">Answers present in the assembled context '
            '(share of questions)</text>')]
    for k in range(0, 101, 25):
        y = top + plot_h - plot_h * k / 100
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#dddddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{k}%</text>')
    x = left + group_gap / 2
    last_size = None
    for size, budget in groups:
        for i, s in enumerate(STRATEGIES):
            v = score.get((size, budget, s))
            if v is None:
                continue
            h = plot_h * v
            bx = x + i * (bar + gap)
            out.append(f'<rect x="{bx:.1f}" y="{top + plot_h - h:.1f}" width="{bar}" height="{h:.1f}" fill="{COLORS[s]}">'
                       f'<title>{escape(size)}, budget {budget}: {escape(s)} {v:.0%}</title></rect>')
            out.append(f'<text x="{bx + bar / 2:.1f}" y="{top + plot_h - h - 3:.1f}" text-anchor="middle" '
                       f'font-size="8" fill="#333333">{v * 100:.0f}</text>')
        out.append(f'<text x="{x + group_w / 2:.1f}" y="{top + plot_h + 14}" text-anchor="middle">{budget // 1000}k</text>')
        if size != last_size:
            if last_size is not None:
                sep = x - group_gap / 2
                out.append(f'<line x1="{sep:.1f}" y1="{top}" x2="{sep:.1f}" y2="{top + plot_h + 34}" stroke="#999999" '
                           'stroke-dasharray="3,3"/>')
            out.append(f'<text x="{x:.1f}" y="{top + plot_h + 30}" font-weight="bold">history {escape(size)}</text>')
            last_size = size
        x += group_w + group_gap
    lx = left
    for s in STRATEGIES:
        out.append(f'<rect x="{lx}" y="{height - 18}" width="10" height="10" fill="{COLORS[s]}"/>')
        out.append(f'<text x="{lx + 14}" y="{height - 9}">{escape(s)}</text>')
        lx += 120
    out.append(f'<text x="{lx + 10}" y="{height - 9}" fill="#555555">by history size and budget; numbers in %</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def verdicts(results: dict[str, Any]) -> list[str]:
    """The product's recall and summary bars, each checked against these results (✅ met, ❌ not yet)."""
    out: list[str] = []

    def line(ok: bool, text: str) -> None:
        out.append(f"- {'✅' if ok else '❌'} {text}")

    cells = [(size, c) for size, res in results["sizes"].items() for c in res.get("contexts", [])]
    score = {(size, c["budget"], c["strategy"]): c["score"] for size, c in cells}
    mine = [(size, c) for size, c in cells if c["strategy"] == "vaultlcm"]
    if mine:
        worse = [f"{s}/{c['budget'] // 1000}k" for s, c in mine if c["score"] < score[(s, c["budget"], "window")]]
        line(not worse, f"vaultlcm holds at least as many answers as the window in every cell "
                        f"({len(mine) - len(worse)}/{len(mine)} cells{'; behind in ' + ', '.join(worse) if worse else ''})")
        big = [(s, c) for s, c in mine if results["sizes"][s]["tokens"] >= 100_000]
        ahead = [1 for s, c in big if c["score"] > max(score[(s, c["budget"], "window")], score[(s, c["budget"], "window+summary")])]
        if big:
            line(len(ahead) == len(big), f"vaultlcm ahead of both baselines from 128k up ({len(ahead)}/{len(big)} cells)")
        over = [c["extra"]["budget_use"] for s, c in mine if results["sizes"][s]["tokens"] > c["budget"]]
        if over:
            line(min(over) >= 0.95, f"at least 95% of the budget used when the history exceeds it "
                                   f"(used {min(over):.0%}–{max(over):.0%})")
        wrote = sum(bool(c["extra"].get("vault_changed")) for _, c in mine)
        line(wrote == 0, f"`assemble` never writes to the vault (wrote in {wrote} of {len(mine)} calls)")
    agents = [(s, r["agent"]) for s, r in results["sizes"].items() if r.get("agent")]
    if agents:
        low = min(a["found"] / a["questions"] for _, a in agents)
        line(low >= 0.95, f"the scripted agent finds at least 95% of answers at every size (lowest {low:.0%})")
        upd = [a["latest_first"] / a["updated_questions"] for _, a in agents if a["updated_questions"]]
        if upd:
            line(min(upd) >= 0.95, f"the latest value comes first for at least 95% of changed values (lowest {min(upd):.0%})")
    sess = [(n, q) for n, q in results.get("quality", {}).items() if n.startswith("session")]
    if sess:
        leaf = [q["by_depth"].get(0, q["by_depth"].get("0", {})) for _, q in sess]
        ratios = [d["ratio"]["median"] for d in leaf if d.get("ratio", {}).get("n")]
        if ratios:
            line(max(ratios) <= 0.35, f"leaves at most 0.35 of their sources, median (worst {max(ratios):.2f})")
        kept0 = [d["facts_kept"] / d["facts_traced"] for d in leaf if d.get("facts_traced")]
        if kept0:
            line(min(kept0) >= 0.8, f"at least 80% of planted facts kept in their leaf (lowest {min(kept0):.0%})")
        d2 = [q["by_depth"].get(2, q["by_depth"].get("2", {})) for _, q in sess]
        kept2 = [d["facts_kept"] / d["facts_traced"] for d in d2 if d.get("facts_traced")]
        if kept2:
            line(min(kept2) >= 0.5, f"at least 50% of planted facts kept at depth 2 (lowest {min(kept2):.0%})")
        reps = [q["condensed_repetition"]["median"] for _, q in sess if q["condensed_repetition"].get("n")]
        if reps:
            line(max(reps) <= 0.3, f"a condensed note repeats at most 30% of its children's 8-grams, median (worst {max(reps):.0%})")
    return out
