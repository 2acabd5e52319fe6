"""A kinetics report from trajectories and a fitted Koopman estimator: timescales, Chapman-Kolmogorov test,
metastable states, populations and MFPTs, each with bootstrap error bars, in Markdown, HTML and JSON with plots.

    report = kinetics_report(estimator, trajectories, lags=[1, 2, 4, 8], time_step=0.1, n_states=2, out="runs/k")

writes ``report.md``, ``report.html``, ``report.json`` (every number) and ``timescales.png``,
``chapman_kolmogorov.png``, ``free_energy.png`` into ``out``. The CK test here is the MSM user's: the
observables and start weights are the indicators of the metastable states (:mod:`sciml.koopman.states`), so
it checks P(state j after n lags | state i) predicted by the model at one lag against the data at n lags.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sciml.koopman.bootstrap import (
    Bands,
    TrajectoryFeatures,
    bootstrap_chapman_kolmogorov,
    bootstrap_timescales,
    fitted,
)
from sciml.koopman.estimator import KoopmanEstimator
from sciml.koopman.lag import choose_lag
from sciml.koopman.states import eigenfunction_coordinates, metastable_states


def kinetics_report(
    estimator: KoopmanEstimator,
    trajectories: Sequence,
    lags: Sequence[int],
    time_step: float,
    n_states: int = 2,
    out: str | Path = "kinetics",
    time_unit: str = "ps",
    processes: int = 3,
    ck_steps: int = 4,
    samples: int = 200,
    confidence: float = 0.95,
    microstates: int = 50,
    seed: int = 0,
    compare: Sequence | None = None,
    lag_choice: str = "plateau",
    groups: Sequence[int] | None = None,
) -> dict:
    """Analyse ``trajectories`` (per trajectory: what ``estimator.features`` takes, or a list of such chunks)
    with the trained encoders of ``estimator`` (its lag is the model's; its moments are refitted on all of
    ``trajectories``) and write the report into ``out``; ``time_step`` is the time between frames in
    ``time_unit``. ``compare``: other trajectories (same form, e.g. the molecule under another potential)
    whose populations and MFPTs in these states are reported too (``numbers["states"]["compared"]`` and a
    section of the report; :meth:`~sciml.koopman.states.MetastableStates.statistics_of`). ``lag_choice``:
    ``"plateau"`` reports at the estimator's lag when its implied timescales have converged there, else at the
    first larger lag of ``lags`` where they have (:func:`~sciml.koopman.lag.choose_lag`: the plateau and the
    Chapman-Kolmogorov test; the encoders stay, the model is refitted at that lag); ``"given"`` keeps the
    estimator's lag and only says whether it has converged (``numbers["lag_choice"]``). A lag of ``lags`` above a
    quarter of the shortest resampled unit (a trajectory, or a block of one:
    :class:`~sciml.koopman.bootstrap.TrajectoryFeatures`) is dropped and named in
    ``numbers["timescales"]["dropped_lags"]``. ``groups``: per trajectory, the posterior
    draw of the potential it ran on (:class:`~sciml.uncertainty.PosteriorSamples`): the intervals then resample
    the draws (sampling and the potential's error), ``sampling_only`` entries resample within them, and
    ``numbers["potential_error"]`` gives the share of each interval that is the potential's
    (:func:`potential_share`).
    Returns the report's numbers (what ``report.json`` holds)."""
    if lag_choice not in ("plateau", "given"):
        raise ValueError(f"lag_choice must be 'plateau' or 'given', got {lag_choice!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    given = estimator.lagtime or 1
    base = TrajectoryFeatures(estimator, trajectories, groups=groups)
    # a lag must leave pairs in every resampled unit (a block is shorter than its trajectory): a quarter of one
    dropped = sorted(lag for lag in lags if lag != given and lag > base.shortest_piece / 4)
    lags = sorted({*lags, given} - set(dropped))

    def analysed(lag: int) -> tuple[KoopmanEstimator, object, TrajectoryFeatures]:
        """The point estimate at ``lag`` on all the data, its metastable states and the state indicators."""
        model = fitted(estimator, base.moments(lag), lag)
        states = metastable_states(model, trajectories, n_states, time_step, microstates, samples, confidence,
                                   seed=seed, groups=groups)  # fmt: skip
        indicators = {f"state {j}": [(a == j).astype(float) for a in states.assignments()] for j in range(n_states)}
        return model, states, base.with_values(indicators, indicators)

    model, states, features = analysed(given)
    timescales = bootstrap_timescales(model, features, lags, time_step, samples, confidence, seed)
    tests = {}

    def ck_at(lag: int):
        if lag not in tests:
            tests[lag] = bootstrap_chapman_kolmogorov(model, features, lag, ck_steps, samples, confidence, seed)
        return tests[lag]

    choice = choose_lag(timescales, lags, time_step, given, lambda lag: ck_at(lag).passed, unit=time_unit,
                        search=lag_choice == "plateau")  # fmt: skip
    lag = choice.lag
    if lag != given:  # the states, populations and MFPTs of the model at the chosen lag
        model, states, features = analysed(lag)
        tests[lag] = bootstrap_chapman_kolmogorov(model, features, lag, ck_steps, samples, confidence, seed)
    ck, estimator = ck_at(lag), model
    numbers = {
        "lag": lag, "lag_choice": choice.as_dict(), "time_step": time_step, "time_unit": time_unit,
        "trajectories": len(trajectories),
        "resampled_units": features.count, "confidence": confidence, "samples": samples,
        "timescales": {"lags": list(lags), "dropped_lags": dropped, **_bands(timescales, slice(1, processes + 1))},
        "chapman_kolmogorov": {"passed": ck.passed, "summary": ck.summary(), "steps": ck_steps,
                               "predicted": _bands(ck.predicted), "estimated": _bands(ck.estimated)},
        "states": {"count": n_states, "populations": _bands(states.populations), "mfpt": _bands(states.mfpt),
                   "representatives": states.representatives, "microstates": microstates},
    }  # fmt: skip
    if groups is not None:
        within = bootstrap_timescales(model, features, lags, time_step, samples, confidence, seed, within_groups=True)
        columns, alone = slice(1, processes + 1), states.sampling_only
        numbers["timescales"]["sampling_only"] = _bands(within, columns)
        numbers["states"]["sampling_only"] = {"populations": _bands(alone.populations), "mfpt": _bands(alone.mfpt)}
        share = {"timescales": potential_share(timescales, within)[:, columns],
                 "populations": potential_share(states.populations, alone.populations),
                 "mfpt": potential_share(states.mfpt, alone.mfpt)}  # fmt: skip
        numbers["potential_error"] = {"posterior_samples": len(set(groups)),
                                      "share": {key: value.tolist() for key, value in share.items()}}  # fmt: skip
    if compare is not None:
        other = states.statistics_of(estimator, compare)
        numbers["states"]["compared"] = {"trajectories": len(compare), "populations": _bands(other.populations),
                                         "mfpt": _bands(other.mfpt)}  # fmt: skip
    coordinates = eigenfunction_coordinates(estimator, trajectories, 2)
    figures = _plots(out, timescales, lags, lag, ck, coordinates, states, time_step, time_unit, processes)
    (out / "report.json").write_text(json.dumps(numbers, indent=1, default=_plain) + "\n")
    markdown = _markdown(numbers, figures)
    (out / "report.md").write_text(markdown)
    (out / "report.html").write_text(_html(markdown))
    return numbers


def potential_share(combined: Bands, sampling_only: Bands) -> np.ndarray:
    """The share of the combined interval's variance that sampling does not explain, 1 - (w_s / w_c)^2 with w the
    interval widths, clipped to [0, 1] (0: sampling alone; near 1: the potential's error dominates); NaN where
    the combined interval is empty."""
    width_c = combined.upper - combined.lower
    width_s = sampling_only.upper - sampling_only.lower
    with np.errstate(divide="ignore", invalid="ignore"):
        share = 1 - (width_s / width_c) ** 2
    return np.where(width_c > 0, np.clip(share, 0, 1), np.nan)


def _bands(bands: Bands, columns: slice | None = None) -> dict:
    pick = (lambda a: a[..., columns]) if columns is not None else (lambda a: a)
    return {"estimate": pick(bands.estimate).tolist(), "lower": pick(bands.lower).tolist(),
            "upper": pick(bands.upper).tolist()}  # fmt: skip


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _plots(out, timescales, lags, lag, ck, coordinates, states, time_step, unit, processes) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = {}
    lag_times = np.asarray(lags) * time_step
    fig, axis = plt.subplots(figsize=(5, 4))
    shown = range(1, min(processes, timescales.estimate.shape[1] - 1) + 1)
    for i in shown:
        axis.plot(lag_times, timescales.estimate[:, i], "o-", label=f"process {i}")
        axis.fill_between(lag_times, timescales.lower[:, i], timescales.upper[:, i], alpha=0.25)
    bottom = 0.5 * min(np.nanmin(timescales.lower[:, list(shown)]), lag_times.min())
    axis.fill_between(lag_times, bottom, lag_times, color="k", alpha=0.15, label="t < lag")
    axis.set_ylim(bottom=bottom)
    axis.set(xlabel=f"lag ({unit})", ylabel=f"implied timescale ({unit})", yscale="log")
    axis.legend()
    files["timescales"] = _save(fig, out / "timescales.png")

    n = states.n_states
    fig, axes = plt.subplots(n, n, figsize=(2.6 * n, 2.2 * n), sharex=True, sharey=True, squeeze=False)
    times = np.arange(0, ck.predicted.estimate.shape[0] + 1) * lag * time_step
    for i in range(n):
        for j in range(n):
            ax = axes[i, j]
            start = float(i == j)
            for bands, style, name in ((ck.predicted, "-", "model"), (ck.estimated, "--", "data")):
                ax.plot(times, [start, *bands.estimate[:, i, j]], style, label=name)
                ax.fill_between(times, [start, *bands.lower[:, i, j]], [start, *bands.upper[:, i, j]], alpha=0.25)
            ax.set_title(f"{i} -> {j}", fontsize=9)
    axes[0, 0].legend(fontsize=8)
    fig.supxlabel(f"time ({unit})")
    files["chapman_kolmogorov"] = _save(fig, out / "chapman_kolmogorov.png")

    points = np.concatenate(coordinates)
    assignments = np.concatenate(states.assignments())
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4))
    if points.shape[1] >= 2:
        density, xe, ye = np.histogram2d(points[:, 0], points[:, 1], bins=50, density=True)
        with np.errstate(divide="ignore"):
            free = -np.log(density.T)
        mesh = left.pcolormesh(xe, ye, free - np.nanmin(free[np.isfinite(free)]), shading="auto")
        fig.colorbar(mesh, ax=left, label="free energy (kT)")
        left.set(xlabel="eigenfunction 1", ylabel="eigenfunction 2", title="free energy")
        right.scatter(points[:, 0], points[:, 1], c=assignments, s=2, cmap="tab10", vmin=-1, vmax=9)
        right.set(xlabel="eigenfunction 1", ylabel="eigenfunction 2", title="metastable states")
    else:
        left.hist(points[:, 0], bins=50)
        right.scatter(points[:, 0], np.zeros(len(points)), c=assignments, s=2)
    files["free_energy"] = _save(fig, out / "free_energy.png")
    return files


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path.name


def _markdown(numbers: dict, figures: dict[str, str]) -> str:
    unit, level = numbers["time_unit"], int(round(100 * numbers["confidence"]))
    ts, choice = numbers["timescales"], numbers["lag_choice"]
    lines = [
        "# Kinetics report", "",
        f"{numbers['trajectories']} trajectories ({numbers['resampled_units']} resampled units), a frame every "
        f"{numbers['time_step']:g} {unit}; model lag {numbers['lag']} frames. Intervals: {level} % bootstrap over "
        f"{'posterior draws of the potential' if 'potential_error' in numbers else 'trajectories'} "
        f"({numbers['samples']} samples).", "",
        "## The lag", "", f"Model lag {choice['lag']} frames (given: {choice['given']}). {choice['reason']}.", "",
        "## Implied timescales", "",
        "| lag (frames) | " + " | ".join(f"process {i + 1} ({unit})" for i in range(len(ts["estimate"][0])))
        + " | plateau | CK test |",
        "| ---: |" + " ---: |" * len(ts["estimate"][0]) + " --- | --- |",
    ]  # fmt: skip
    for k, lag in enumerate(ts["lags"]):
        cells = [f"{e:.4g} [{lo:.4g}, {hi:.4g}]" for e, lo, hi in zip(ts["estimate"][k], ts["lower"][k], ts["upper"][k],
                                                                        strict=True)]  # fmt: skip
        ck = {True: "passed", False: "failed", None: "-"}[choice["ck_passed"].get(str(lag))]
        lines.append(f"| {lag} | " + " | ".join(cells) + f" | {'yes' if choice['plateau'][k] else 'no'} | {ck} |")
    ck = numbers["chapman_kolmogorov"]["summary"]
    lines += ["", f"![implied timescales]({figures['timescales']})", "", "## Chapman-Kolmogorov test", "", ck + ".",
              "", f"![Chapman-Kolmogorov test]({figures['chapman_kolmogorov']})", "",
              "## Metastable states", ""]  # fmt: skip
    states = numbers["states"]
    lines += ["| state | population | representative frames (trajectory, frame) |", "| ---: | ---: | --- |"]
    for j in range(states["count"]):
        p = states["populations"]
        frames = ", ".join(f"({r}, {t})" for r, t in states["representatives"][j])
        lines.append(f"| {j} | {p['estimate'][j]:.3f} [{p['lower'][j]:.3f}, {p['upper'][j]:.3f}] | {frames} |")
    header = "| from \\ to | " + " | ".join(str(j) for j in range(states["count"])) + " |"
    lines += ["", f"Mean first-passage times ({unit}):", "", header, "| ---: |" + " ---: |" * states["count"]]
    m = states["mfpt"]
    for a in range(states["count"]):
        cells = ["-" if a == b else f"{m['estimate'][a][b]:.4g} [{m['lower'][a][b]:.4g}, {m['upper'][a][b]:.4g}]"
                 for b in range(states["count"])]  # fmt: skip
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    if "compared" in states:
        lines += ["", *_compared_lines(states["compared"], states["count"], unit)]
    if "potential_error" in numbers:
        lines += ["", *_potential_error_lines(numbers, unit)]
    lines += ["", f"![free energy and states]({figures['free_energy']})", ""]
    return "\n".join(lines)


def _potential_error_lines(numbers: dict, unit: str) -> list[str]:
    """The Markdown section of the potential's share of the intervals (trajectories on posterior draws)."""
    error, ts, states = numbers["potential_error"], numbers["timescales"], numbers["states"]
    row = ts["lags"].index(numbers["lag"])
    alone, share = ts["sampling_only"], error["share"]
    lines = ["## The potential's error in the intervals", "",
             f"The replicas ran on {error['posterior_samples']} surfaces drawn from the potential's own uncertainty. "
             "Each interval above resamples those draws (sampling and the potential's error); beside it, the "
             "interval of sampling alone (resampling within each draw) and the share of the interval's variance "
             "that is the potential's, 1 - (sampling width / width)^2.", "",
             "| quantity | estimate [interval] | sampling alone | potential's share |",
             "| --- | ---: | ---: | ---: |"]  # fmt: skip

    def add(name: str, bands: dict, sampled: dict, fraction, index: tuple) -> None:
        def at(values):
            for i in index:
                values = values[i]
            return values

        e, lo, hi = (at(bands[key]) for key in ("estimate", "lower", "upper"))
        s_lo, s_hi, fraction = at(sampled["lower"]), at(sampled["upper"]), at(fraction)
        lines.append(f"| {name} | {e:.4g} [{lo:.4g}, {hi:.4g}] | [{s_lo:.4g}, {s_hi:.4g}] | {100 * fraction:.0f} % |")

    for i in range(len(ts["estimate"][row])):
        add(f"timescale {i + 1} ({unit}), lag {numbers['lag']}", ts, alone, share["timescales"], (row, i))
    alone = states["sampling_only"]
    for j in range(states["count"]):
        add(f"population {j}", states["populations"], alone["populations"], share["populations"], (j,))
    for a in range(states["count"]):
        for b in range(states["count"]):
            if a != b:
                add(f"MFPT {a} -> {b} ({unit})", states["mfpt"], alone["mfpt"], share["mfpt"], (a, b))
    return lines


def _compared_lines(compared: dict, count: int, unit: str) -> list[str]:
    """The Markdown section of another set of trajectories in the same states."""
    p, m = compared["populations"], compared["mfpt"]
    lines = [f"### The same states in the compared trajectories ({compared['trajectories']} trajectories)", "",
             "| state | population | " + " | ".join(f"MFPT -> {b} ({unit})" for b in range(count)) + " |",
             "| ---: | ---: |" + " ---: |" * count]  # fmt: skip
    for a in range(count):
        cells = ["-" if a == b else f"{m['estimate'][a][b]:.4g} [{m['lower'][a][b]:.4g}, {m['upper'][a][b]:.4g}]"
                 for b in range(count)]  # fmt: skip
        population = f"{p['estimate'][a]:.3f} [{p['lower'][a]:.3f}, {p['upper'][a]:.3f}]"
        lines.append(f"| {a} | {population} | " + " | ".join(cells) + " |")
    return lines


def _html(markdown: str) -> str:
    """The Markdown report as a standalone HTML page (headings, paragraphs, tables, images)."""
    body, table = [], []

    def flush_table() -> None:
        if table:
            rows = [row for row in table if not set(row.replace("|", "").strip()) <= set("-: ")]
            cells = [[html.escape(c.strip()) for c in row.strip().strip("|").split("|")] for row in rows]
            head = "".join(f"<th>{c}</th>" for c in cells[0])
            rest = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in cells[1:])
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rest}</tbody></table>")
            table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush_table()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line.lstrip('# '))}</h{level}>")
        elif line.startswith("!["):
            alt, source = line[2:].split("](")
            body.append(f'<img alt="{html.escape(alt)}" src="{html.escape(source.rstrip(")"))}">')
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    flush_table()
    style = (
        "body{font-family:sans-serif;max-width:60em;margin:auto}table{border-collapse:collapse}td,th{padding:0 .6em}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Kinetics report</title><style>{style}</style>"
        f"</head><body>{''.join(body)}</body></html>\n"
    )
