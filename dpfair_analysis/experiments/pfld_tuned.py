"""Paper 003 under the reproduction protocol (:mod:`.tuning`): Table 2 with every method tuned on validation rows, and
the sweeps of Figures 1-5 from per-seed tuned configurations.

* :func:`tuned_table2` -- every Table 2 method tuned with the same budget (:data:`TABLE2_GRIDS`, 16
  configurations each) on validation rows carved from each training fold, the choice refitted and tested on
  the test fold (:mod:`dpfair_analysis.experiments.tuning`).
* :class:`TunedRuns` / :func:`plan` -- the same table run by run, for a recorder that outlives the machine: each run's
  result goes into a committed records file (:class:`~dpfair_analysis.experiments.cache.RunRecords`) the moment it
  ends, PF-LD and CLF first (``notebooks/record_runs.py --study pfld-tuned``), and :func:`tuned_table2` with
  ``records`` builds the table from that file alone (``dpfair pfld-table --tune --records PATH``).
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
from typing import Any, Iterator, Sequence

import pandas as pd

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.experiments.cache import RunCache, RunRecords, config_key
from dpfair_analysis.experiments.pfld import (KINDS, PRIVATE_METHODS, PROFILES,
                                              TABLE_METHODS, PfldSettings, _clf_for_every_constraint, _configured,
                                              _settings_key, _variant, cv_folds, keyed_group_by, load_table_data,
                                              run_method,
                                              scaled_on_train, table2, table2_key, table2_run, table_name,
                                              with_profile)
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


class TunedRuns:
    """Every run of :func:`tuned_table2` on one data set: its key, the call that computes it and its label, built
    from the folds only when a run is asked for (the folds' rows are split and scaled once per fold and role).

    Three kinds of run, by ``role``: ``"printed"`` (:func:`~dpfair_analysis.experiments.pfld.table2`'s run at the
    printed configuration on the whole training fold), ``"validation"`` (a configuration trained on the training
    fold less its validation rows, scored on them) and ``"refit"`` (the chosen configuration on the whole training
    fold, tested on the test fold). CLF's runs do not depend on the constraint: one key serves every constraint.
    """

    def __init__(self, dataset: str, *, group_by: str | None, constraints: Sequence[str], methods: Sequence[str],
                 settings: PfldSettings, grids: dict[str, TuningGrid], epsilon: float,
                 validation_fraction: float) -> None:
        self.dataset, self.group_by, self.settings, self.grids = dataset, group_by, settings, grids
        self.constraints, self.methods = tuple(constraints), tuple(methods)
        self.epsilon, self.validation_fraction = epsilon, validation_fraction
        self.name = table_name(dataset, group_by)
        self._data: GroupedDataset | None = None
        self._splits: list[tuple] | None = None
        self._folds: dict[tuple[int, str], tuple[GroupedDataset, GroupedDataset]] = {}

    @property
    def data(self) -> GroupedDataset:
        """The data set, unscaled (:func:`load_table_data`), loaded on first use."""
        if self._data is None:
            self._data = load_table_data(self.dataset, group_by=self.group_by, subsample=self.settings.subsample,
                                         seed=self.settings.seed)
        return self._data

    @property
    def splits(self) -> list[tuple]:
        """The cross-validation folds (:func:`cv_folds`)."""
        if self._splits is None:
            self._splits = cv_folds(self.data, self.settings.folds, seed=self.settings.seed)
        return self._splits

    def fold_data(self, fold: int, role: str) -> tuple[GroupedDataset, GroupedDataset]:
        """(rows trained on, rows scored on) of a validation or refit run in ``fold``, scaled on the former."""
        if (fold, role) not in self._folds:
            train, test = (self.data.subset(rows) for rows in self.splits[fold])
            self._folds[fold, role] = scaled_on_train(train, test) if role == "refit" else scaled_on_train(
                *train.split(self.validation_fraction, seed=self.settings.seed + fold, stratify="group_label"))
        return self._folds[fold, role]

    def key(self, method: str, kind: str, fold: int, configuration: dict, role: str) -> str:
        """The run cache's and the records' key of a run (everything that determines it)."""
        if role == "printed":
            return table2_key(dataset=self.dataset, group_by=self.group_by, settings=self.settings, method=method,
                              kind=kind, fold=fold, epsilon=self.epsilon)
        return config_key("pfld-tuning", self.dataset, keyed_group_by(self.dataset, self.group_by),
                          _settings_key(self.settings), method, "any" if method == "clf" else kind, fold,
                          self.epsilon if method in PRIVATE_METHODS else None, configuration, role,
                          self.validation_fraction, *_variant(method))

    def run(self, method: str, kind: str, fold: int, configuration: dict, role: str) -> Run:
        """The run of ``method`` under ``kind`` at ``configuration`` in ``fold`` as ``role`` (see the class)."""
        if role == "printed":
            return table2_run(self.data, self.splits, dataset=self.dataset, group_by=self.group_by,
                              settings=self.settings, method=method, kind=kind, fold=fold, epsilon=self.epsilon)
        run_settings, overrides = _configured(configuration, self.settings)
        train, held_out = self.fold_data(fold, role)
        seed = self.settings.seed + fold
        if method == "clf":
            compute = partial(_clf_for_every_constraint, train, held_out, run_settings, seed=seed,
                              lr=overrides.get("lr"))
        else:
            compute = partial(run_method, method, kind, train, held_out, settings=run_settings, epsilon=self.epsilon,
                              seed=seed, record_divergence=True, **overrides)
        return Run(self.key(method, kind, fold, configuration, role), compute,
                   label=f"Table 2 {self.name}: {method} {'any' if method == 'clf' else kind} fold {fold}, {role}, "
                         f"{describe_configuration(configuration)}")

    def cells(self, constraints: Sequence[str] | None = None,
              methods: Sequence[str] | None = None) -> list[tuple[str, str, int, int, dict]]:
        """(constraint, method, fold, configuration index, configuration) of every validation run (of
        ``constraints`` and ``methods``, default all), in :func:`tuned_table2`'s order."""
        return [(kind, method, f, i, configuration) for kind in constraints or self.constraints
                for method in methods or self.methods for f in range(self.settings.folds)
                for i, configuration in enumerate(self.grids[method].configurations())]

    def scored(self, cells: Sequence[tuple], results: Sequence[dict]) -> pd.DataFrame:
        """One row per validation run (``cells`` and their results) with its validation accuracy, violation,
        ``score`` (:func:`tuning_score`) and whether it was ``chosen`` (:func:`~.tuning.select` in each
        (constraint, method, fold))."""
        runs = []
        for (kind, method, f, i, configuration), result in zip(cells, results):
            row = _row_of(result, method, kind)
            runs.append({"dataset": self.name, "constraint": kind, "method": method, "fold": f,
                         "configuration_index": i, "configuration": describe_configuration(configuration),
                         **{f"cfg_{k}": v for k, v in configuration.items()},
                         "accuracy": row["accuracy"], "violation": row["violation"],
                         "score": tuning_score(method, row["accuracy"], row["violation"]),
                         "diverged_at_step": row.get("diverged_at_step", math.nan)})
        runs = pd.DataFrame(runs)
        picked = select(runs, by=CELL)
        runs["chosen"] = runs.set_index([*CELL, "configuration_index"]).index.isin(
            picked.set_index([*CELL, "configuration_index"]).index)
        return runs


#: the cells a configuration is chosen in
CELL = ("constraint", "method", "fold")


def _row_of(result: dict, method: str, kind: str) -> dict:
    """The row of a run's result under ``kind`` (CLF's result holds one per constraint)."""
    return dict(result[kind]) if method == "clf" else dict(result)


# ------------------------------------------------------------------ recording the tuned table run by run
#: the order a recorder computes the methods in: PF-LD and CLF (the paper's method and its unconstrained
#: reference) under every constraint first, then the other private method M, then A and Z
RECORD_PRIORITY = ("pfld", "clf", "m", "a", "z")


def record_order(constraints: Sequence[str], methods: Sequence[str]) -> list[tuple[str, str]]:
    """(constraint, method) in the order a recorder computes them (:data:`RECORD_PRIORITY`): PF-LD and CLF under
    every constraint, then the rest under every constraint. CLF's runs serve every constraint, so only its first
    constraint computes any."""
    ranked = sorted(methods, key=lambda m: RECORD_PRIORITY.index(m) if m in RECORD_PRIORITY else len(RECORD_PRIORITY))
    waves = [[m for m in ranked if m in ("pfld", "clf")], [m for m in ranked if m not in ("pfld", "clf")]]
    return [(kind, method) for wave in waves for kind in constraints for method in wave]


@dataclass(frozen=True)
class PlannedRun:
    """One run of the tuned table as a recorder plans it: ``role`` ``printed``, ``validation`` or ``refit``;
    a refit's ``configuration_index`` and ``key`` are None while its fold's validation runs are not all
    recorded (the choice is not known yet)."""

    constraint: str
    method: str
    fold: int
    role: str
    configuration_index: int | None
    key: str | None


def plan(protocol: TunedRuns, records: RunRecords) -> Iterator[PlannedRun]:
    """Every run of :func:`tuned_table2`, each once, in the order that answers something early: per
    (constraint, method) of :func:`record_order`, the printed configuration's runs of every fold (that cell of the
    untuned table), then fold by fold its validation runs and the refit of the configuration they choose (that
    fold's tuned result). A refit is planned when it is reached: a recorder that records each run before asking
    for the next gets it with its fold; a reader that records nothing gets it without a key if its fold's
    validation runs are not all recorded."""
    seen = set()
    for kind, method in record_order(protocol.constraints, protocol.methods):
        configurations = protocol.grids[method].configurations()
        steps = [(f, "printed", 0) for f in range(protocol.settings.folds)]
        steps += [(f, role, i) for f in range(protocol.settings.folds)
                  for role, i in [*(("validation", i) for i in range(len(configurations))), ("refit", None)]]
        for f, role, i in steps:
            if role == "refit":
                i = _choice(protocol, records, kind, method, f)
            key = None if i is None else protocol.key(method, kind, f, configurations[i], role)
            identity = key or (method, "any" if method == "clf" else kind, f, role)
            if identity not in seen:
                seen.add(identity)
                yield PlannedRun(kind, method, f, role, i, key)


def _choice(protocol: TunedRuns, records: RunRecords, kind: str, method: str, fold: int) -> int | None:
    """The configuration index :func:`tuned_table2` chooses in (kind, method, fold), from the recorded validation
    runs; None while one of them is not recorded."""
    cells = [c for c in protocol.cells((kind,), (method,)) if c[2] == fold]
    keys = [protocol.key(method, kind, fold, configuration, "validation") for *_, configuration in cells]
    if not all(records.recorded(key) for key in keys):
        return None
    scored = protocol.scored(cells, [records.get(key)[0] for key in keys])
    return int(scored.loc[scored["chosen"], "configuration_index"].iloc[0])


def planned_run(protocol: TunedRuns, planned: PlannedRun) -> Run:
    """The :class:`~.sweep.Run` of a planned run whose key is known."""
    configuration = protocol.grids[planned.method].configurations()[planned.configuration_index]
    return protocol.run(planned.method, planned.constraint, planned.fold, configuration, planned.role)


def records_progress(protocol: TunedRuns, records: RunRecords) -> pd.DataFrame:
    """One row per method: runs recorded of its planned runs (:func:`plan`), the median CPU seconds of a recorded
    run (``cpu_seconds`` of its row: training, and PF-LD's noise calibration in the first run of each run shape on a
    machine, an outlier the median passes over) and the CPU hours left at that median (NaN while none of its runs
    is recorded)."""
    lines = []
    for planned in plan(protocol, records):
        rows = records.get(planned.key) if planned.key is not None and records.recorded(planned.key) else None
        row = None if rows is None else next(iter(rows[0].values())) if planned.method == "clf" else rows[0]
        lines.append({"method": planned.method, "recorded": rows is not None,
                      "cpu_seconds": math.nan if row is None else row.get("cpu_seconds", math.nan)})
    frame = pd.DataFrame(lines, columns=["method", "recorded", "cpu_seconds"])
    out = frame.groupby("method", sort=False).agg(recorded=("recorded", "sum"), runs=("recorded", "size"),
                                                  cpu_seconds_per_run=("cpu_seconds", "median"))
    out["cpu_hours_left"] = (out["runs"] - out["recorded"]) * out["cpu_seconds_per_run"] / 3600
    return out.reset_index()


def tuned_table2(dataset: str = "compas", *, constraints: Sequence[str] = KINDS, methods: Sequence[str] = TABLE_METHODS,
                 folds: int | None = None, epsilon: float = 1.0, profile: str = "full", group_by: str | None = None,
                 settings: PfldSettings | None = None, grids: dict[str, TuningGrid] | None = None,
                 validation_fraction: float = TABLE2_VALIDATION_FRACTION, cache: RunCache | None = None,
                 progress: bool = False, backend: Backend | None = None,
                 records: RunRecords | None = None) -> TunedTable2:
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
    records : RunRecords, optional
        A committed records file (filled run by run in :func:`plan`'s order by a recorder): every run is served from it, and recorded in it the
        moment it is computed, so the table is built from the file alone on a machine without the run cache.

    Returns
    -------
    TunedTable2
        Every tuning run, the refitted choices, the printed configuration's table and the budgets.
    """
    protocol = tuned_runs(dataset, constraints=constraints, methods=methods, folds=folds, epsilon=epsilon,
                          profile=profile, group_by=group_by, settings=settings, grids=grids,
                          validation_fraction=validation_fraction)
    constraints, methods = protocol.constraints, protocol.methods
    sweep = partial(run_sweep, cache=cache, backend=backend, progress=progress, records=records)
    defaults = table2(dataset, constraints=constraints, methods=methods, epsilon=protocol.epsilon, group_by=group_by,
                      settings=protocol.settings, cache=cache, progress=progress, backend=backend, records=records)
    # 1. every configuration on the training fold minus its validation rows, scored on those rows
    cells = protocol.cells(constraints, methods)
    results = sweep([protocol.run(m, k, f, c, "validation") for k, m, f, _, c in cells],
                    desc=f"Table 2 {protocol.name}: tuning")
    runs = protocol.scored(cells, results)
    # 2. the chosen configuration refitted on the whole training fold, tested on the test fold
    picked = select(runs, by=CELL)  # the cells in select's order (sorted), as the table has always listed them
    configurations = {m: protocol.grids[m].configurations() for m in methods}
    chosen_cells = [(r.constraint, r.method, r.fold, int(r.configuration_index), float(r.score))
                    for r in picked.itertuples()]
    refits = sweep([protocol.run(m, k, f, configurations[m][i], "refit") for k, m, f, i, _ in chosen_cells],
                   desc=f"Table 2 {protocol.name}: refits")
    chosen = []
    for (kind, method, f, i, score), result in zip(chosen_cells, refits):
        row = _row_of(result, method, kind)
        configuration = configurations[method][i]
        chosen.append({"dataset": protocol.name, "constraint": kind, "method": method, "fold": f,
                       "configuration_index": i, "configuration": describe_configuration(configuration),
                       **{f"cfg_{k}": v for k, v in configuration.items()},
                       "validation_score": score, "accuracy": row["accuracy"], "violation": row["violation"],
                       "epsilon": row.get("epsilon"), "diverged_at_step": row.get("diverged_at_step", math.nan)})
    return TunedTable2(dataset=protocol.name, runs=runs, chosen=pd.DataFrame(chosen), defaults=defaults,
                       grids={m: protocol.grids[m] for m in methods}, validation_fraction=validation_fraction)


def tuned_runs(dataset: str = "compas", *, constraints: Sequence[str] = KINDS, methods: Sequence[str] = TABLE_METHODS,
               folds: int | None = None, epsilon: float = 1.0, profile: str = "full", group_by: str | None = None,
               settings: PfldSettings | None = None, grids: dict[str, TuningGrid] | None = None,
               validation_fraction: float = TABLE2_VALIDATION_FRACTION) -> TunedRuns:
    """The runs of :func:`tuned_table2` with these arguments (checked as it checks them): what a recorder plans
    (:func:`plan`)."""
    settings = settings or with_profile(profile)
    if folds is not None:
        settings = replace(settings, folds=folds)
    grids = grids or table2_grids(profile)
    epsilon = check_positive(epsilon, "epsilon")
    for kind in constraints:
        check_choice(kind, "constraint", KINDS)
    for method in methods:
        check_choice(method, "method", tuple(grids))
    return TunedRuns(dataset, group_by=group_by, constraints=constraints, methods=methods, settings=settings,
                     grids=grids, epsilon=epsilon, validation_fraction=validation_fraction)


#: the keys of a tuned row in JSON (:func:`tuned_table2`'s ``chosen``)
TUNED_ROW_KEYS = ("constraint", "method", "fold", "configuration", "validation_score", "accuracy", "violation",
                  "epsilon")
