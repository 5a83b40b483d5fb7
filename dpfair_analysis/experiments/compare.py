"""Paper 000, Tables 1, 3 and 5: per-group accuracy of SGD and private training, and the cost.

For each seed: one train/test split (80/20, stratified by group), one initialisation,
then every method trained from that same start on that same split. The cost of privacy
of a private method is Delta^k = acc_k(method) - acc_k(SGD) on the test set (paper 000
§6.1.4). Over several seeds the table reports mean and standard deviation.

Methods: ``sgd``, ``dpsgd`` (uniform C), ``dpsgd(C=2)`` (uniform C = 2, for Table 3's
sweep), ``naive`` and ``dpsgdf`` (paper 000 Algorithms 3 and 2, count noise
sigma_1 = ``count_noise_ratio`` x sigma_2), and paper 002's comparison: ``optq``
(adaptive quantile clipping, Andrew et al. 2021), ``fairdp`` (paper 002, reconstructed in
:mod:`~dpfair_analysis.training.fairdp`) and ``dpfedavg`` (McMahan et al. 2018, clients
simulated by partitioning the training split; :mod:`~dpfair_analysis.training.fedavg`).
With ``equal_privacy`` (the paper's protocol, §6.1.3) every private method other than
DPSGD stops at the last step at which its epsilon is still at most DPSGD's epsilon for the
full run (Opt-Q's joint multiplier is sigma, so it runs all of DPSGD's steps); the step
counts are in ``runs``.

Equal privacy for DP-FedAvg: its guarantee is user-level (one client's whole data is the
unit), accounted as a Poisson-sampled Gaussian per round at the client sampling rate m/K.
It runs the most rounds whose *user-level* epsilon stays at most DPSGD's record-level
epsilon at the same delta. The two are not comparable per record: a record-level change
replaces a client (and the simulated partition re-deals the clients from the row count), so
DP-FedAvg's epsilon is no record-level guarantee (:mod:`~dpfair_analysis.training.fedavg`).
Its rows are labelled user-level wherever they are shown.

Inequality (paper 002 Table 2): per seed and method, Atkinson (epsilon = 0.5), Gini, MLD
and Theil over the per-group test accuracies (``inequality``; means over seeds in JSON).

Defaults are the census settings of paper 000 §6.1: Adult with sex groups, logistic
regression with L2 weight 0.01, b = 256, 20 epochs, sigma = 1, C = 0.5, delta = 1e-6,
learning rate r = 1/sqrt(T).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from dpfair_analysis import data as datasets
from dpfair_analysis.data.dataset import comparison_split
from dpfair_analysis.experiments.cache import RunCache, config_key
from dpfair_analysis.experiments.sweep import Backend, Run, run_sweep
from dpfair_analysis.fairness.inequality import DEFAULT_ATKINSON_EPSILON, INDICES, inequality_indices
from dpfair_analysis.fairness.metrics import cost_of_privacy, group_accuracy, max_cost_gap
from dpfair_analysis.models import MODELS, build_model, count_parameters
from dpfair_analysis.privacy.accounting import epsilon_from_event, max_steps_within, poisson_gaussian_event
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.training.batched import RunSpec, batchable, train_many
from dpfair_analysis.training.clipping import ClippingPolicy
from dpfair_analysis.training import methods
from dpfair_analysis.training.loop import TrainConfig, TrainingResult, schedule, predict_logits, train
from dpfair_analysis.validation import check_choice, check_fraction, check_seed


TEST_SPLITS = ("random", "official")


def compare_methods() -> tuple[str, ...]:
    """Every method name the comparison runs: the registered methods (:mod:`dpfair_analysis.training.methods`)."""
    return methods.names()


@dataclass(frozen=True)
class CompareConfig:
    """What to compare, on which data, with which settings (see the module docstring).

    ``method_options`` holds each method's own options by name (its :class:`~.training.methods.Method`'s
    ``options`` dataclass; a method not named there runs with its defaults): :meth:`options`,
    :meth:`with_options`."""

    dataset: str = "adult"
    data_options: dict = field(default_factory=dict)
    model: str = "logreg"
    hidden: tuple[int, ...] = (64, 64)
    l2: float = 0.01
    methods: tuple[str, ...] = ("sgd", "dpsgd")
    noise_multiplier: float = 1.0
    clip_bound: float = 0.5
    method_options: dict = field(default_factory=dict)
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
        for name, options in self.method_options.items():
            methods.get(name).check_options(options)
        for m in self.methods:
            name, _ = parse_method(m, default_clip=self.clip_bound)
            if methods.get(name).policy is not None:  # a trainer's settings depend on the data: checked there
                methods.checked(name, lambda: self.policy(m, dimension=1, learning_rate=1.0))

    def options(self, method: str):
        """The options ``method`` runs with: ``method_options[method]``, or its defaults."""
        return methods.get(method).check_options(self.method_options.get(method))

    def with_options(self, method: str, **changes) -> "CompareConfig":
        """This configuration with some of ``method``'s options changed (e.g. ``with_options("fairdp",
        excess_cap=50)``)."""
        return replace(self, method_options={**self.method_options,
                                             method: replace(self.options(method), **changes)})

    def settings(self) -> dict:
        """JSON-ready settings of the comparison (without the seeds and methods lists' run records)."""
        t = self.train
        names = dict.fromkeys(parse_method(m, default_clip=self.clip_bound)[0] for m in self.methods)
        return {"data_options": dict(self.data_options), "model": self.model,
                "hidden": list(self.hidden) if self.model == "mlp" else None, "l2": self.l2,
                "methods": list(self.methods), "noise_multiplier": self.noise_multiplier,
                "clip_bound": self.clip_bound, "equal_privacy": self.equal_privacy, "epochs": t.epochs,
                "method_options": {name: asdict(self.options(name)) for name in names
                                   if dataclasses.fields(self.options(name))},
                "batch_size": t.batch_size, "learning_rate": "1/sqrt(T)" if t.lr is None else t.lr,
                "sampling": t.sampling, "delta": t.delta, "accounting": t.accounting.as_dict(),
                "test_split": self.test_split, "test_fraction": self.test_fraction,
                "train_group_fraction": dict(self.train_group_fraction)}

    def context(self, *, clip_bound: float | None = None, dimension: int | None = None,
                learning_rate: float | None = None) -> methods.RunContext:
        """What a method's policy may depend on at this comparison's settings (:class:`~.training.methods.RunContext`)."""
        return methods.RunContext(clip_bound=self.clip_bound if clip_bound is None else clip_bound,
                                  noise_multiplier=self.noise_multiplier, batch_size=self.train.batch_size,
                                  dimension=dimension, learning_rate=learning_rate)

    def policy(self, method: str, *, dimension: int | None = None, learning_rate: float | None = None
               ) -> ClippingPolicy:
        """The clipping policy of a method name (``dpsgd(C=2)`` sets the uniform bound). FairDP needs the
        model's parameter count ``dimension`` and the run's ``learning_rate`` (Eq. 4's |1| and mu)."""
        name, clip_bound = parse_method(method, default_clip=self.clip_bound)
        return methods.get(name).build_policy(self.options(name), self.context(
            clip_bound=clip_bound, dimension=dimension, learning_rate=learning_rate))

    def run_config(self, method: str, *, n_train: int, seed: int):
        """The settings of one run of a trainer of its own (e.g. DP-FedAvg's
        :class:`~dpfair_analysis.training.fedavg.FedAvgConfig`) on ``n_train`` training rows; a bad option is an
        :class:`~dpfair_analysis.errors.ArgumentError` naming its flag (e.g. more clients than rows)."""
        name, clip_bound = parse_method(method, default_clip=self.clip_bound)
        entry = methods.get(name)
        return methods.checked(name, lambda: entry.build_run_config(
            self.options(name), n_train=n_train, seed=seed, context=self.context(clip_bound=clip_bound),
            train=self.train))


def parse_method(method: str, *, default_clip: float) -> tuple[str, float]:
    """``"dpsgd(C=2)"`` -> ``("dpsgd", 2.0)``; other names keep ``default_clip``
    (:func:`dpfair_analysis.training.methods.parse_method`)."""
    return methods.parse_method(method, default_clip=default_clip)


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
    #: per seed and method, the four inequality indices over the per-group test accuracies (tidy)
    inequality_per_seed: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def inequality(self) -> pd.DataFrame:
        """Paper 002 Table 2: per method (rows, in run order) the mean over seeds of each index (columns
        atkinson, gini, mld, theil) and their sd (``<index>_sd``)."""
        if self.inequality_per_seed.empty:
            return pd.DataFrame()
        grouped = self.inequality_per_seed.groupby(["method", "index"], sort=False)["value"]
        mean = grouped.mean().unstack("index")
        sd = grouped.std().unstack("index").add_suffix("_sd")
        order = list(dict.fromkeys(self.inequality_per_seed["method"]))
        return mean.join(sd).reindex(order)[[*INDICES, *(f"{i}_sd" for i in INDICES)]].reset_index()

    @property
    def clip_parts(self) -> pd.DataFrame:
        """Per private method and group (in run order): the clipping's first-order direction and magnitude errors
        (Esipova et al. 2023; the histories' ``batches`` rows ``clip_direction``, ``clip_magnitude``), averaged
        over epochs and seeds; empty when no run logged them (e.g. runs cached before they were)."""
        return clip_parts_table(self.histories)

    def to_json(self) -> dict:
        """``{"dataset", "epsilon": {method: eps}, "delta", "settings", "rows": [...], "inequality": [...],
        "clip_parts": [...], "seeds", "runs"}`` (rows: method, group, n_test, accuracy, cost, and their sd and
        seed count; inequality: per method the mean and sd over seeds of Atkinson (epsilon = 0.5), Gini, MLD and
        Theil over the per-group test accuracies -- non-finite values as null; clip_parts: :attr:`clip_parts`;
        settings: everything that
        determined the runs -- model, sigma, C, epochs, batch size, learning rate, sampling, the accounting
        spec, ...)."""
        def clean(record: dict) -> dict:
            return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}

        rows = [clean(record) for record in self.table.to_dict("records")]
        inequality = [clean(record) for record in self.inequality.to_dict("records")]
        clip_parts = [clean(record) for record in self.clip_parts.to_dict("records")]
        return {"dataset": self.config.dataset, "epsilon": self.epsilon, "delta": self.config.train.delta,
                "settings": self.config.settings(), "rows": rows, "inequality": inequality, "clip_parts": clip_parts,
                "atkinson_epsilon": DEFAULT_ATKINSON_EPSILON, "seeds": list(self.config.seeds), "runs": self.runs}


def run_compare(config: CompareConfig = CompareConfig(), *, progress: bool = True,
                cache: RunCache | None = None, backend: Backend | None = None) -> CompareResult:
    """Train every method of ``config`` for every seed and tabulate the group costs.

    The (method, seed) runs go through :func:`~.sweep.run_sweep`: each is looked up in
    ``cache`` by a hash of everything that determines it and trained only if missing (so a
    sweep resumes), on ``backend`` (serial, joblib processes or Ray; default from the
    environment, see :class:`~.sweep.Backend`).

    Parameters
    ----------
    config : CompareConfig
        Data set, model, methods, noise multiplier, clipping bound, training settings and seeds (default: paper
        000's Adult settings, SGD against DP-SGD).
    progress : bool
        Show progress bars.
    cache : RunCache, optional
        Where finished runs are stored and looked up (default: the user's run cache, ``$DPFAIR_CACHE``).
    backend : Backend, optional
        Serial, joblib or Ray (default from ``DPFAIR_BACKEND`` / ``DPFAIR_JOBS`` / ``DPFAIR_RAY_ADDRESS``).

    Returns
    -------
    CompareResult
        Per method, seed and group: accuracy, the cost against SGD, epsilon and each run's history.
    """
    backend = backend or Backend.from_environment()
    full, official_test = load_data(config)
    runs, cells = [], []
    for seed in config.seeds:
        train_data, test_data = split_for_seed(config, full, official_test, seed=seed)
        for method in config.methods:
            # per-run progress bars only when runs are trained here, one at a time
            compute = partial(_run_one, config, method, train_data, test_data, seed=seed,
                              progress=progress and backend.name == "serial")
            together = seeds_together(config, method)
            runs.append(Run(_run_key(config, method, seed, train_data, batched=together), compute,
                            group=method if together else None, member=(train_data, test_data, seed)))
            cells.append((seed, method))
    results = run_sweep(runs, cache=cache, backend=backend, progress=progress, together=partial(_run_seeds, config),
                        desc=f"{config.dataset}: {len(config.methods)} methods x {len(config.seeds)} seeds")
    per_seed, histories, steps, infos, inequality = [], [], [], [], []
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
        inequality.extend(_inequality_rows(accuracy, seed))
    per_seed_frame = pd.DataFrame(per_seed)
    return CompareResult(config=config, per_seed=per_seed_frame, table=summarise(per_seed_frame),
                         epsilon={m: float(np.mean(v)) for m, v in epsilons.items()},
                         histories=pd.concat(histories, ignore_index=True),
                         steps=pd.concat(steps, ignore_index=True), runs=infos, group_names=full.group_names,
                         n_train=len(train_data), inequality_per_seed=pd.DataFrame(inequality))


def run_keys(config: CompareConfig, *, data=None) -> dict[tuple[str, int], str]:
    """The cache key of each (method, seed) run of ``config``: what :func:`run_compare` looks up. ``data``:
    :func:`load_data` of ``config`` when the caller has it already (a planner keying many configurations of one data
    set loads it once)."""
    full, official_test = load_data(config) if data is None else data
    keys = {}
    for seed in config.seeds:
        train_data, _ = split_for_seed(config, full, official_test, seed=seed)
        keys.update({(method, seed): _run_key(config, method, seed, train_data) for method in config.methods})
    return keys


def _run_key(config: CompareConfig, method: str, seed: int, train_data, *, batched: bool = False) -> str:
    """Cache key of one (method, seed) run: everything that determines it (the policy with its context,
    or DP-FedAvg's settings; whether its seeds are trained together, which changes its numbers by rounding)."""
    runner = config.policy(method, **_policy_context(config, train_data)) if _is_policy(config, method) \
        else config.run_config(method, n_train=len(train_data), seed=seed)
    return config_key(config.dataset, config.data_options, config.test_split, config.model, config.hidden, config.l2,
                      config.test_fraction, config.train_group_fraction, runner, config.train,
                      config.equal_privacy, method, seed,
                      # only when set, so the keys of full-data runs stay as they were
                      *(() if config.train_subsample == 1 else (("train_subsample", config.train_subsample),)),
                      *((("seeds_trained_together", True),) if batched else ()))


def seeds_together(config: CompareConfig, method: str) -> bool:
    """Whether ``method``'s seeds are trained in one batched pass (:mod:`dpfair_analysis.training.batched`):
    two or more seeds of a clipping policy of the loop on the logistic regression or the MLP, on the CPU.
    A trainer of its own (DP-FedAvg) and the CNN train one seed at a time (:func:`batched_note` says why)."""
    return len(config.seeds) > 1 and _is_policy(config, method) and config.model in ("logreg", "mlp") and \
        config.train.device == "cpu"


def _is_policy(config: CompareConfig, method: str) -> bool:
    """Whether ``method`` is a clipping policy of the loop (else a trainer of its own)."""
    return methods.get(parse_method(method, default_clip=config.clip_bound)[0]).policy is not None


def batched_note(config: CompareConfig) -> str | None:
    """One sentence for a multi-seed comparison whose runs are not all trained together, else None."""
    if len(config.seeds) < 2:
        return None
    alone = [m for m in config.methods if not seeds_together(config, m)]
    if not alone:
        return None
    why = ("the CNN's per-step work is arithmetic, not overhead" if config.model == "cnn" else
           "it trains on the GPU" if config.train.device != "cpu" else
           "a trainer of its own, not a clipping policy of the loop")
    return f"{', '.join(alone)}: trained one seed at a time ({why})"


def _run_seeds(config: CompareConfig, method: str, members: list) -> list[dict]:
    """Every seed of ``method`` trained together (:func:`~dpfair_analysis.training.batched.train_many`): what
    :func:`_run_one` keeps of each. Seeds whose runs cannot be batched (e.g. splits of different sizes) are
    trained one at a time, and their info says why."""
    specs = [_run_spec(config, method, train_data, test_data, seed=seed) for train_data, test_data, seed in members]
    reason = batchable(specs)
    if reason is not None:
        results = [train(s.model, s.train_data, s.policy, s.config, test_data=s.test_data, progress=False)
                   for s in specs]
    else:
        results = train_many(specs, progress=False)
    return [_summary(method, result, test_data, batched=reason or len(specs))
            for result, (_, test_data, _) in zip(results, members)]


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


def _inequality_rows(accuracy: dict[str, pd.DataFrame], seed: int) -> list[dict]:
    """One seed's rows: each method's inequality indices over its per-group test accuracies (paper 002)."""
    rows = []
    for method, frame in accuracy.items():
        groups = frame.drop(index="all", errors="ignore")["accuracy"].dropna()
        if len(groups) and groups.sum() > 0:
            for index, value in inequality_indices(groups.to_numpy()).items():
                rows.append({"seed": seed, "method": method, "index": index, "value": value})
    return rows


def load_data(config: CompareConfig):
    """(the data set, its official test split or None) as ``config`` asks (``test_split``)."""
    if config.test_split == "official":
        return (datasets.load(config.dataset, split="train", **config.data_options),
                datasets.load(config.dataset, split="test", **config.data_options))
    return datasets.load(config.dataset, **config.data_options), None


def split_for_seed(config: CompareConfig, full, official_test, *, seed: int):
    """The (train, test) split every method of seed ``seed`` trains and is tested on
    (:func:`~dpfair_analysis.data.dataset.comparison_split`: the official test split or a seeded stratified
    one, then the training groups cut (``train_group_fraction``) and the training rows subsampled
    (``train_subsample``))."""
    return comparison_split(full, seed=seed, test_fraction=config.test_fraction,
                            train_group_fraction=config.train_group_fraction, train_subsample=config.train_subsample,
                            official_test=official_test if config.test_split == "official" else None)


def training_rows(config: CompareConfig) -> int:
    """Rows of the training split the runs of ``config`` train on (first seed; the same for every seed)."""
    full, official = load_data(config)
    return len(split_for_seed(config, full, official, seed=config.seeds[0])[0])


def _run_one(config: CompareConfig, method: str, train_data, test_data, *, seed: int, progress: bool) -> dict:
    """Train one method for one seed; what the comparison keeps of it (and caches)."""
    result = _train_one(config, method, train_data, test_data, seed=seed, progress=progress)
    return _summary(method, result, test_data, batched=1)


def _summary(method: str, result: TrainingResult, test_data, *, batched: int | str) -> dict:
    """What the comparison keeps of a run (and caches): test accuracy per group, history, steps, its info
    (``batched``: how many seeds it was trained with, or why it was trained alone)."""
    predictions = predict_logits(result.model, test_data.X).argmax(dim=1)
    accuracy = group_accuracy(test_data.y.numpy(), predictions.numpy(), test_data.group.numpy(),
                              group_names=test_data.group_names).set_index("group")
    predicted = predictions.unique()
    entry = methods.get(parse_method(method, default_clip=0)[0])
    info = {"steps": int(result.steps["step"].max()), "epsilon": result.epsilon,
            "learning_rate": result.learning_rate, "sampling_matches_accounting": result.sampling_matches_accounting,
            "privacy_unit": entry.privacy_unit, "trained_with_seeds": batched,
            # a model that predicts one class for every test row: its group costs are only the groups' label mix
            "constant_prediction": test_data.label_names[int(predicted[0])] if len(predicted) == 1 else None}
    if entry.run_info is not None:
        info.update(entry.run_info(result))
    return {"accuracy": accuracy, "history": result.history, "steps": result.steps, "info": info,
            "ledger": result.ledger.to_records()}  # re-accountable later under any AccountingSpec


def _build_model(config: CompareConfig, train_data, seed: int):
    return build_model(config.model, input_shape=tuple(train_data.X.shape[1:]), n_classes=train_data.n_classes,
                       seed=seed, hidden=config.hidden, l2=config.l2)


def _policy_context(config: CompareConfig, train_data) -> dict:
    """What a policy may depend on beyond its options: the model's parameter count and the run's step size
    (FairDP's Eq. (4) reads both; the policies that do not need them ignore them)."""
    return {"dimension": model_dimension(config, train_data),
            "learning_rate": config.train.learning_rate(len(train_data))}


def model_dimension(config: CompareConfig, data) -> int:
    """|1| of FairDP's Eq. (4): the parameter count of ``config``'s model on ``data``'s inputs and classes."""
    return count_parameters(_build_model(config, data, 0))


def train_method(config: CompareConfig, method: str, train_data, test_data=None, *, seed: int,
                 progress: bool = False) -> TrainingResult:
    """Train one method of ``config`` on ``train_data`` exactly as the comparison does (same model, policy or
    DP-FedAvg settings, equal-privacy cut); the :class:`~dpfair_analysis.training.loop.TrainingResult`."""
    return _train_one(config, method, train_data, test_data, seed=seed, progress=progress)


def _train_one(config: CompareConfig, method: str, train_data, test_data, *, seed: int,
               progress: bool) -> TrainingResult:
    entry = methods.get(parse_method(method, default_clip=config.clip_bound)[0])
    if entry.trainer is not None:  # a trainer of its own (DP-FedAvg)
        target = dpsgd_epsilon_target(config, len(train_data)) if config.equal_privacy and entry.equal_privacy \
            else None
        return entry.trainer(config.run_config(method, n_train=len(train_data), seed=seed),
                             model=_build_model(config, train_data, seed), train_data=train_data, test_data=test_data,
                             equal_privacy_epsilon=target, progress=progress)
    spec = _run_spec(config, method, train_data, test_data, seed=seed)
    return train(spec.model, spec.train_data, spec.policy, spec.config, test_data=test_data, progress=progress)


def _run_spec(config: CompareConfig, method: str, train_data, test_data, *, seed: int) -> RunSpec:
    """The loop's run of a clipping-policy method for one seed: model, data, policy, config (equal privacy:
    stopped at DPSGD's epsilon)."""
    policy = config.policy(method, **_policy_context(config, train_data))
    train_config = replace(config.train, seed=seed)
    if config.equal_privacy and policy.private and methods.get(parse_method(method, default_clip=0)[0]).equal_privacy:
        train_config = replace(train_config, max_steps=equal_privacy_steps(config, policy, len(train_data)))
    return RunSpec(_build_model(config, train_data, seed), train_data, policy, train_config, test_data)


def dpsgd_epsilon_target(config: CompareConfig, n: int) -> float:
    """DPSGD's (record-level) epsilon for the full run at ``config``'s sigma, q = b/n and T steps: the
    budget every method of an equal-privacy comparison spends at most."""
    t = config.train
    steps, _ = schedule(n, replace(t, max_steps=None))
    return epsilon_from_event(poisson_gaussian_event(t.batch_size / n, config.noise_multiplier, steps=steps),
                              t.delta, accounting=t.accounting)


def equal_privacy_steps(config: CompareConfig, policy: ClippingPolicy, n: int) -> int:
    """Steps ``policy`` may run before its epsilon exceeds DPSGD's for the full run (§6.1.3)."""
    t = config.train
    steps, _ = schedule(n, replace(t, max_steps=None))
    return max_steps_within(dpsgd_epsilon_target(config, n), t.delta, sampling_rate=t.batch_size / n,
                            max_steps=steps,
                            noise_multiplier=joint_noise_multiplier(policy.planned_noise_multipliers()),
                            accounting=t.accounting)


def method_label(method: str) -> str:
    """How tables print a method: its registered label (``DPSGD-F``), with an explicit bound kept
    (``dpsgd(C=2)`` -> ``DP-SGD(C=2)``)."""
    name = parse_method(method, default_clip=0)[0]
    explicit = re.search(r"\(.*\)", method)
    return methods.get(name).label + (explicit.group().replace(" ", "") if explicit else "")


def _privacy_unit(method: str) -> str:
    return methods.get(parse_method(method, default_clip=0)[0]).privacy_unit


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
        unit = "" if _privacy_unit(method) == "record" else f", {_privacy_unit(method).split(' (')[-1].rstrip(')')}"
        label = f"{method_label(method)} vs SGD" + (f" (ε={eps:.2f}{unit})" if eps is not None else "")
        body.append([label] + [cell(rows.loc[c], "cost") for c in columns]
                    + [cell(rows.loc["max_gap"], "cost").lstrip("+")])
        body.append([f"{method_label(method)} accuracy"] + [cell(rows.loc[c], "accuracy") for c in columns] + [""])
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]
    for r in body:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


CLIP_PARTS = ("clip_direction", "clip_magnitude")


def clip_parts_table(histories: pd.DataFrame) -> pd.DataFrame:
    """Method, group, clip_direction, clip_magnitude: the histories' per-epoch ``batches`` rows of the clipping's
    direction and magnitude errors, mean over epochs and seeds (groups as they appear, ``all`` last)."""
    if histories.empty or "metric" not in histories:
        return pd.DataFrame()
    rows = histories[(histories["split"] == "batches") & histories["metric"].isin(CLIP_PARTS)]
    if rows.empty:
        return pd.DataFrame()
    table = rows.pivot_table(index=["method", "group"], columns="metric", values="value", aggfunc="mean",
                             sort=False).reset_index()
    table.columns.name = None
    return table[["method", "group", *CLIP_PARTS]]


def format_clip_parts(result: CompareResult) -> str:
    """The clipping's direction and magnitude errors per method and group, one line per method ("" if none), and
    the line saying they are computed without noise (outside the runs' privacy guarantee)."""
    table = result.clip_parts
    if table.empty:
        return ""
    groups = list(dict.fromkeys(table["group"]))
    lines = ["clipping's first-order loss change per step, direction | magnitude (Esipova et al. 2023; "
             "mean over epochs" + (" and seeds)" if len(result.config.seeds) > 1 else ")"),
             f"{'':<28}" + "".join(f"{('Total' if g == 'all' else g):>26}" for g in groups)]
    for method, rows in table.groupby("method", sort=False):
        rows = rows.set_index("group")
        cells = [f"{rows.loc[g, 'clip_direction']:+.2e} | {rows.loc[g, 'clip_magnitude']:+.2e}" if g in rows.index
                 else "-" for g in groups]
        lines.append(f"{method_label(method):<28}" + "".join(f"{c:>26}" for c in cells))
    lines.append("(measured on the private training batches without noise: a diagnostic of these runs that their ε "
                 "does not cover; do not publish it)")
    return "\n".join(lines)


def format_inequality(result: CompareResult) -> str:
    """Paper 002 Table 2: the four inequality indices over per-group test accuracy, one line per method."""
    table = result.inequality
    if table.empty:
        return ""
    multi = len(result.config.seeds) > 1
    lines = [f"{'inequality of group accuracy':<28}" + "".join(f"{name:>18}" for name in
                                                             ("Atkinson(ε=0.5)", "Gini", "MLD", "Theil"))]
    for row in table.to_dict("records"):
        cells = []
        for index in INDICES:
            value, sd = row[index], row[f"{index}_sd"]
            cells.append(f"{value:.5f}" + (f" ± {sd:.5f}" if multi and not pd.isna(sd) else ""))
        lines.append(f"{method_label(row['method']):<28}" + "".join(f"{c:>18}" for c in cells))
    return "\n".join(lines)


#: The files :func:`save_compare_figures` may write in its directory (each figure with the CSV behind it)
COMPARE_FIGURE_FILES = tuple(f"{name}.{suffix}" for name in ("accuracy", "loss_grad_norm", "cost", "clip_bounds")
                             for suffix in ("png", "csv"))


def save_compare_figures(result: CompareResult, directory: str | Path, *,
                         focus: list[str] | None = None) -> list[Path]:
    """Per-group curves of a comparison as PNG files (with the CSV behind each) in ``directory``.
    With more than four groups, ``focus`` names the groups drawn in colour (e.g. the paper's
    classes 2 and 8; default: the two extreme groups of each figure), the others are grey.

    * ``accuracy.png``: test accuracy per group over epochs, one panel per method;
    * ``loss_grad_norm.png``: per-group average loss and per-sample gradient norm over
      the epoch's batches (paper 004 Figures 1, 2, 4, 6, 7), one row per method;
    * ``cost.png``: the cost of privacy per group and method;
    * ``clip_bounds.png``: DPSGD-F's C^k over epochs (paper 000 Fig. 2), if it ran.
    """
    import matplotlib.pyplot as plt

    from dpfair_analysis.plotting import focus_groups, plot_costs, plot_group_bounds, plot_group_history, \
        save_figure, with_population

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    histories = result.histories
    run_methods = list(dict.fromkeys(histories["method"]))
    written = []

    columns = min(3, len(run_methods))
    rows = -(-len(run_methods) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.9 * columns, 3.3 * rows), sharey=True, squeeze=False)
    test_rows = histories.query("metric == 'accuracy' and split == 'test'")
    accuracy_focus = (with_population(focus) if focus else focus_groups(test_rows)) \
        if test_rows["group"].nunique() > 4 else None
    for ax, method in zip(axes.flat, run_methods):
        plot_group_history(histories[histories["method"] == method], metric="accuracy", split="test", style=None,
                           ax=ax, focus=accuracy_focus, layout=False)
        ax.set_title(method)
    for ax in list(axes.flat)[len(run_methods):]:
        ax.set_visible(False)
    fig.tight_layout()  # once, with every panel and title drawn
    written.append(save_figure(fig, directory / "accuracy.png", data=test_rows))
    plt.close(fig)

    fig, axes = plt.subplots(len(run_methods), 2, figsize=(10, 3.0 * len(run_methods)), squeeze=False)
    batch_rows = histories.query("split == 'batches'")
    for row, method in zip(axes, run_methods):
        subset = histories[histories["method"] == method]
        for ax, metric in zip(row, ("loss", "grad_norm")):
            if subset.query("split == 'batches' and metric == @metric").empty:  # DP-FedAvg: no per-sample steps
                ax.text(0.5, 0.5, f"{method}: no per-sample gradients\n(client updates)", ha="center", va="center",
                        transform=ax.transAxes)
                ax.set_axis_off()
                continue
            metric_rows = batch_rows[batch_rows["metric"] == metric]
            metric_focus = (with_population(focus) if focus else focus_groups(metric_rows)) \
                if batch_rows["group"].nunique() > 4 else None
            plot_group_history(subset, metric=metric, split="batches", style=None, ax=ax, focus=metric_focus,
                               layout=False)
            ax.set_title(f"{method}: average {metric.replace('_', ' ')}")
    fig.tight_layout()
    written.append(save_figure(fig, directory / "loss_grad_norm.png",
                               data=histories.query("split == 'batches' and metric in ['loss', 'grad_norm']")))
    plt.close(fig)

    fig = plot_costs(result.table, focus=focus)
    written.append(save_figure(fig, directory / "cost.png", data=result.table))
    plt.close(fig)

    if "dpsgdf" in run_methods:
        dpsgdf_steps = result.steps[result.steps["method"] == "dpsgdf"]
        fig = plot_group_bounds(dpsgdf_steps, result.group_names,
                                steps_per_epoch=result.n_train / result.config.train.batch_size, focus=focus)
        columns = [c for c in dpsgdf_steps.columns if c.startswith(("C", "guard_", "m[", "o["))]
        per_epoch = dpsgdf_steps.assign(epoch=(dpsgdf_steps["step"] * result.config.train.batch_size
                                               // result.n_train) + 1)  # the figure's resolution, not every step
        data = per_epoch.groupby(["seed", "epoch"])[columns].mean().reset_index()
        written.append(save_figure(fig, directory / "clip_bounds.png", data=data))
        plt.close(fig)
    return written
