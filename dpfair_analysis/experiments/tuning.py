"""The reproduction protocol: a stated tuning budget, selection on held-out training rows, three-valued verdicts.

A reproduction that fails at one guess of the settings a paper does not print says little about the paper.
Before a printed number is called "not reproduced", every method of the table gets the same fair chance:

1. **Budget.** For every hyperparameter the paper does not print, a :class:`TuningGrid` states the values
   tried; every method of a table gets the same number of configurations (baselines included), the printed
   (or, where nothing is printed, the toolkit's default) configuration first.
2. **Selection on a validation split carved from the training data, never the test fold.** Every configuration
   trains on the training rows minus the validation rows (:func:`validation_split` for the DP-SGD comparisons;
   :func:`~dpfair_analysis.experiments.pfld_tuned.tuned_table2` carves one from each cross-validation training fold)
   and is scored on the validation rows; the best score is chosen (:func:`select`; ties go to the earlier
   configuration, so to the printed one). The test rows are evaluated for every run but read only for the
   chosen configuration.
3. **Accounting for the tuning.** Selection here is **not private**: the validation rows are private training
   rows and their accuracy is released without noise, and the number of configurations is fixed. Each result
   states the chosen configuration's epsilon -- a guarantee for that one training run -- and
   :data:`SELECTION_PRIVACY` says so in every JSON and CSV. (A private selection in the sense of Papernot &
   Steinke, ICLR 2022, needs a random number of runs and a noised score; it is not what ran.)
4. **Three-valued verdicts** (:data:`~dpfair_analysis.verify.reproduction.VERDICTS`, judged by
   :mod:`dpfair_analysis.verify.reproduction`): ``reproduces at the printed settings`` if the printed
   configuration's result is within the tolerance of the printed number; else ``reproduces after tuning``
   (with the budget and the chosen values) if the chosen configuration's is; else ``does not reproduce within
   the budget``. :class:`~dpfair_analysis.verify.reproduction.Tolerance` states what "within" means: a cell the paper claims as an achievement
   (an accuracy, a cost of privacy) must be at most ``margin`` below the printed value, a fairness violation at
   most ``margin`` above it (being better than printed is not a failure to reproduce; the signed difference is
   reported beside every verdict). The margin is the larger of the paper's printed sd and a stated floor.

The protocol's runs of a DP-SGD comparison (:func:`tuning_plan`, :func:`recorded_tuning_runs`) and its tables (the
printed and the tuned configuration, :func:`printed_and_tuned`; the cost of privacy, :func:`costs_of_privacy`; the
batch sampling's effect, :func:`sampling_effect`) serve any data set; the MNIST study that applies them is
:mod:`.mnist_tuning`, its figure :func:`~dpfair_analysis.plotting.fairdp.plot_tuning_grid`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import pandas as pd

from dpfair_analysis.training import methods as registry
from dpfair_analysis.validation import check_choice, check_fraction, check_positive_int


#: how the tuning is accounted, in every result that carries a tuned number
SELECTION_PRIVACY = ("selection not private: the configuration was chosen on the validation rows' accuracy, "
                     "released without noise, over a fixed grid; the epsilon stated is that of the chosen "
                     "configuration's training run alone")

#: share of the training rows held out for selection (stratified by group)
VALIDATION_FRACTION = 0.1


@dataclass(frozen=True)
class TuningGrid:
    """The tuning budget: the values tried of each hyperparameter a paper does not print.

    Parameters
    ----------
    values : mapping of str to sequence
        Hyperparameter name -> the values tried. The configurations are their product.
    printed : mapping of str to object
        The printed (or, where the paper prints nothing, the toolkit's default) value of each hyperparameter;
        must be one of its values. The printed configuration is the first of :meth:`configurations`.
    note : str
        Why these values (shown beside the budget).
    design : {"full", "half"}
        ``"full"``: every combination. ``"half"`` (every hyperparameter with two values): the half fraction of
        the two-level factorial that contains the printed configuration -- every configuration that differs
        from the printed one in an even number of hyperparameters (the defining relation I = ABC...: with five
        hyperparameters 16 of 32 configurations, resolution V, so every pair of hyperparameters is seen at all
        four combinations of its values).
    """

    values: Mapping[str, Sequence[Any]]
    printed: Mapping[str, Any]
    note: str = ""
    design: str = "full"
    #: keep only the first ``first`` configurations (:meth:`head`; None: all)
    first: int | None = None

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("values must name at least one hyperparameter")
        for name, options in self.values.items():
            if len(options) == 0 or len(set(map(repr, options))) != len(options):
                raise ValueError(f"values[{name!r}] must be distinct values, at least one, got {list(options)!r}")
        if set(self.printed) != set(self.values):
            raise ValueError(f"printed must give a value for exactly {sorted(self.values)}, got {sorted(self.printed)}")
        for name, value in self.printed.items():
            if value not in self.values[name]:
                raise ValueError(f"printed[{name!r}]={value!r} is not one of values[{name!r}]="
                                 f"{list(self.values[name])!r}")
        check_choice(self.design, "design", ("full", "half"))
        if self.first is not None:
            check_positive_int(self.first, "first")
        if self.design == "half" and any(len(v) != 2 for v in self.values.values()):
            raise ValueError("design='half' needs exactly two values of every hyperparameter, got "
                             f"{ {k: len(v) for k, v in self.values.items()} }")
        object.__setattr__(self, "values", {k: tuple(v) for k, v in self.values.items()})
        object.__setattr__(self, "printed", dict(self.printed))

    def configurations(self) -> list[dict[str, Any]]:
        """Every configuration of the grid (of its half fraction for ``design="half"``), the printed one first,
        then in the order of the product of the values."""
        names = list(self.values)
        product = [dict(zip(names, combo)) for combo in itertools.product(*self.values.values())]
        if self.design == "half":
            product = [c for c in product if sum(c[k] != self.printed[k] for k in names) % 2 == 0]
        return ([dict(self.printed)] + [c for c in product if c != self.printed])[:self.first]

    def __len__(self) -> int:
        full = math.prod(len(v) for v in self.values.values())
        full = full // 2 if self.design == "half" else full
        return full if self.first is None else min(self.first, full)

    def budget(self) -> str:
        """The budget in words, e.g. ``"6 configurations: lr in {0.01, 0.05, 0.1} x sampling in {poisson,
        shuffle}; printed lr = 0.01, sampling = poisson"``."""
        grid = " x ".join(f"{k} in {{{', '.join(_show(v) for v in vs)}}}" for k, vs in self.values.items())
        if self.design == "half":
            grid = f"the half of {grid} that changes an even number of printed values"
        if self.first is not None:
            grid = f"the first {len(self)} of {grid}"
        printed = ", ".join(f"{k} = {_show(v)}" for k, v in self.printed.items())
        return f"{len(self)} configurations: {grid}; printed {printed}" + (f" ({self.note})" if self.note else "")

    def head(self, count: int) -> "TuningGrid":
        """The budget cut to its first ``count`` configurations (the printed one first): the quick profiles'
        smoke runs."""
        return replace(self, first=check_positive_int(count, "count"))

    def as_dict(self) -> dict:
        """JSON-ready: values, printed, the design, the count and the budget in words."""
        return {"values": {k: list(v) for k, v in self.values.items()}, "printed": dict(self.printed),
                "design": self.design, "configurations": len(self), "budget": self.budget()}


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def describe_configuration(configuration: Mapping[str, Any]) -> str:
    """``{"lr": 0.05, "sampling": "shuffle"}`` -> ``"lr 0.05, sampling shuffle"``."""
    return ", ".join(f"{k} {_show(v)}" for k, v in configuration.items())


# ----------------------------------------------------------------------------- selection
def select(scores: pd.DataFrame, *, score: str = "score", by: Sequence[str] = ("method",),
           order: str = "configuration_index") -> pd.DataFrame:
    """The chosen configuration of each ``by`` cell: the row with the highest ``score``, ties to the lowest
    ``order`` (the printed configuration is index 0). A NaN score (a run that diverged) is never chosen unless
    every run of the cell is NaN.

    Parameters
    ----------
    scores : pandas.DataFrame
        One row per run, with the columns ``score``, ``order`` and ``by``. The score must be a validation
        quantity: nothing here can tell, the callers pass validation scores only.
    score, order : str
        The columns to maximise and to break ties by (lowest first).
    by : sequence of str
        The cells a configuration is chosen in (e.g. method; constraint, method and fold).

    Returns
    -------
    pandas.DataFrame
        One row per cell, ``scores``' columns.
    """
    missing = [c for c in (score, order, *by) if c not in scores.columns]
    if missing:
        raise ValueError(f"scores has no column(s) {missing}")
    ranked = scores.assign(_nan=scores[score].isna()).sort_values(
        [*by, "_nan", score, order], ascending=[True] * len(by) + [True, False, True], kind="stable")
    return ranked.groupby(list(by), sort=False).head(1).drop(columns="_nan").reset_index(drop=True)


# ----------------------------------------------------------------------------- DP-SGD comparisons
def tuned_config(base, configuration: Mapping[str, Any], *, method: str | None = None):
    """``base`` (a :class:`~dpfair_analysis.experiments.compare.CompareConfig`) with a configuration of a
    grid applied: ``lr`` and ``sampling`` set the training loop's step size and batch sampling, ``clip_bound`` the
    run's uniform bound C, and any other name an option of ``method``'s own (its registered options dataclass,
    :meth:`~dpfair_analysis.experiments.compare.CompareConfig.with_options`)."""
    loop = {k: v for k, v in configuration.items() if k in ("lr", "sampling")}
    own = {k: v for k, v in configuration.items() if k not in ("lr", "sampling", "clip_bound")}
    if own:
        allowed = () if method is None else tuple(f.name for f in dataclasses.fields(registry.get(method).options))
        unknown = sorted(set(own) - set(allowed))
        if unknown:
            raise ValueError(f"a configuration sets lr, sampling, clip_bound and {method or 'no method'}'s options "
                             f"{list(allowed)}, got {unknown}")
    config = replace(base, train=replace(base.train, **loop))
    if "clip_bound" in configuration:
        config = replace(config, clip_bound=configuration["clip_bound"])
    return config.with_options(method, **own) if own else config


def validation_split(config, *, seed: int, fraction: float = VALIDATION_FRACTION):
    """(train, validation, test) of a comparison for one seed, the validation rows carved from the training data.

    1. The test rows are the comparison's own (the official test split, or the seeded stratified split of
       :func:`~dpfair_analysis.data.dataset.comparison_split`): never used for selection.
    2. ``fraction`` of the remaining rows, stratified by group, is held out as the validation set -- before
       the training groups are cut, so it has the data's natural group mix, as the test set does. On
       unbalanced MNIST its ~585 images of class 8 are images the cut to 500 discards anyway.
    3. The training rows are the rest, each group of ``train_group_fraction`` cut to the **same count** the
       comparison keeps (round(fraction x the group's size before the validation rows left): class 8 keeps
       its 500 images), then subsampled by ``train_subsample``.

    Parameters
    ----------
    config : CompareConfig
        The comparison (:class:`~dpfair_analysis.experiments.compare.CompareConfig`): its data set, test split,
        group cuts and subsample.
    seed : int
        The seed of the test split (when random), of the validation rows and of the group cut.
    fraction : float
        Share of the non-test rows held out for validation, in (0, 1).

    Returns
    -------
    tuple of GroupedDataset
        (train, validation, test).
    """
    from dpfair_analysis.experiments.compare import load_data

    check_fraction(fraction, "fraction", open_high=True)
    full, official = load_data(config)
    pool, test = (full, official) if config.test_split == "official" else full.split(config.test_fraction,
                                                                                      seed=seed)
    rest, validation = pool.split(fraction, seed=seed)
    train = rest
    if config.train_group_fraction:
        before, after = pool.group_sizes(), rest.group_sizes()
        keep = {}
        for g, f in config.train_group_fraction.items():
            k = pool.group_id(g)
            keep[g] = min(max(1, round(f * int(before[k]))), int(after[k]))
        train = rest.resample_groups(keep, seed=seed)
    if config.train_subsample < 1:
        train, _ = train.split(1 - config.train_subsample, seed=seed)
    return train, validation, test


def tuning_run(config, method: str, *, seed: int, fraction: float = VALIDATION_FRACTION,
               progress: bool = False) -> dict:
    """Train ``method`` of ``config`` on :func:`validation_split`'s training rows exactly as the comparison
    does (:func:`~dpfair_analysis.experiments.compare.train_method`: same model, policy, equal-privacy cut)
    and evaluate the final model on the validation and the test rows.

    Parameters
    ----------
    config : CompareConfig
        The comparison at one configuration (:func:`tuned_config`).
    method : str
        A method of the training loop (``sgd``, ``dpsgd``, ``naive``, ``dpsgdf``, ``optq``, ``fairdp``, ...).
    seed : int
        The run's seed (split, initialisation, batches, noise).
    fraction : float
        The validation share (:func:`validation_split`).
    progress : bool
        Show the training loop's progress bar.

    Returns
    -------
    dict
        ``{"rows": [...], "history", "steps"}``: one row per (split, group incl. ``all``) with ``n`` and
        ``accuracy``, each carrying the run's ``epsilon``, ``steps``, ``lr``, ``sampling``,
        ``sampling_matches_accounting`` (False for shuffled batches: the epsilon is then the Poisson
        accountant's, not a guarantee of what ran) and the split sizes, and ``constant_prediction``.
    """
    from dpfair_analysis.experiments.compare import train_method

    train_data, validation, test = validation_split(config, seed=seed, fraction=fraction)
    result = train_method(config, method, train_data, None, seed=seed, progress=progress)
    rows = evaluation_rows(result, method=method, seed=seed, sampling=config.train.sampling,
                           n_train=len(train_data), validation=validation, test=test)
    return {"rows": rows, "history": result.history, "steps": result.steps}


def evaluation_rows(result, *, method: str, seed: int, sampling: str, n_train: int, validation, test) -> list[dict]:
    """One row per (split, group incl. ``all``) of a finished run (a
    :class:`~dpfair_analysis.training.loop.TrainingResult`) on the ``validation`` and ``test`` rows: ``n`` and
    ``accuracy``, and ``constant_prediction`` (the label, when the model predicts one label for every row of the
    split), each with the run's ``method``, ``seed``, ``lr``, ``sampling``, ``epsilon``, ``steps``,
    ``sampling_matches_accounting`` and the split sizes ``n_train``, ``n_validation``, ``n_test``."""
    import torch

    from dpfair_analysis.fairness.metrics import group_accuracy
    from dpfair_analysis.training.loop import predict_logits

    run = {"method": method, "seed": seed, "lr": result.learning_rate, "sampling": sampling,
           "epsilon": math.nan if result.epsilon is None else float(result.epsilon),
           "steps": int(result.steps["step"].max()) if len(result.steps) else 0,
           "sampling_matches_accounting": bool(result.sampling_matches_accounting),
           "n_train": n_train, "n_validation": len(validation), "n_test": len(test)}
    rows = []
    for split, data in (("validation", validation), ("test", test)):
        with torch.no_grad():
            predicted = predict_logits(result.model, data.X).argmax(dim=1)
        accuracy = group_accuracy(data.y.numpy(), predicted.numpy(), data.group.numpy(),
                                  group_names=data.group_names)
        labels = predicted.unique()
        constant = data.label_names[int(labels[0])] if len(labels) == 1 else None
        rows += [{**run, "split": split, "group": str(r.group), "n": int(r.n), "accuracy": float(r.accuracy),
                  "constant_prediction": constant} for r in accuracy.itertuples()]
    return rows


def tuning_plan(base, *, methods: Sequence[str | tuple[str, ...]], grid: TuningGrid,
                seeds: Sequence[int] = (0,)) -> list[tuple[str, dict[str, Any], int]]:
    """(method, configuration, seed) of every tuning run, in the order they should run: method by method in
    ``methods``' order, each through the grid's configurations in its order (the printed one first); an entry
    of ``methods`` that is a tuple of names runs those methods interleaved, configuration by configuration."""
    from dpfair_analysis.experiments.compare import parse_method

    waves = [(m,) if isinstance(m, str) else tuple(m) for m in methods]
    for method in (m for wave in waves for m in wave):
        parse_method(method, default_clip=base.clip_bound)  # a clear error for an unknown name
    return [(method, configuration, seed) for wave in waves for configuration in grid.configurations()
            for method in wave for seed in seeds]


def tuning_key(config, method: str, seed: int, fraction: float) -> str:
    """The run cache's and the records' key of one tuning run (everything that determines it: of the methods'
    options, the run's own method's -- another method's options change no run of this one)."""
    from dpfair_analysis.experiments.cache import config_key

    name = registry.parse_method(method, default_clip=config.clip_bound)[0]  # "dpsgd(C=2)" -> dpsgd
    own = {key: options for key, options in config.method_options.items() if key == name}
    return config_key("tuning-run", replace(config, methods=(method,), seeds=(seed,), method_options=own), fraction)


def tuning_rows(base, method: str, configuration: Mapping[str, Any], seed: int, *,
                fraction: float = VALIDATION_FRACTION, cache=None, records=None,
                compute_missing: bool = True, progress: bool = False) -> list[dict] | None:
    """The rows of one tuning run (:func:`tuning_run` of ``method`` at ``configuration``): from ``records``
    when there, else from ``cache`` (then recorded), else trained (then cached and recorded) -- or ``None``
    with ``compute_missing=False``."""
    from dpfair_analysis.experiments.cache import RunCache

    cache = cache or RunCache(None)
    config = tuned_config(base, configuration, method=method)
    key = tuning_key(config, method, seed, fraction)
    rows = records.get(key) if records is not None else None
    if rows is not None:
        return rows
    found, value = cache.lookup(key)
    if not found:
        if not compute_missing:
            return None
        value = tuning_run(config, method, seed=seed, fraction=fraction, progress=progress)
        cache.store(key, value)
    if records is not None:
        records.put(key, value["rows"], fingerprint=cache.origin(key),
                    label=f"tuning rows: {config.dataset} {method} seed {seed}, "
                                               f"{describe_configuration(configuration)}, {config.train.epochs} epochs")
    return value["rows"]


def recorded_tuning_runs(base, *, methods: Sequence[str], grid: TuningGrid, seeds: Sequence[int] = (0,),
                         fraction: float = VALIDATION_FRACTION, cache=None, records=None,
                         compute_missing: bool = True, progress: bool = False) -> pd.DataFrame:
    """The rows of every run of :func:`tuning_plan` (:func:`tuning_rows`), each with its configuration's index
    in the grid (``configuration_index``, 0 = printed), its label and values (``cfg_<name>``). With
    ``compute_missing=False`` a run neither recorded nor cached is left out (a notebook drawing what is done
    so far)."""
    from tqdm.auto import tqdm

    indices = {describe_configuration(c): i for i, c in enumerate(grid.configurations())}
    frames = []
    plan = tuning_plan(base, methods=methods, grid=grid, seeds=seeds)
    for method, configuration, seed in tqdm(plan, desc="tuning runs", disable=not progress, leave=False):
        rows = tuning_rows(base, method, configuration, seed, fraction=fraction, cache=cache, records=records,
                           compute_missing=compute_missing, progress=progress)
        if rows is None:
            continue
        label = describe_configuration(configuration)
        frames.append(pd.DataFrame(rows).assign(configuration=label, configuration_index=indices[label],
                                                **{f"cfg_{k}": v for k, v in configuration.items()}))
    if not frames:  # nothing recorded yet: the columns a run's rows have, no rows
        return pd.DataFrame(columns=["method", "seed", "split", "group", "n", "accuracy", "epsilon", "steps",
                                     "sampling_matches_accounting", "configuration", "configuration_index",
                                     *(f"cfg_{k}" for k in grid.values)])
    return pd.concat(frames, ignore_index=True)


def budget_status(rows: pd.DataFrame, grid: TuningGrid, methods: Sequence[str]) -> pd.DataFrame:
    """How much of each method's budget ``rows`` (:func:`recorded_tuning_runs`) hold: one row per method with
    the configurations run and whether the budget is complete. A choice over an incomplete budget is not the
    protocol's: verdicts are drawn for complete methods only."""
    done = rows.groupby("method")["configuration_index"].nunique() if len(rows) else pd.Series(dtype=int)
    return pd.DataFrame([{"method": m, "configurations_run": int(done.get(m, 0)), "budget": len(grid),
                          "complete": int(done.get(m, 0)) == len(grid)} for m in methods])


# ----------------------------------------------------------------------------- the printed and the tuned configuration
def _wide(rows: pd.DataFrame, split: str, groups: Sequence[str]) -> pd.DataFrame:
    """One row per (method, configuration) of :func:`recorded_tuning_runs` rows: the accuracy of ``groups`` on
    ``split`` (mean over seeds) and the run's epsilon and sampling."""
    part = rows[(rows["split"] == split) & rows["group"].isin(groups)]
    wide = part.pivot_table(index=["method", "configuration_index", "configuration"], columns="group",
                            values="accuracy", aggfunc="mean")[list(groups)]
    info = part.groupby(["method", "configuration_index", "configuration"])[
        ["epsilon", "sampling_matches_accounting"]].first()
    return wide.join(info).reset_index()


def printed_and_tuned(rows: pd.DataFrame, *, groups: Sequence[str]) -> pd.DataFrame:
    """Per method, the printed configuration (index 0) and the one chosen by the overall **validation**
    accuracy (:func:`select`), each with its validation and test accuracy of ``groups``, epsilon and whether its
    sampling is what the accountant assumes. Columns ``method, which (printed|tuned), configuration, ...``."""
    validation = _wide(rows, "validation", groups).rename(columns={g: f"val_{g}" for g in groups})
    test = _wide(rows, "test", groups).drop(columns=["epsilon", "sampling_matches_accounting"])
    both = validation.merge(test, on=["method", "configuration_index", "configuration"])
    chosen = select(both.assign(score=both["val_all"]), by=("method",)).drop(columns="score")
    printed = both[both["configuration_index"] == 0]
    order = list(dict.fromkeys(rows["method"]))
    out = pd.concat([printed.assign(which="printed"), chosen.assign(which="tuned")], ignore_index=True)
    out["method"] = pd.Categorical(out["method"], order, ordered=True)
    out = out.sort_values(["method", "which"], kind="stable").reset_index(drop=True)
    out["method"] = out["method"].astype(str)
    return out[["method", "which", "configuration", "configuration_index", *(f"val_{g}" for g in groups),
                *groups, "epsilon", "sampling_matches_accounting"]]


def costs_of_privacy(selection: pd.DataFrame, *, groups: Sequence[str]) -> pd.DataFrame:
    """Paper 000's cost of privacy, Delta^k = acc_k(method) - acc_k(SGD), on the test rows: the printed
    configuration of each method against SGD's printed one, the tuned against SGD's tuned (every method on the
    same budget, SGD included). SGD's row keeps its accuracy. Adds ``max_gap`` = max |Delta^i - Delta^j| over
    ``groups`` other than ``all``."""
    out = []
    for which, part in selection.groupby("which", sort=False):
        reference = part[part["method"] == "sgd"]
        for row in part.to_dict("records"):
            line = dict(row)
            if row["method"] != "sgd" and len(reference):
                for g in groups:
                    line[g] = row[g] - float(reference[g].iloc[0])
                costs = [line[g] for g in groups if g != "all"]
                line["max_gap"] = max(costs) - min(costs)
            line["quantity"] = "accuracy" if row["method"] == "sgd" else "cost vs SGD"
            out.append(line)
    return pd.DataFrame(out)


def sampling_effect(rows: pd.DataFrame, *, groups: Sequence[str]) -> pd.DataFrame:
    """The batch-sampling hypothesis (shuffled fixed-size batches, the papers' likely practice, against the
    Poisson sampling the accountant assumes): per (method, lr) the test and validation accuracy of ``groups``
    under each sampling and the difference shuffle - poisson."""
    out = []
    for split in ("test", "validation"):
        part = rows[(rows["split"] == split) & rows["group"].isin(groups)]
        wide = part.pivot_table(index=["method", "cfg_lr"], columns=["cfg_sampling", "group"], values="accuracy",
                                aggfunc="mean")
        if "poisson" not in wide.columns.get_level_values(0) or "shuffle" not in wide.columns.get_level_values(0):
            continue
        for (method, lr), line in wide.iterrows():
            record = {"method": method, "lr": lr, "split": split}
            for g in groups:
                p, s = line.get(("poisson", g), math.nan), line.get(("shuffle", g), math.nan)
                record |= {f"poisson_{g}": p, f"shuffle_{g}": s, f"diff_{g}": s - p}
            out.append(record)
    order = list(dict.fromkeys(rows["method"]))
    frame = pd.DataFrame(out)
    if frame.empty:
        return frame
    frame["method"] = pd.Categorical(frame["method"], order, ordered=True)
    return frame.sort_values(["split", "method", "lr"], ascending=[False, True, True]).reset_index(drop=True) \
        .assign(method=lambda f: f["method"].astype(str))
