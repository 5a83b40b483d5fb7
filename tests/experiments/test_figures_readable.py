"""Figures a reader can read at page width: every figure of a many-method, many-group comparison (paper 000's
Table 3 shape: 8 methods, 10 MNIST-like classes) is at most MAX_WIDTH inches wide, no legend has more than
MAX_LEGEND entries, and the axis labels say what a band is; Table 2's panels start no bar at an arbitrary
value (they are points with whiskers); sweeps say what their whiskers are."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from dpfair_analysis import plotting  # noqa: E402
from dpfair_analysis.experiments.compare import CompareConfig, run_compare, save_compare_figures  # noqa: E402
from dpfair_analysis.training.loop import TrainConfig  # noqa: E402


def legend_entries(fig: plt.Figure) -> list[int]:
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    return [len(legend.get_texts()) for legend in legends]


@pytest.fixture(scope="module")
def many_groups_result():
    sizes = tuple([30] * 9 + [10])  # ten groups, the last one small
    config = CompareConfig(dataset="synthetic", data_options={"sizes": sizes, "dim": 5, "seed": 0},
                           methods=("sgd", "dpsgd", "naive", "dpsgdf", "dpsgd(C=2)", "dpsgd(C=3)", "dpsgd(C=4)",
                                    "dpsgd(C=5)"),
                           train=TrainConfig(epochs=1, batch_size=40, lr=0.1, delta=1e-5), seeds=(0, 1))
    return run_compare(config, progress=False)


@pytest.fixture(scope="module")
def saved_figures(many_groups_result, tmp_path_factory):
    """The comparison's figures saved once (``save_compare_figures``, default focus) -- the files written and, per
    figure, its width, legend sizes, y labels and the data under its legends (``data_under_legends``), taken as
    each is saved: the checks below share one rendering (each used to render all four figures again)."""
    figures, real = {}, plotting.save_figure

    def capture(fig, path, **kwargs):
        figures[path.name] = {"width": fig.get_size_inches()[0], "legends": legend_entries(fig),
                              "labels": [ax.get_ylabel() for ax in fig.axes], "covered": data_under_legends(fig)}
        return real(fig, path, **kwargs)

    plotting.save_figure = capture
    try:
        written = save_compare_figures(many_groups_result, tmp_path_factory.mktemp("figures"))
    finally:
        plotting.save_figure = real
    return written, figures


def test_comparison_figures_fit_a_page_and_keep_legends_short(saved_figures):
    written, figures = saved_figures
    assert {p.name for p in written} == {"accuracy.png", "loss_grad_norm.png", "cost.png", "clip_bounds.png"}
    for name, figure in figures.items():
        assert figure["width"] <= plotting.MAX_WIDTH, (name, figure["width"])
        assert all(n <= plotting.MAX_LEGEND for n in figure["legends"]), (name, figure["legends"])
    assert any("± 1 sd, 2 seeds" in label for label in figures["accuracy.png"]["labels"])
    assert any("25-75%" in label for label in figures["clip_bounds.png"]["labels"])


def test_focus_groups_are_the_population_and_the_two_extremes():
    rows = pd.DataFrame({"epoch": [2] * 5, "group": ["all", "a", "b", "c", "d"], "value": [0.5, 0.1, 0.9, 0.4, 0.6]})
    assert plotting.focus_groups(rows) == ["all", "a", "b"]


def test_table2_has_no_truncated_bars_and_names_its_whiskers():
    rows = pd.DataFrame({"constraint": ["dp"] * 4 + ["eo"] * 4, "label": ["A", "B"] * 4,
                         "accuracy": np.linspace(0.6, 0.8, 8), "violation": np.linspace(0.01, 0.1, 8)})
    side = pd.DataFrame({"constraint": ["dp", "eo"], "label": ["A", "B"], "paper_accuracy": [0.7, 0.75],
                         "paper_violation": [0.02, 0.05]})
    fig = plotting.plot_table2(rows, side, name="toy")
    assert not any(ax.patches for ax in fig.axes)  # points and whiskers, not bars on a cut axis
    assert all("mean ± sd" in ax.get_title() for ax in fig.axes)
    plt.close(fig)


def test_sweeps_say_what_their_whiskers_are():
    rows = pd.DataFrame({"requested_epsilon": [1, 1, 2, 2] * 2, "seed": [0, 1] * 4, "missing_rate": [0.1] * 4 + [0.5] * 4,
                         "violation": np.linspace(0, 0.1, 8), "accuracy": np.linspace(0.6, 0.7, 8)})
    fig = plotting.plot_sweep(rows, hue="missing_rate", title="Figure 5")
    assert "± 1 sd over 2 seeds" in fig._suptitle.get_text()
    assert fig.get_size_inches()[0] <= plotting.MAX_WIDTH
    plt.close(fig)


def test_figure6_is_drawn():
    table = pd.DataFrame({"data": ["adult"] * 2 + ["compas"] * 2, "level": ["group"] * 4,
                          "group": ["M", "F", "W", "B"], "mean_input_norm": [1.0, 2.0, 1.5, 2.5],
                          "excess_risk": [0.01, 0.03, 0.02, 0.04]})
    fig = plotting.plot_input_norm_vs_risk(table)
    assert len(fig.axes) == 2 and fig.get_size_inches()[0] <= plotting.MAX_WIDTH
    assert {t.get_text() for t in fig.axes[0].texts} == {"M", "F"}
    plt.close(fig)


def test_the_papers_classes_can_be_the_coloured_ones(many_groups_result, tmp_path, monkeypatch):
    coloured = {}
    real = plotting.save_figure

    def capture(fig, path, **kwargs):
        coloured[path.name] = [sorted(t.get_text() for t in ax.get_legend().get_texts())
                               for ax in fig.axes if ax.get_legend() is not None]
        return real(fig, path, **kwargs)

    monkeypatch.setattr(plotting, "save_figure", capture)
    names = many_groups_result.group_names
    save_compare_figures(many_groups_result, tmp_path, focus=[names[2], names[8]])
    assert coloured["clip_bounds.png"] == [sorted([names[2], names[8], "other groups (mean)"])]  # the grey lines
    assert all(legend == sorted(["all", names[2], names[8]]) for legend in coloured["accuracy.png"])
    assert coloured["cost.png"] == [sorted(["all", names[2], names[8]])]
    with pytest.raises(ValueError, match="focus names groups"):
        plotting.plot_group_bounds(many_groups_result.steps, names, focus=["no such class"])


def test_per_class_accuracy_fits_the_page_with_one_legend_entry_per_method(many_groups_result):
    table = many_groups_result.table[many_groups_result.table["method"].isin(["sgd", "dpsgd", "naive", "dpsgdf"])]
    fig = plotting.plot_group_accuracy(table)
    ax = fig.axes[0]
    assert fig.get_size_inches()[0] <= plotting.MAX_WIDTH
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["sgd", "dpsgd", "naive", "dpsgdf"]
    assert len(ax.patches) >= 4 * len(many_groups_result.group_names)  # a bar per class and method
    assert "± 1 sd, 2 seeds" in ax.get_ylabel()
    plt.close(fig)


def test_figure3_labels_each_point_with_its_swept_value_and_draws_the_threshold():
    rows = []
    for kind, values, epsilons in (("epochs", (20, 40), (3.0, 4.5)), ("noise", (0.6, 1.2), (9.0, 3.5))):
        for value, epsilon in zip(values, epsilons):
            for seed in (0, 1):
                for group, cost in (("all", -0.05), ("2", -0.03), ("8", -0.09)):
                    rows.append({"kind": kind, "value": value, "seed": seed, "group": group, "epsilon": epsilon,
                                 "cost": cost, "gap_2_8": 0.06})
    fig = plotting.plot_epsilon_sweep(pd.DataFrame(rows), tau=0.05)
    assert len(fig.axes) == 2 and fig.get_size_inches()[0] <= plotting.MAX_WIDTH
    assert {t.get_text() for t in fig.axes[0].texts} == {"20 epochs", "40 epochs"}
    assert {t.get_text() for t in fig.axes[1].texts} == {"σ = 0.6", "σ = 1.2"}
    for ax in fig.axes:
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "τ = 0.05" in labels and "8" in labels and len(labels) <= plotting.MAX_LEGEND
        assert "mean of 2 seeds" in ax.get_ylabel()
    plt.close(fig)


@pytest.mark.parametrize("parameter, values", [("noise_multiplier", (0.5, 0.8, 1.0, 2.0, 5.0)),
                                               ("batch_size", (64, 128, 256, 512)), ("lr", (0.005, 0.01, 0.1))])
def test_paper002_sweeps_keep_coinciding_methods_apart_on_a_log_axis_of_the_swept_values(parameter, values):
    """Figures 4-6: two methods with the same accuracy at every value (DPSGD and Opt-Q on MNIST) are still two
    visible lines (own marker), the x axis is log and ticked at exactly the swept values, one legend, outside
    the panels; the privacy of each value is on the figure: under each tick where epsilon moves with the value
    (sigma, batch size), once in each title where it does not (learning rate)."""
    methods = ("sgd", "dpsgd", "optq", "fairdp")
    epsilon = {v: 5.9 if parameter == "lr" else 3.0 / (1 + i) for i, v in enumerate(values)}
    rows = pd.DataFrame([{"parameter": parameter, "value": v, "method": m, "seed": 0, "group": g,
                          "accuracy": 0.8 if m in ("dpsgd", "optq") else 0.5 + 0.01 * i,
                          "epsilon": math.nan if m == "sgd" else epsilon[v] * (1 - 0.001 * (m == "optq"))}
                         for i, v in enumerate(values) for m in methods for g in ("2", "8")])
    fig = plotting.plot_group_sweep(rows, groups=("2", "8"), title="mnist")
    for ax, group in zip(fig.axes, ("2", "8")):
        assert ax.get_xscale() == "log"
        assert [float(t) for t in ax.get_xticks()] == pytest.approx(list(values))
        labels = [t.get_text() for t in ax.get_xticklabels()]
        if parameter == "lr":
            assert labels == [f"{v:g}" for v in values]
            assert ax.get_title() == f"MNIST, class {group} (ε = 5.9)"
        else:
            assert labels == [f"{v:g}\n{epsilon[v]:.2g}" for v in values]
            assert ax.get_title() == f"MNIST, class {group}" and "ε" in ax.get_xlabel()
        drawn = [line for line in ax.get_lines() if len(line.get_xdata()) == len(values)]
        assert len({line.get_marker() for line in drawn}) == len(methods)
    assert legend_entries(fig) == [len(methods)]
    legend = fig.axes[-1].get_legend().get_window_extent(fig.canvas.get_renderer())
    assert all(legend.x0 >= ax.get_window_extent().x1 for ax in fig.axes)  # beside the panels, not on a line
    assert fig.get_size_inches()[0] <= plotting.MAX_WIDTH
    plt.close(fig)


def test_paper002_membership_figure_shows_each_auc_with_its_interval_and_chance():
    """Figure 3: one point per (method, group) per attack, whiskers +-1.96 SE (DeLong) so an AUC of 0.51 on
    300 targets reads as chance, the 0.5 line, readable attack names, the legend beside the panels, the
    private methods' epsilon above."""
    frame = pd.DataFrame([{"method": m, "attack": a, "group": g, "auc": 0.5 + 0.01 * i, "auc_se": 0.02 + 0.01 * j}
                          for a in ("loss", "lira_offline") for i, m in enumerate(("sgd", "dpsgd", "fairdp"))
                          for j, g in enumerate(("all", "Male", "Female"))])
    frame["epsilon"] = [math.nan if m == "sgd" else 2.66 for m in frame["method"]]
    fig = plotting.plot_membership(frame)
    assert fig._suptitle.get_text() == "private methods at ε = 2.66"
    assert [ax.get_title() for ax in fig.axes] == [plotting.ATTACK_TITLES["loss"], plotting.ATTACK_TITLES["lira_offline"]]
    for ax in fig.axes:
        whiskers = [segment for collection in ax.collections for segment in collection.get_segments()]
        assert len(whiskers) == 9
        half_widths = sorted(round((s[1][1] - s[0][1]) / 2, 6) for s in whiskers)
        assert half_widths == sorted(round(1.96 * (0.02 + 0.01 * j), 6) for _ in range(3) for j in range(3))
        assert any(list(line.get_ydata()) == [0.5, 0.5] for line in ax.get_lines())
        assert [t.get_text() for t in ax.get_xticklabels()] == ["sgd", "dpsgd", "fairdp"]
    legend = fig.axes[-1].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["chance", "all", "Male", "Female"]
    box = legend.get_window_extent(fig.canvas.get_renderer())
    assert all(box.x0 >= ax.get_window_extent().x1 for ax in fig.axes)
    plt.close(fig)


# ----------------------------------------------------------------- no legend over the data (issue 34)
def data_under_legends(fig: plt.Figure) -> list[tuple[str, float, float]]:
    """Every data mark a legend box covers, in display coordinates: scatter points, line vertices and bars
    (a bar counts when its box and the legend's overlap). Legends outside the axes cover nothing."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    boxes = [legend.get_window_extent(renderer) for legend in legends]
    covered = []
    for ax in fig.axes:
        points = []
        for collection in ax.collections:
            offsets = np.asarray(collection.get_offsets())
            if offsets.size:
                points += [("point", *p) for p in collection.get_offset_transform().transform(offsets)]
        for line in ax.lines:
            xy = np.asarray(line.get_xydata(), dtype=float)
            xy = xy[np.isfinite(xy).all(1)] if xy.size else xy
            if xy.size:
                points += [("line", *p) for p in line.get_transform().transform(xy)]
        for box in boxes:
            covered += [p for p in points if box.contains(p[1], p[2])]
            covered += [("bar", *patch.get_window_extent(renderer).p0) for patch in ax.patches
                        if patch.get_window_extent(renderer).width > 0 and box.overlaps(patch.get_window_extent(renderer))]
    return covered


def test_the_overlap_check_sees_a_legend_placed_over_points():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.scatter([0.05, 0.5, 0.95], [0.95, 0.5, 0.05], label="data")
    ax.legend(loc="upper left")
    assert data_under_legends(fig)  # the point at (0.05, 0.95) is under the legend
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5))
    assert not data_under_legends(fig)
    plt.close(fig)


def test_the_validation_figure_has_no_legend_over_a_point():
    """paper_figs/diagnose/predicted_vs_actual.png had a point behind its 10-entry legend."""
    from pathlib import Path

    summary = pd.read_csv(Path(__file__).resolve().parents[2] / "paper_figs" / "diagnose" / "predicted_vs_actual.csv")
    fig = plotting.plot_validation(summary)
    assert not data_under_legends(fig)
    assert fig.get_size_inches()[0] <= plotting.MAX_WIDTH
    plt.close(fig)


def test_the_diagnosis_figure_has_no_legend_over_a_bar_or_whisker():
    from dpfair_analysis.data.synthetic import synthetic_groups
    from dpfair_analysis.diagnose import DiagnosisOptions, PrivacyPlan, diagnose
    from dpfair_analysis.models import build_model

    data = synthetic_groups(sizes=(600, 300, 200), margin=(0.3, 0.05, 0.45), seed=3)
    train, test = data.split(0.3, seed=0)
    model = build_model("logreg", input_shape=(data.n_features,), n_classes=2, seed=0, l2=0.01)
    options = DiagnosisOptions(rows=400, curvature_rows=200, theory_rows=200, draws=10, recommendations=False,
                               max_steps=30, min_steps=10)
    for sigma in (0.5, 4.0):  # costs on both sides of zero and wide intervals
        d = diagnose(train, test, model, PrivacyPlan(noise_multiplier=sigma, clip_bound=0.5, batch_size=32,
                                                     epochs=2, lr=0.3), options=options)
        fig = plotting.plot_diagnosis(d)
        assert not data_under_legends(fig), sigma
        plt.close(fig)


def test_comparison_figures_have_no_legend_over_their_data(saved_figures):
    covered = {name: figure["covered"] for name, figure in saved_figures[1].items()}
    assert covered and not {name: marks[:3] for name, marks in covered.items() if marks}
