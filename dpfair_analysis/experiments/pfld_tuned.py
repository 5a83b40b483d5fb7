"""Paper 003 under the reproduction protocol (:mod:`.tuning`): Table 2 with every method tuned on validation rows, and
the sweeps of Figures 1-5 from per-seed tuned configurations.

* :func:`tuned_table2` -- every Table 2 method tuned with the same budget (:data:`TABLE2_GRIDS`, 16
  configurations each) on validation rows carved from each training fold, the choice refitted and tested on
  the test fold (:mod:`dpfair_analysis.experiments.tuning`).
* :func:`sweep_tuning` / :func:`tuned_bases` -- the per-seed configurations the figure sweeps of
  :mod:`dpfair_analysis.experiments.pfld` start from.

The verdicts on these numbers (beside the paper and the printed configuration; Figures 1-5's statements) are
:mod:`dpfair_analysis.verify.reproduction`'s.

The untuned Table 2 and the sweeps themselves live in :mod:`dpfair_analysis.experiments.pfld`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Sequence

import pandas as pd

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.experiments.cache import RunCache, config_key
from dpfair_analysis.experiments.pfld import (KINDS, PRIVATE_METHODS, PROFILES,
                                              TABLE_METHODS, PfldSettings, _clf_for_every_constraint, _configured,
                                              _settings_key, _variant, cv_folds, load_table_data, run_method,
                                              scaled_on_train, table2, table_name, with_profile)
from dpfair_analysis.experiments.sweep import Backend, Run, run_sweep
from dpfair_analysis.experiments.tuning import TuningGrid, describe_configuration, select
from dpfair_analysis.validation import check_choice, check_positive

def sweep_tuning(dataset: str = "bank", *, kind: str = "dp", methods: Sequence[str] = ("pfld",),
                 profile: str = "full", settings: PfldSettings | None = None, seeds: int | None = None,
                 grids: dict[str, TuningGrid] | None = None, epsilon: float = 1.0,
                 validation_fraction: float | None = None, cache: RunCache | None = None,
                 progress: bool = False, backend: Backend | None = None) -> pd.DataFrame:
    """The reproduction protocol for a figure's sweeps: for each seed's 80/20 split of the sweeps, every
    configuration of each method's budget at ``epsilon`` trains on the split's training rows minus
    ``validation_fraction`` of them (stratified by group x label) and is scored on those (:func:`tuning_score`);
    the test rows of the split are never read.

    Parameters
    ----------
    dataset : str
        The figure's data set.
    kind : str
        Its constraint (dp, eo, ap).
    methods : sequence of str
        The methods whose configuration is chosen (PF-LD; M for Figure 1).
    profile, settings, seeds
        As for :func:`~dpfair_analysis.experiments.pfld.epsilon_sweep` (the same splits as the sweeps).
    grids : dict of str to TuningGrid, optional
        The budgets (default :func:`table2_grids`).
    epsilon : float
        The privacy budget the configurations are tuned at.
    validation_fraction : float, optional
        Default :data:`TABLE2_VALIDATION_FRACTION`.
    cache, progress, backend
        As for the sweeps.

    Returns
    -------
    pandas.DataFrame
        One row per (method, seed, configuration) with the validation accuracy, violation, score and
        ``chosen`` (:func:`tuned_bases` turns the chosen ones into the sweeps' ``bases``).
    """
    settings = settings or with_profile(profile)
    grids = grids or table2_grids(profile)
    validation_fraction = TABLE2_VALIDATION_FRACTION if validation_fraction is None else validation_fraction
    n_seeds = seeds if seeds is not None else settings.sweep_seeds
    data = load_table_data(dataset, subsample=settings.subsample, seed=settings.seed)
    cells, runs = [], []
    for s in range(n_seeds):
        train, _ = data.split(0.2, seed=settings.seed + s, stratify="group_label")
        fit, held_out = scaled_on_train(*train.split(validation_fraction, seed=settings.seed + s,
                                                     stratify="group_label"))
        for method in methods:
            for i, configuration in enumerate(grids[method].configurations()):
                run_settings, overrides = _configured(configuration, settings)
                key = config_key("pfld-sweep-tuning", dataset, _settings_key(settings), method, kind, epsilon, s,
                                 configuration, validation_fraction, *_variant(method))
                runs.append(Run(key, partial(run_method, method, kind, fit, held_out, settings=run_settings,
                                             epsilon=epsilon, seed=settings.seed + s, record_divergence=True,
                                             **overrides)))
                cells.append((method, s, i, configuration))
    results = run_sweep(runs, cache=cache, backend=backend, progress=progress, desc=f"sweep tuning {dataset} {kind}")
    rows = pd.DataFrame([{"dataset": dataset, "constraint": kind, "method": method, "seed": s,
                          "configuration_index": i, "configuration": describe_configuration(configuration),
                          "accuracy": r["accuracy"], "violation": r["violation"],
                          "score": tuning_score(method, r["accuracy"], r["violation"])}
                         for (method, s, i, configuration), r in zip(cells, results)])
    picked = select(rows, by=("method", "seed"))
    rows["chosen"] = rows.set_index(["method", "seed", "configuration_index"]).index.isin(
        picked.set_index(["method", "seed", "configuration_index"]).index)
    return rows


def tuned_bases(tuning: pd.DataFrame, grids: dict[str, TuningGrid]) -> dict[tuple[str, int], dict[str, Any]]:
    """(method, seed) -> the configuration :func:`sweep_tuning` chose: the ``bases`` of the sweeps."""
    chosen = tuning[tuning["chosen"]]
    return {(r.method, int(r.seed)): grids[r.method].configurations()[int(r.configuration_index)]
            for r in chosen.itertuples()}


# ------------------------------------------------------------------ Table 2 under the reproduction protocol
#: PF-LD: paper 003 prints epsilon, delta, C_p = 10 and C_d = 5 (Sec. 8) and "have not performed a systematic
#: model tuning"; learning rate, epochs and lambda_max are the toolkit's defaults. Two values each, the half
#: fraction (16 configurations): the printed configuration, every pair of changes and every four changes. The
#: second values: a larger step and fewer steps (at a fixed epsilon fewer steps carry less noise each), C_p and
#: C_d cut to 1 (C_d = 1 is the range of h in [0, 1] for dp and eo: C_d = 5 only scales the dual noise), and a
#: lower cap on the multipliers (the primal noise scales with lambda_max)
PFLD_GRID = TuningGrid({"lr": (0.05, 0.2), "epochs": (10, 5), "clip_primal": (10.0, 1.0), "clip_dual": (5.0, 1.0),
                        "lambda_max": (2.0, 0.5)},
                       printed={"lr": 0.05, "epochs": 10, "clip_primal": 10.0, "clip_dual": 5.0, "lambda_max": 2.0},
                       design="half", note="C_p, C_d printed; lr, epochs, lambda_max the toolkit's defaults")
#: CLF: the MLP's learning rate and epochs, 16 configurations (the same budget as PF-LD)
CLF_GRID = TuningGrid({"lr": (0.05, 0.01, 0.1, 0.2), "epochs": (10, 5, 20, 40)}, printed={"lr": 0.05, "epochs": 10},
                      note="nothing printed; the toolkit's defaults first")
#: A and M: the reductions' constraint bound gamma, 16 values (the same budget), the toolkit's 0.01 first
GAMMA_GRID = TuningGrid({"difference_bound": (0.01, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.015, 0.02, 0.03, 0.05,
                                              0.075, 0.1, 0.15, 0.2, 0.3, 0.5)},
                        printed={"difference_bound": 0.01}, note="nothing printed; the toolkit's default first")
#: Z: the covariance threshold as a fraction of the unconstrained model's, 16 values (the same budget)
Z_GRID = TuningGrid({"covariance_fraction": (0.1, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.075, 0.15, 0.2, 0.3, 0.4,
                                             0.5, 0.7, 0.85, 1.0)},
                    printed={"covariance_fraction": 0.1}, note="nothing printed; the toolkit's default first")
#: every Table 2 method's budget (16 configurations each)
TABLE2_GRIDS = {"clf": CLF_GRID, "z": Z_GRID, "a": GAMMA_GRID, "m": GAMMA_GRID, "pfld": PFLD_GRID}
#: share of each cross-validation training fold held out for selection (stratified by group x label)
TABLE2_VALIDATION_FRACTION = 0.2
#: how each method's configuration is chosen on its validation rows
SELECTION_SCORES = {"clf": "validation accuracy (CLF is trained for accuracy only)",
                    "fair": "validation accuracy minus validation violation (every fair method alike)"}


def tuning_score(method: str, accuracy: float, violation: float) -> float:
    """The validation score a configuration is chosen by (:data:`SELECTION_SCORES`): accuracy for CLF,
    accuracy - violation for every fair method."""
    return accuracy if method == "clf" else accuracy - violation


def table2_grids(profile: str) -> dict[str, TuningGrid]:
    """:data:`TABLE2_GRIDS`, or for the quick profile each budget cut to its first two configurations."""
    check_choice(profile, "profile", PROFILES)
    return dict(TABLE2_GRIDS) if profile == "full" else {m: g.head(2) for m, g in TABLE2_GRIDS.items()}


@dataclass
class TunedTable2:
    """Table 2 of one data set under the reproduction protocol (:func:`tuned_table2`).

    ``runs``: every tuning run, one row per (constraint, method, fold, configuration) with its validation
    accuracy, violation and ``score`` and whether it was ``chosen``; ``chosen``: one row per (constraint,
    method, fold) with the chosen configuration refitted on the whole training fold and tested on the test
    fold (``accuracy``, ``violation``, ``epsilon``); ``defaults``: :func:`table2` (the printed configuration on
    the whole training folds); ``grids``: each method's budget."""

    dataset: str
    runs: pd.DataFrame
    chosen: pd.DataFrame
    defaults: pd.DataFrame
    grids: dict[str, TuningGrid]
    validation_fraction: float


def tuned_table2(dataset: str = "compas", *, constraints: Sequence[str] = KINDS, methods: Sequence[str] = TABLE_METHODS,
                 folds: int | None = None, epsilon: float = 1.0, profile: str = "full", group_by: str | None = None,
                 settings: PfldSettings | None = None, grids: dict[str, TuningGrid] | None = None,
                 validation_fraction: float = TABLE2_VALIDATION_FRACTION, cache: RunCache | None = None,
                 progress: bool = False, backend: Backend | None = None) -> TunedTable2:
    """Paper 003 Table 2 for one data set under the reproduction protocol (:mod:`.tuning`), nested in the
    cross-validation: in each fold, ``validation_fraction`` of the training fold (stratified by group x label)
    is held out; every configuration of the method's budget trains on the rest and is scored on the held-out
    rows (:func:`tuning_score`); the best is refitted on the whole training fold and tested on the test fold,
    which no choice has seen. CLF is chosen once per fold (by accuracy) and scored under every constraint.
    Every PF-LD configuration is calibrated to ``epsilon``, so the chosen one's epsilon is ``epsilon`` (M:
    epsilon-LDP); the selection itself is not private (:data:`~.tuning.SELECTION_PRIVACY`). Diverged runs are
    scored NaN and never chosen.

    Parameters
    ----------
    dataset : str
        A Table 2 data set (:data:`~dpfair_analysis.experiments.pfld.DATASETS`).
    group_by : str, optional
        Its grouping (Bank: ``age``, ``age3``, ``age5``; None: the loader's default).
    constraints, methods : sequence of str
        The fairness constraints (dp, eo, ap) and methods (of ``grids``).
    folds, epsilon, profile, settings
        As for :func:`table2` (its rows at the printed configuration are ``defaults``).
    grids : dict of str to TuningGrid, optional
        Each method's budget (default :func:`table2_grids` of ``profile``: 16 configurations each).
    validation_fraction : float
        Share of each training fold held out for the choice.
    cache, progress, backend
        As for :func:`table2`: every run is cached by its configuration, role and fold.

    Returns
    -------
    TunedTable2
        Every tuning run, the refitted choices, the printed configuration's table and the budgets.
    """
    settings = settings or with_profile(profile)
    if folds is not None:
        settings = replace(settings, folds=folds)
    grids = grids or table2_grids(profile)
    epsilon = check_positive(epsilon, "epsilon")
    for kind in constraints:
        check_choice(kind, "constraint", KINDS)
    for method in methods:
        check_choice(method, "method", tuple(grids))
    defaults = table2(dataset, constraints=constraints, methods=methods, epsilon=epsilon, group_by=group_by,
                      settings=settings, cache=cache, progress=progress, backend=backend)
    data = load_table_data(dataset, group_by=group_by, subsample=settings.subsample, seed=settings.seed)
    splits = cv_folds(data, settings.folds, seed=settings.seed)
    name = table_name(dataset, group_by)

    def fold_data(f: int, role: str) -> tuple[GroupedDataset, GroupedDataset]:
        train, test = data.subset(splits[f][0]), data.subset(splits[f][1])
        if role == "refit":
            return scaled_on_train(train, test)
        return scaled_on_train(*train.split(validation_fraction, seed=settings.seed + f, stratify="group_label"))

    def make_run(method: str, kind: str, f: int, configuration: dict, role: str) -> Run:
        run_settings, overrides = _configured(configuration, settings)
        train, held_out = fold_data(f, role)
        key = config_key("pfld-tuning", dataset, group_by, _settings_key(settings), method,
                         "any" if method == "clf" else kind, f, epsilon if method in PRIVATE_METHODS else None,
                         configuration, role, validation_fraction, *_variant(method))
        if method == "clf":
            compute = partial(_clf_for_every_constraint, train, held_out, run_settings, seed=settings.seed + f,
                              lr=overrides.get("lr"))
        else:
            compute = partial(run_method, method, kind, train, held_out, settings=run_settings, epsilon=epsilon,
                              seed=settings.seed + f, record_divergence=True, **overrides)
        return Run(key, compute)

    def row_of(result: dict, method: str, kind: str) -> dict:
        return dict(result[kind]) if method == "clf" else dict(result)

    # 1. every configuration on the training fold minus its validation rows, scored on those rows
    cells = [(kind, method, f, i, configuration) for kind in constraints for method in methods
             for f in range(len(splits)) for i, configuration in enumerate(grids[method].configurations())]
    results = run_sweep([make_run(m, k, f, c, "validation") for k, m, f, _, c in cells], cache=cache,
                        backend=backend, progress=progress, desc=f"Table 2 {name}: tuning")
    runs = []
    for (kind, method, f, i, configuration), result in zip(cells, results):
        row = row_of(result, method, kind)
        runs.append({"dataset": name, "constraint": kind, "method": method, "fold": f, "configuration_index": i,
                     "configuration": describe_configuration(configuration),
                     **{f"cfg_{k}": v for k, v in configuration.items()},
                     "accuracy": row["accuracy"], "violation": row["violation"],
                     "score": tuning_score(method, row["accuracy"], row["violation"]),
                     "diverged_at_step": row.get("diverged_at_step", math.nan)})
    runs = pd.DataFrame(runs)
    picked = select(runs, by=("constraint", "method", "fold"))
    runs["chosen"] = runs.set_index(["constraint", "method", "fold", "configuration_index"]).index.isin(
        picked.set_index(["constraint", "method", "fold", "configuration_index"]).index)
    # 2. the chosen configuration refitted on the whole training fold, tested on the test fold
    configurations = {m: grids[m].configurations() for m in methods}
    chosen_cells = [(r.constraint, r.method, r.fold, int(r.configuration_index), float(r.score))
                    for r in picked.itertuples()]
    refits = run_sweep([make_run(m, k, f, configurations[m][i], "refit") for k, m, f, i, _ in chosen_cells],
                       cache=cache, backend=backend, progress=progress, desc=f"Table 2 {name}: refits")
    chosen = []
    for (kind, method, f, i, score), result in zip(chosen_cells, refits):
        row = row_of(result, method, kind)
        configuration = configurations[method][i]
        chosen.append({"dataset": name, "constraint": kind, "method": method, "fold": f, "configuration_index": i,
                       "configuration": describe_configuration(configuration),
                       **{f"cfg_{k}": v for k, v in configuration.items()},
                       "validation_score": score, "accuracy": row["accuracy"], "violation": row["violation"],
                       "epsilon": row.get("epsilon"), "diverged_at_step": row.get("diverged_at_step", math.nan)})
    return TunedTable2(dataset=name, runs=runs, chosen=pd.DataFrame(chosen), defaults=defaults,
                       grids={m: grids[m] for m in methods}, validation_fraction=validation_fraction)


#: the keys of a tuned row in JSON (:func:`tuned_table2`'s ``chosen``)
TUNED_ROW_KEYS = ("constraint", "method", "fold", "configuration", "validation_score", "accuracy", "violation",
                  "epsilon")
