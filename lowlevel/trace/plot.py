"""A timeline as a picture (matplotlib, the optional `plot` extra): a row per host thread and
per stream against time, each span a bar coloured by its category."""
from .timeline import stream_label

COLOURS = {"op": "tab:blue", "backend": "tab:purple", "frontend": "tab:cyan", "driver": "tab:gray", "cublas": "tab:olive",
           "profiler": "lightgray", "kernel": "tab:red", "copy": "tab:green", "memset": "tab:purple",
           "host function": "tab:orange", "graph": "tab:brown"}


def _pyplot():
    try:
        import matplotlib  # noqa: PLC0415  (optional: imported only when a plot is asked for)
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as e:
        raise ImportError("profile.plot() needs matplotlib: pip install lowlevel[plot]") from e
    return plt


def rows(timeline) -> list[tuple[str, list[dict]]]:
    """(label, spans) for each host thread, then each device stream."""
    out = []
    for ident in sorted({s["tid"] for s in timeline.host}):
        out.append((f"host {timeline.threads.get(ident, ident)}", [s for s in timeline.host if s["tid"] == ident]))
    for device, stream in sorted({(s["device"], s["stream"]) for s in timeline.device}):
        out.append((f"device {device}: {stream_label(stream)}",
                    [s for s in timeline.device if (s["device"], s["stream"]) == (device, stream)]))
    return out


def plot(timeline, path) -> None:
    """Draw `timeline` into `path` (any format matplotlib writes: .png, .svg, .pdf)."""
    plt = _pyplot()
    lo = timeline.bounds()[0]
    lines = rows(timeline)
    fig, ax = plt.subplots(figsize=(12, 1 + 0.5 * max(1, len(lines))))
    seen = set()
    for y, (_, spans) in enumerate(lines):
        for span in sorted(spans, key=lambda s: s["start"] - s["end"]):      # longest first
            cat = span["cat"]
            height = 0.8 if cat in ("op", "kernel", "copy", "graph") else 0.5
            ax.broken_barh([((span["start"] - lo) / 1e6, max(1e-4, (span["end"] - span["start"]) / 1e6))],
                           (y - height / 2, height), color=COLOURS.get(cat, "black"),
                           label=None if cat in seen else cat)
            seen.add(cat)
    ax.set_yticks(range(len(lines)), [label for label, _ in lines])
    ax.invert_yaxis()
    modelled = ", device times modelled" if timeline.modelled else ""
    ax.set_xlabel(f"time since the profile began (ms){modelled}")
    ax.set_title(timeline.driver.split(";")[0])       # which driver ran, without the why
    if seen:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
