"""Paper 000, Table 1: per-group accuracy of non-private SGD and private training, and the cost.

For each seed: one train/test split (80/20, stratified by group), one initialisation,
then every method trained from that same start on that same split. The cost of privacy
of a private method is Delta^k = acc_k(method) - acc_k(SGD) on the test set (paper 000
§6.1.4). Over several seeds the table reports mean and standard deviation.

Defaults are the census settings of paper 000 §6.1: Adult with sex groups, logistic
regression with L2 weight 0.01, b = 256, 20 epochs, sigma = 1, C = 0.5, delta = 1e-6,
learning rate r = 1/sqrt(T).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd
import torch

from dpfair_analysis import data as datasets
from dpfair_analysis.fairness.metrics import cost_of_privacy, group_accuracy, max_cost_gap
from dpfair_analysis.models import build_model
from dpfair_analysis.training.clipping import make_policy
from dpfair_analysis.training.loop import TrainConfig, TrainingResult, predict_logits, train
from dpfair_analysis.validation import check_fraction, check_positive_int, check_seed


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
    train: TrainConfig = TrainConfig()
    test_fraction: float = 0.2
    seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        check_fraction(self.test_fraction, "test_fraction", open_high=True)
        if not self.seeds:
            raise ValueError("seeds must name at least one seed")
        for s in self.seeds:
            check_seed(s, "seeds")
        if not self.methods:
            raise ValueError("methods must name at least one method")
        for m in self.methods:
            make_policy(m, clip_bound=self.clip_bound, noise_multiplier=self.noise_multiplier)


@dataclass
class CompareResult:
    """Per-seed rows, the mean/sd table, the epsilons and every run's history."""

    config: CompareConfig
    per_seed: pd.DataFrame
    table: pd.DataFrame
    epsilon: dict[str, float]
    histories: pd.DataFrame
    runs: list[dict]

    def to_json(self) -> dict:
        """``{"dataset", "epsilon": {method: eps}, "rows": [...]}`` (rows: method, group,
        n_test, accuracy, cost, and their sd and seed count)."""
        rows = []
        for record in self.table.to_dict("records"):
            rows.append({k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in record.items()})
        return {"dataset": self.config.dataset, "epsilon": self.epsilon, "rows": rows,
                "seeds": list(self.config.seeds), "runs": self.runs}


def run_compare(config: CompareConfig = CompareConfig(), *, progress: bool = True) -> CompareResult:
    """Train every method of ``config`` for every seed and tabulate the group costs."""
    full = datasets.load(config.dataset, **config.data_options)
    per_seed, histories, runs = [], [], []
    epsilons: dict[str, list[float]] = {}
    for seed in config.seeds:
        train_data, test_data = full.split(config.test_fraction, seed=seed)
        accuracy: dict[str, pd.DataFrame] = {}
        for method in config.methods:
            result = _train_one(config, method, train_data, test_data, seed=seed, progress=progress)
            predictions = predict_logits(result.model, test_data.X).argmax(dim=1)
            accuracy[method] = group_accuracy(test_data.y.numpy(), predictions.numpy(), test_data.group.numpy(),
                                              group_names=test_data.group_names).set_index("group")
            histories.append(result.history.assign(method=method, seed=seed))
            runs.append({"method": method, "seed": seed, "steps": int(result.steps["step"].max()),
                         "epsilon": result.epsilon, "learning_rate": result.learning_rate,
                         "sampling_matches_accounting": result.sampling_matches_accounting})
            if result.epsilon is not None:
                epsilons.setdefault(method, []).append(result.epsilon)
        baseline = accuracy.get("sgd")
        for method, frame in accuracy.items():
            costs = cost_of_privacy(frame["accuracy"], baseline["accuracy"]) if baseline is not None \
                else pd.Series(np.nan, index=frame.index)
            for group, row in frame.iterrows():
                per_seed.append({"seed": seed, "method": method, "group": group, "n_test": int(row["n"]),
                                 "accuracy": float(row["accuracy"]), "cost": float(costs[group])})
            per_seed.append({"seed": seed, "method": method, "group": "max_gap", "n_test": 0,
                             "accuracy": np.nan, "cost": max_cost_gap(costs)})
    per_seed_frame = pd.DataFrame(per_seed)
    return CompareResult(config=config, per_seed=per_seed_frame, table=summarise(per_seed_frame),
                         epsilon={m: float(np.mean(v)) for m, v in epsilons.items()},
                         histories=pd.concat(histories, ignore_index=True), runs=runs)


def _train_one(config: CompareConfig, method: str, train_data, test_data, *, seed: int,
               progress: bool) -> TrainingResult:
    model = build_model(config.model, input_shape=tuple(train_data.X.shape[1:]), n_classes=train_data.n_classes,
                        seed=seed, hidden=config.hidden, l2=config.l2)
    policy = make_policy(method, clip_bound=config.clip_bound, noise_multiplier=config.noise_multiplier)
    return train(model, train_data, policy, replace(config.train, seed=seed), test_data=test_data,
                 progress=progress)


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
