"""PNG plots of one run (matplotlib, a benchmark-only dependency, drawn off-screen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot() -> Any:  # noqa: ANN401 - matplotlib is optional and loosely typed
    import matplotlib as mpl  # noqa: PLC0415

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def latency_vs_n(latency: dict[str, Any], out: Path) -> Path:
    """select_for_task and assemble p50/p99 against N, per mode, log-log."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = sorted(latency["sizes"].values(), key=lambda s: s["n"])
    for mode, colour in (("lexical", "tab:blue"), ("hybrid", "tab:orange")):
        for api, style in (("select_for_task", "-"), ("assemble", ":")):
            pts = [(s["n"], s["modes"][mode][api]["latency_ms"]) for s in sizes if mode in s["modes"]]
            if not pts:
                continue
            xs = [n for n, _ in pts]
            ax.plot(
                xs, [p["p99"] for _, p in pts], style, color=colour, marker="o", label=f"{mode} {api} p99"
            )
            ax.plot(
                xs,
                [p["p50"] for _, p in pts],
                style,
                color=colour,
                marker=".",
                alpha=0.5,
                label=f"{mode} {api} p50",
            )
        floor = [(s["n"], s["modes"][mode]["floor_ms"]["p99"]) for s in sizes if mode in s["modes"]]
        if floor:
            ax.plot(
                *zip(*floor, strict=True), "--", color=colour, alpha=0.4, label=f"{mode} bare queries p99"
            )
    ax.axhline(latency["deadline_ms"], color="grey", lw=0.8, label="deadline")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories (N)")
    ax.set_ylabel("ms per turn")
    ax.set_title("Per-turn latency vs corpus size")
    ax.legend(fontsize=6, ncol=2)
    path = out / "latency_vs_n.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def throughput(latency: dict[str, Any], out: Path) -> Path:
    """Turns/s (all, and with every source complete) against concurrency."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, size in sorted(latency["sizes"].items(), key=lambda kv: kv[1]["n"]):
        for mode, data in size["modes"].items():
            rows = data["throughput"]
            xs = [r["concurrency"] for r in rows]
            line = ax.plot(xs, [r["turns_per_s"] for r in rows], marker="o", label=f"{key} {mode} all turns")
            ax.plot(
                xs,
                [r["complete_turns_per_s"] for r in rows],
                "--",
                marker="x",
                color=line[0].get_color(),
                label=f"{key} {mode} every source complete",
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("symlog", linthresh=10)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("concurrent turns")
    ax.set_ylabel("turns / s")
    ax.set_title("Throughput (select_for_task)")
    ax.legend(fontsize=6)
    path = out / "throughput.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def quality(result: dict[str, Any], out: Path) -> Path:
    """Grouped bars of the quality figures per system."""
    plt = _pyplot()
    metrics = (
        "evidence_recall",
        "false_abstention",
        "trivial_abstention",
        "foreign_abstention",
        "irrelevant_memory_rate",
    )
    systems = list(result["systems"])
    personal = result.get("personal") or {}
    if personal:
        fig, (ax, pax) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
        _personal_bars(pax, personal)
    else:
        fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / max(len(systems), 1)
    for i, name in enumerate(systems):
        vals = [result["systems"][name][m] for m in metrics]
        ax.bar([j + i * width for j in range(len(metrics))], vals, width, label=name)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(metrics))])
    ax.set_xticklabels([m.replace("_", "\n") for m in metrics], fontsize=7)
    ax.set_ylim(0, 1)
    ax.set_title(f"Relevance on LoCoMo dev (budget {result['budget']})")
    ax.legend(fontsize=7)
    path = out / "quality.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def recall_vs_injected(result: dict[str, Any], out: Path) -> Path:
    """Hit rate against memories injected per answerable question: each system's top-k prefixes as
    a curve, and where each broker mode stands at the default floor (`RECALL_MIN_SCORE`)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, s in result["systems"].items():
        hit_at = {int(k): v for k, v in s["hit_at"].items()}  # JSON keys are strings
        line = ax.plot(sorted(hit_at), [hit_at[k] for k in sorted(hit_at)], label=name)
        if name.startswith("broker-"):
            ax.scatter(
                [s["injected_per_answerable_turn"]], [s["hit_rate"]], color=line[0].get_color(), zorder=3
            )
    ax.set_xlabel("memories injected per answerable question")
    ax.set_ylabel("share with evidence selected")
    ax.set_ylim(0, 1)
    ax.set_title("LoCoMo dev: recall against memories injected (dots: the broker at the floor)")
    ax.legend(fontsize=7)
    path = out / "recall_vs_injected.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _personal_bars(ax: Any, personal: dict[str, Any]) -> None:  # noqa: ANN401 - a matplotlib Axes
    """Right fact selected and trivial abstention per set and mode (the personal-assistant sets)."""
    labels = [f"{name}\n{mode}" for name, by_mode in personal.items() for mode in by_mode]
    rows = [f for by_mode in personal.values() for f in by_mode.values()]
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [f["hit"] for f in rows], 0.4, label="right fact selected")
    ax.bar([x + 0.2 for x in xs], [f["trivial_abstention"] for f in rows], 0.4, label="trivial abstention")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylim(0, 1)
    ax.set_title("Personal-assistant sets (budget 40)")
    ax.legend(fontsize=7)


def peers(result: dict[str, Any], out: Path) -> Path:
    """Ours beside the peers: p50 bars with p99 marks per system and size, and build rates (log)."""
    plt = _pyplot()
    sizes = sorted(result["sizes"].values(), key=lambda s: s["n"])
    names = list(dict.fromkeys(name for s in sizes for name in s["systems"]))
    fig, (lat_ax, build_ax) = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    width = 0.8 / max(len(sizes), 1)
    for j, size in enumerate(sizes):
        xs = [i + j * width for i, name in enumerate(names) if name in size["systems"]]
        got = [size["systems"][name] for name in names if name in size["systems"]]
        bars = lat_ax.bar(xs, [s["latency_ms"]["p50"] for s in got], width, label=f"N={size['n']} p50")
        lat_ax.scatter(
            xs,
            [s["latency_ms"]["p99"] for s in got],
            marker="_",
            s=200,
            color=bars.patches[0].get_facecolor(),
        )
        built = [(x, s["build"]["per_s"]) for x, s in zip(xs, got, strict=True) if s["build"]["per_s"]]
        if built:
            build_ax.bar(*zip(*built, strict=True), width, label=f"N={size['n']}")
    for ax in (lat_ax, build_ax):
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
        ax.set_xticklabels(names, rotation=35, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    lat_ax.set_ylabel("ms per call (bar p50, dash p99)")
    lat_ax.set_title("Per-call latency, same corpus and tasks")
    build_ax.set_ylabel("items / s")
    build_ax.set_title("Build rate (no embedding)")
    path = out / "peers.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


ENGINE_COLOURS = {"sqlite": "tab:blue", "postgresql": "tab:purple"}


def engines(result: dict[str, Any], out: Path) -> Path:
    """SQLite and PostgreSQL: turn p50 bars with p99 marks per size and mode, and writes/s per
    writer level."""
    plt = _pyplot()
    sizes = sorted(result["sizes"].values(), key=lambda s: s["n"])
    fig, (lat_ax, write_ax) = plt.subplots(1, 2, figsize=(11, 4.5))
    groups = [(s["n"], mode, per) for s in sizes for mode, per in s["turns"].items()]
    wgroups = [(s["n"], level, per) for s in sizes for level, per in s["writes"].items()]
    for k, (engine, colour) in enumerate(ENGINE_COLOURS.items()):
        xs = [i + 0.4 * k for i in range(len(groups))]
        lat_ax.bar(
            xs, [g[2][engine]["latency_ms"]["p50"] for g in groups], 0.4, color=colour, label=f"{engine} p50"
        )
        lat_ax.scatter(
            xs, [g[2][engine]["latency_ms"]["p99"] for g in groups], marker="_", s=200, color=colour
        )
        wxs = [i + 0.4 * k for i in range(len(wgroups))]
        write_ax.bar(wxs, [g[2][engine]["entries_per_s"] for g in wgroups], 0.4, color=colour, label=engine)
    lat_ax.set_xticks([i + 0.2 for i in range(len(groups))])
    lat_ax.set_xticklabels([f"{n:,} {mode}" for n, mode, _ in groups], rotation=20, fontsize=7)
    lat_ax.axhline(result["deadline_ms"], color="grey", lw=0.8, label="deadline")
    lat_ax.set_ylabel("ms per turn (bar p50, dash p99)")
    lat_ax.set_title("select_for_task, same corpus and tasks")
    write_ax.set_xticks([i + 0.2 for i in range(len(wgroups))])
    write_ax.set_xticklabels([f"{n:,} x{level}" for n, level, _ in wgroups], rotation=20, fontsize=7)
    write_ax.set_ylabel("entries / s (add_entry, lexical)")
    write_ax.set_title("Writes: writer processes")
    for ax in (lat_ax, write_ax):
        ax.legend(fontsize=7)
    path = out / "engines.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
