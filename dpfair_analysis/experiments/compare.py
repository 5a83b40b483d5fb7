"""Paper 000, Tables 1, 3 and 5: per-group accuracy of SGD and private training, and the cost.

For each seed: one train/test split (80/20, stratified by group), one initialisation,
then every method trained from that same start on that same split. The cost of privacy
of a private method is Delta^k = acc_k(method) - acc_k(SGD) on the test set (paper 000
§6.1.4). Over several seeds the table reports mean and standard deviation.

Methods: ``sgd``, ``dpsgd`` (uniform C), ``dpsgd(C=2)`` (uniform C = 2, for Table 3's
sweep), ``naive`` and ``dpsgdf`` (paper 000 Algorithms 3 and 2, count noise
sigma_1 = ``count_noise_ratio`` x sigma_2). With ``equal_privacy`` (the paper's
protocol, §6.1.3) Naive and DPSGD-F stop at the last step at which their epsilon is
still at most DPSGD's epsilon for the full run; the step counts are in ``runs``.

Defaults are the census settings of paper 000 §6.1: Adult with sex groups, logistic
regression with L2 weight 0.01, b = 256, 20 epochs, sigma = 1, C = 0.5, delta = 1e-6,
learning rate r = 1/sqrt(T).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from dpfair_analysis import data as datasets
from dpfair_analysis.data.dataset import comparison_split
from dpfair_analysis.experiments.cache import RunCache, config_key
from dpfair_analysis.experiments.sweep import Backend, Run, run_sweep
from dpfair_analysis.fairness.metrics import cost_of_privacy, group_accuracy, max_cost_gap
from dpfair_analysis.models import MODELS, build_model
from dpfair_analysis.privacy.accounting import epsilon_from_event, max_steps_within, poisson_gaussian_event
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.training.clipping import ClippingPolicy
from dpfair_analysis.training.policies import METHODS, make_policy
from dpfair_analysis.training.loop import TrainConfig, TrainingResult, schedule, predict_logits, train
from dpfair_analysis.validation import check_choice, check_fraction, check_seed


TEST_SPLITS = ("random", "official")


@dataclass(frozen=True)
class CompareConfig:
    """What to compare, on which data, with which settings (see the module docstring)."""

    dataset: str = "adult"
    data_options: dict = field(default_factory=dict)
    model: str = "logreg"
    hidden: tuple[int, ...] = (64, 64)
    l2: float = 0.01
    methods: tuple[str, ...] = ("sgd", "dpsgd")
    noise_multiplier: float = 1.0
    clip_bound: float = 0.5
    count_noise_ratio: float = 10.0
    max_ratio: float = 10.0
    equal_privacy: bool = True
    train: TrainConfig = TrainConfig()
    #: "random": a seeded, group-stratified split off ``test_fraction`` of the data; "official": the data
    #: set's own test split (its loader takes ``split="train"|"test"``: full MNIST's 60,000 / 10,000)
    test_split: str = "random"
    test_fraction: float = 0.2
    train_group_fraction: dict = field(default_factory=dict)
    #: share of each training split kept (stratified by group, after ``train_group_fraction``):
    #: the quick profiles' smaller data; 1 keeps all
    train_subsample: float = 1.0
    seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        check_choice(self.model, "model", MODELS)
        check_choice(self.test_split, "test_split", TEST_SPLITS)
        check_fraction(self.test_fraction, "test_fraction", open_high=True)
        check_fraction(self.train_subsample, "train_subsample")
        for group, fraction in self.train_group_fraction.items():
            check_fraction(fraction, f"train_group_fraction[{group!r}]")
        if not self.seeds:
            raise ValueError("seeds must name at least one seed")
        for s in self.seeds:
            check_seed(s, "seeds")
        if not self.methods:
            raise ValueError("methods must name at least one method")
        for m in self.methods:
            self.policy(m)

    def settings(self) -> dict:
        """JSON-ready settings of the comparison (without the seeds and methods lists' run records)."""
        t = self.train
        return {"data_options": dict(self.data_options), "model": self.model,
                "hidden": list(self.hidden) if self.model == "mlp" else None, "l2": self.l2,
                "methods": list(self.methods), "noise_multiplier": self.noise_multiplier,
                "clip_bound": self.clip_bound, "count_noise_ratio": self.count_noise_ratio,
                "max_ratio": self.max_ratio, "equal_privacy": self.equal_privacy, "epochs": t.epochs,
                "batch_size": t.batch_size, "learning_rate": "1/sqrt(T)" if t.lr is None else t.lr,
                "sampling": t.sampling, "delta": t.delta, "accounting": t.accounting.as_dict(),
                "test_split": self.test_split, "test_fraction": self.test_fraction, "train_group_fraction": dict(self.train_group_fraction)}

    def policy(self, method: str) -> ClippingPolicy:
        """The clipping policy of a method name (``dpsgd(C=2)`` sets the uniform bound)."""
        name, clip_bound = parse_method(method, default_clip=self.clip_bound)
        return make_policy(name, clip_bound=clip_bound, noise_multiplier=self.noise_multiplier,
                           count_noise=self.count_noise_ratio * self.noise_multiplier, max_ratio=self.max_ratio)


def parse_method(method: str, *, default_clip: float) -> tuple[str, float]:
    """``"dpsgd(C=2)"`` -> ``("dpsgd", 2.0)``; other names keep ``default_clip``."""
    match = re.fullmatch(r"\s*([a-z]+)\s*(?:\(\s*C\s*=\s*([^)]+)\))?\s*", str(method))
    if match is None:
        raise ValueError(f"method must be one of {list(METHODS)} or 'dpsgd(C=<bound>)', got {method!r}")
    name, clip = match.groups()
    if clip is None:
        return name, default_clip
    try:
        return name, float(clip)
    except ValueError:
        raise ValueError(f"method {method!r}: C must be a number, got {clip!r}") from None


@dataclass
class CompareResult:
    """Per-seed rows, the mean/sd table, the epsilons, every run's history and step records."""

    config: CompareConfig
    per_seed: pd.DataFrame
    table: pd.DataFrame
    epsilon: dict[str, float]
    histories: pd.DataFrame
    steps: pd.DataFrame
    runs: list[dict]
    group_names: tuple[str, ...] = ()
    n_train: int = 0

    def to_json(self) -> dict:
        """``{"dataset", "epsilon": {method: eps}, "delta", "settings", "rows": [...], "seeds", "runs"}``
        (rows: method, group, n_test, accuracy, cost, and their sd and seed count; settings: everything
        that determined the runs -- model, sigma, C, epochs, batch size, learning rate, sampling, the
        accounting spec, ...)."""
        rows = []
        for record in self.table.to_dict("records"):
            rows.append({k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in record.items()})
        return {"dataset": self.config.dataset, "epsilon": self.epsilon, "delta": self.config.train.delta,
                "settings": self.config.settings(), "rows": rows, "seeds": list(self.config.seeds),
                "runs": self.runs}


def run_compare(config: CompareConfig = CompareConfig(), *, progress: bool = True,
                cache: RunCache | None = None, backend: Backend | None = None) -> CompareResult:
    """Train every method of ``config`` for every seed and tabulate the group costs.

    The (method, seed) runs go through :func:`~.sweep.run_sweep`: each is looked up in
    ``cache`` by a hash of everything that determines it and trained only if missing (so a
    sweep resumes), on ``backend`` (serial, joblib processes or Ray; default from the
    environment, see :class:`~.sweep.Backend`).
    """
    backend = backend or Backend.from_environment()
    if config.test_split == "official":
        full = datasets.load(config.dataset, split="train", **config.data_options)
        official_test = datasets.load(config.dataset, split="test", **config.data_options)
    else:
        full = datasets.load(config.dataset, **config.data_options)
    runs, cells = [], []
    for seed in config.seeds:
        train_data, test_data = comparison_split(
            full, seed=seed, test_fraction=config.test_fraction, train_group_fraction=config.train_group_fraction,
            train_subsample=config.train_subsample,
            official_test=official_test if config.test_split == "official" else None)
        for method in config.methods:
            # per-run progress bars only when runs are trained here, one at a time
            compute = partial(_run_one, config, method, train_data, test_data, seed=seed,
                              progress=progress and backend.name == "serial")
            runs.append(Run(_run_key(config, method, seed), compute))
            cells.append((seed, method))
    results = run_sweep(runs, cache=cache, backend=backend, progress=progress,
                        desc=f"{config.dataset}: {len(config.methods)} methods x {len(config.seeds)} seeds")
    per_seed, histories, steps, infos = [], [], [], []
    epsilons: dict[str, list[float]] = {}
    for seed in config.seeds:
        accuracy: dict[str, pd.DataFrame] = {}
        for (run_seed, method), run in zip(cells, results):
            if run_seed != seed:
                continue
            accuracy[method] = run["accuracy"]
            histories.append(run["history"].assign(method=method, seed=seed))
            steps.append(run["steps"].assign(method=method, seed=seed))
            infos.append({"method": method, "seed": seed, **run["info"]})
            if run["info"]["epsilon"] is not None:
                epsilons.setdefault(method, []).append(run["info"]["epsilon"])
        per_seed.extend(_cost_rows(accuracy, seed))
    per_seed_frame = pd.DataFrame(per_seed)
    return CompareResult(config=config, per_seed=per_seed_frame, table=summarise(per_seed_frame),
                         epsilon={m: float(np.mean(v)) for m, v in epsilons.items()},
                         histories=pd.concat(histories, ignore_index=True),
                         steps=pd.concat(steps, ignore_index=True), runs=infos, group_names=full.group_names,
                         n_train=len(train_data))


def _run_key(config: CompareConfig, method: str, seed: int) -> str:
    """Cache key of one (method, seed) run: everything that determines it."""
    return config_key(config.dataset, config.data_options, config.test_split, config.model, config.hidden, config.l2,
                      config.test_fraction, config.train_group_fraction, config.policy(method), config.train,
                      config.equal_privacy, method, seed,
                      # only when set, so the keys of full-data runs stay as they were
                      *(() if config.train_subsample == 1 else (("train_subsample", config.train_subsample),)))


def _cost_rows(accuracy: dict[str, pd.DataFrame], seed: int) -> list[dict]:
    """One seed's rows: each method's group accuracy and cost against SGD, and the max cost gap."""
    rows = []
    baseline = accuracy.get("sgd")
    for method, frame in accuracy.items():
        costs = cost_of_privacy(frame["accuracy"], baseline["accuracy"]) if baseline is not None \
            else pd.Series(np.nan, index=frame.index)
        for group, row in frame.iterrows():
            rows.append({"seed": seed, "method": method, "group": group, "n_test": int(row["n"]),
                         "accuracy": float(row["accuracy"]), "cost": float(costs[group])})
        rows.append({"seed": seed, "method": method, "group": "max_gap", "n_test": 0,
                     "accuracy": np.nan, "cost": max_cost_gap(costs)})
    return rows


def _run_one(config: CompareConfig, method: str, train_data, test_data, *, seed: int, progress: bool) -> dict:
    """Train one method for one seed; what the comparison keeps of it (and caches)."""
    result = _train_one(config, method, train_data, test_data, seed=seed, progress=progress)
    predictions = predict_logits(result.model, test_data.X).argmax(dim=1)
    accuracy = group_accuracy(test_data.y.numpy(), predictions.numpy(), test_data.group.numpy(),
                              group_names=test_data.group_names).set_index("group")
    predicted = predictions.unique()
    info = {"steps": int(result.steps["step"].max()), "epsilon": result.epsilon,
            "learning_rate": result.learning_rate, "sampling_matches_accounting": result.sampling_matches_accounting,
            # a model that predicts one class for every test row: its group costs are only the groups' label mix
            "constant_prediction": test_data.label_names[int(predicted[0])] if len(predicted) == 1 else None}
    return {"accuracy": accuracy, "history": result.history, "steps": result.steps, "info": info,
            "ledger": result.ledger.to_records()}  # re-accountable later under any AccountingSpec


def _train_one(config: CompareConfig, method: str, train_data, test_data, *, seed: int,
               progress: bool) -> TrainingResult:
    model = build_model(config.model, input_shape=tuple(train_data.X.shape[1:]), n_classes=train_data.n_classes,
                        seed=seed, hidden=config.hidden, l2=config.l2)
    policy = config.policy(method)
    train_config = replace(config.train, seed=seed)
    if config.equal_privacy and policy.private and parse_method(method, default_clip=0)[0] in ("naive", "dpsgdf"):
        train_config = replace(train_config, max_steps=equal_privacy_steps(config, policy, len(train_data)))
    return train(model, train_data, policy, train_config, test_data=test_data, progress=progress)


def equal_privacy_steps(config: CompareConfig, policy: ClippingPolicy, n: int) -> int:
    """Steps ``policy`` may run before its epsilon exceeds DPSGD's for the full run (§6.1.3)."""
    t = config.train
    steps, _ = schedule(n, replace(t, max_steps=None))
    q = t.batch_size / n
    target = epsilon_from_event(poisson_gaussian_event(q, config.noise_multiplier, steps=steps), t.delta,
                                accounting=t.accounting)
    return max_steps_within(target, t.delta, sampling_rate=q, max_steps=steps,
                            noise_multiplier=joint_noise_multiplier(policy.planned_noise_multipliers()),
                            accounting=t.accounting)


def summarise(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd over seeds for each (method, group), in the order methods and groups appear."""
    grouped = per_seed.groupby(["method", "group"], sort=False)
    table = grouped.agg(n_test=("n_test", "first"), accuracy=("accuracy", "mean"), accuracy_sd=("accuracy", "std"),
                        cost=("cost", "mean"), cost_sd=("cost", "std"), n_seeds=("seed", "nunique"))
    return table.reset_index()


def format_table(result: CompareResult) -> str:
    """Paper 000 Table 1 layout: one row of accuracies for SGD, then cost rows per method."""
    table = result.table
    groups = [g for g in table["group"].unique() if g not in ("all", "max_gap")]
    columns = ["all"] + groups
    multi = result.config.seeds and len(result.config.seeds) > 1

    def cell(row: pd.Series, value: str) -> str:
        mean, sd = row[value], row[f"{value}_sd"]
        if pd.isna(mean):
            return "-"
        return f"{mean:+.4f}" + (f" ± {sd:.4f}" if multi and not pd.isna(sd) else "") if value == "cost" \
            else f"{mean:.4f}" + (f" ± {sd:.4f}" if multi and not pd.isna(sd) else "")

    lines = []
    header = ["", *("Total" if c == "all" else c for c in columns), "max|Δi-Δj|"]
    n_row = ["n (test)"] + [str(int(table.query("group == @c")["n_test"].iloc[0])) for c in columns] + [""]
    body = [header, n_row]
    for method in table["method"].unique():
        rows = table[table["method"] == method].set_index("group")
        if method == "sgd":
            body.append(["SGD accuracy"] + [cell(rows.loc[c], "accuracy") for c in columns] + [""])
            continue
        eps = result.epsilon.get(method)
        label = f"{method.upper()} vs SGD" + (f" (ε={eps:.2f})" if eps is not None else "")
        body.append([label] + [cell(rows.loc[c], "cost") for c in columns]
                    + [cell(rows.loc["max_gap"], "cost").lstrip("+")])
        body.append([f"{method.upper()} accuracy"] + [cell(rows.loc[c], "accuracy") for c in columns] + [""])
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]
    for r in body:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


def save_compare_figures(result: CompareResult, directory: str | Path) -> list[Path]:
    """Per-group curves of a comparison as PNG files (with the CSV behind each) in ``directory``.

    * ``accuracy.png``: test accuracy per group over epochs, one panel per method;
    * ``loss_grad_norm.png``: per-group average loss and per-sample gradient norm over
      the epoch's batches (paper 004 Figures 1, 2, 4, 6, 7), one row per method;
    * ``cost.png``: the cost of privacy per group and method;
    * ``clip_bounds.png``: DPSGD-F's C^k over epochs (paper 000 Fig. 2), if it ran.
    """
    import matplotlib.pyplot as plt

    from dpfair_analysis.plotting import focus_groups, plot_costs, plot_group_bounds, plot_group_history, \
        save_figure

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    histories = result.histories
    methods = list(dict.fromkeys(histories["method"]))
    written = []

    columns = min(3, len(methods))
    rows = -(-len(methods) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.9 * columns, 3.3 * rows), sharey=True, squeeze=False)
    test_rows = histories.query("metric == 'accuracy' and split == 'test'")
    focus = focus_groups(test_rows) if test_rows["group"].nunique() > 4 else None
    for ax, method in zip(axes.flat, methods):
        plot_group_history(histories[histories["method"] == method], metric="accuracy", split="test", style=None,
                           ax=ax, focus=focus)
        ax.set_title(method)
    for ax in list(axes.flat)[len(methods):]:
        ax.set_visible(False)
    written.append(save_figure(fig, directory / "accuracy.png", data=test_rows))
    plt.close(fig)

    fig, axes = plt.subplots(len(methods), 2, figsize=(10, 3.0 * len(methods)), squeeze=False)
    batch_rows = histories.query("split == 'batches'")
    for row, method in zip(axes, methods):
        subset = histories[histories["method"] == method]
        for ax, metric in zip(row, ("loss", "grad_norm")):
            focus = focus_groups(batch_rows[batch_rows["metric"] == metric]) \
                if batch_rows["group"].nunique() > 4 else None
            plot_group_history(subset, metric=metric, split="batches", style=None, ax=ax, focus=focus)
            ax.set_title(f"{method}: average {metric.replace('_', ' ')}")
    written.append(save_figure(fig, directory / "loss_grad_norm.png",
                               data=histories.query("split == 'batches' and metric in ['loss', 'grad_norm']")))
    plt.close(fig)

    fig = plot_costs(result.table)
    written.append(save_figure(fig, directory / "cost.png", data=result.table))
    plt.close(fig)

    if "dpsgdf" in methods:
        dpsgdf_steps = result.steps[result.steps["method"] == "dpsgdf"]
        fig = plot_group_bounds(dpsgdf_steps, result.group_names,
                                steps_per_epoch=result.n_train / result.config.train.batch_size)
        columns = ["seed", "step"] + [c for c in dpsgdf_steps.columns if c.startswith(("C", "guard_", "m[", "o["))]
        written.append(save_figure(fig, directory / "clip_bounds.png", data=dpsgdf_steps[columns]))
        plt.close(fig)
    return written
