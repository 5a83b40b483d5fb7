"""Validation of ``dpfair diagnose``: predicted vs actual DP-SGD per-group costs, beside naive predictors.

The study: for every **setting** (a data set, its groups and a model) x
**regime** (the DP settings: ``defaults`` is ``dpfair compare``'s -- b = 256, r = 1/sqrt(T),
C = 0.5, where clipping dominates; ``noisy`` has a small batch, a large learning rate, a
larger C and fewer rows, where the noise dominates) x **noise level** sigma x **seed**:

* the diagnosis of the seed's split (:func:`dpfair_analysis.diagnose.diagnose`, the same
  rows as the comparison, no private training);
* the actual SGD and DP-SGD runs of ``dpfair compare`` (:func:`.compare.run_compare`,
  cached by configuration, so an interrupted study resumes);
* one record per group: predicted cost and its 90% interval, its clipping and noise parts,
  the actual cost, the naive predictors' inputs (group size, SGD accuracy, mean gradient
  norm and fraction clipped at C along the non-private trajectory) and whether DP-SGD
  actually collapsed to a constant classifier (its accuracy equals one label's share in
  every group).

:func:`evaluate` turns the records into the table of the issue: mean Spearman rank
correlation between predicted and actual costs per cell, how often the most-hurt group
is named (over all cells and over the cells where it can be called: the two most-hurt
groups' mean costs differ by more than 1.96 standard errors over seeds), interval
coverage, each beside the naive predictors (each given the direction its hypothesis
states: smaller, less accurate, larger-gradient, more-clipped groups lose more; and, for
coverage, a linear map to costs fitted leave-one-data-set-out with a +-1.645 residual sd
interval), and the same for the diagnosis calibrated leave-one-data-set-out
(:func:`leave_one_dataset_out`).

Profiles: ``quick`` (3 seeds, small training sets, few epochs; minutes) and ``full``
(5 seeds, the full data sets, the regimes' full epochs; the lead's run: see
:func:`full_study_command`). Data sets whose raw file is not installed (Bank, Dutch:
``dpfair data fetch NAME --from PATH``) are skipped and listed.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from tqdm import tqdm

from dpfair_analysis import data as datasets
from dpfair_analysis.data.dataset import comparison_split
from dpfair_analysis.diagnose import SPLITS, DiagnosisOptions, PrivacyPlan, SplitRuns, diagnose, diagnose_splits, \
    fit_calibration
from dpfair_analysis.diagnose.explanation import NEGLIGIBLE
from dpfair_analysis.experiments.cache import RunCache, config_key
from dpfair_analysis.experiments.compare import CompareConfig, run_compare
from dpfair_analysis.models import build_model
from dpfair_analysis.training import methods as registry
from dpfair_analysis.training.loop import TrainConfig, train
from dpfair_analysis.training.policies import make_policy
from dpfair_analysis.validation import check_choice

PROFILES = ("quick", "full", "recommendations")
#: Bumped when the predictor changes what it predicts for the same options (cached diagnoses are then redone).
PREDICTOR_VERSION = "issue-51-fairdp-run-bounds"  # FairDP at the bounds its run reaches, not its fixed point
#: The recommendations' own predictor (in a diagnosis' key only where it has recommendations: the headline of a
#: DP-SGD plan does not depend on it): Global-Adapt and bounded adaptive clipping among them, each on its update's
#: expected path for the run's steps.
RECOMMENDATIONS_VERSION = "issue-51-adaptive-run-paths"
NAIVE = ("size", "accuracy", "grad_norm", "clip_fraction")
#: The direction of each naive hypothesis: a larger score = predicted to lose more.
NAIVE_DESCRIPTION = {"size": "group size only (smaller loses more)",
                     "accuracy": "non-private accuracy only (less accurate loses more)",
                     "grad_norm": "mean gradient norm only (larger loses more)",
                     "clip_fraction": "fraction clipped at C only (more clipped loses more)"}


@dataclass(frozen=True)
class ValidationSetting:
    """A data set, its grouping and a model; ``dataset`` is the registry name, ``source`` the underlying data
    (the unit left out by leave-one-data-set-out: Adult by sex and by race are one source)."""

    name: str
    dataset: str
    source: str
    data_options: dict = field(default_factory=dict)
    model: str = "logreg"
    train_group_fraction: dict = field(default_factory=dict)

    def available(self) -> bool:
        return datasets.DATASETS[self.dataset].available_offline()


@dataclass(frozen=True)
class Regime:
    """DP settings of a regime; ``max_train_rows`` caps the training set (a stratified subsample)."""

    name: str
    batch_size: int
    lr: float | None
    clip_bound: float
    epochs: int
    sigmas: tuple[float, ...]
    max_train_rows: int | None = None


SYNTHETIC = {"sizes": [3000, 1000, 300], "input_scale": [1.0, 4.0, 1.0], "margin": [0.3, 1.0, 0.05],
             "offset": [0.0, 1.0, 0.0], "temperature": 0.1, "dim": 10, "seed": 0}
"""Synthetic groups with known differences (:func:`~dpfair_analysis.data.synthetic.synthetic_groups`): g1 has 4x
the input norms (so 4x the gradients: clipped most) and its own boundary (w^T x = 1, the others' w^T x = 0), so a
model that cannot see the group compromises between them and clipping moves the compromise away from g1; g2 is
small and six times closer to its boundary than g0 (its rows flip first under noise)."""

SETTINGS: tuple[ValidationSetting, ...] = (
    ValidationSetting("adult-sex", "adult", "adult", {"by": "sex"}),
    ValidationSetting("adult-race", "adult", "adult", {"by": "race"}),
    ValidationSetting("compas-race", "compas", "compas", {"by": "race"}),
    ValidationSetting("german-age", "german", "german", {"by": "age"}),
    ValidationSetting("bank-age", "bank", "bank", {"by": "age"}),
    ValidationSetting("bank-age3", "bank", "bank", {"by": "age3"}),
    ValidationSetting("bank-age5", "bank", "bank", {"by": "age5"}),
    ValidationSetting("dutch-sex", "dutch", "dutch", {}),
    ValidationSetting("mnist-unbalanced", "mnist", "mnist", {}, train_group_fraction={"8": 500 / 5851}),
    ValidationSetting("synthetic", "synthetic", "synthetic", SYNTHETIC),
    # added later, as an out-of-sample check (never used to design or tune the diagnosis): ISLR's Wage by race
    # (a 37-row group) and the Titanic by gender and by class (seven groups, two of under 70 rows)
    ValidationSetting("wage-race", "wage", "wage", {"by": "race"}),
    ValidationSetting("titanic-gender", "titanic", "titanic", {"by": "gender"}),
    ValidationSetting("titanic-class", "titanic", "titanic", {"by": "class"}),
)
#: The settings added to the study after the diagnosis was designed (reported apart as the out-of-sample check).
NEW_SETTINGS = ("wage-race", "titanic-gender", "titanic-class")


@dataclass(frozen=True)
class Profile:
    """Seeds, regimes and (by name; None = all of :data:`SETTINGS`) the settings a study runs."""

    name: str
    seeds: tuple[int, ...]
    regimes: tuple[Regime, ...]
    options: DiagnosisOptions = DiagnosisOptions(recommendations=False)
    l2: float = 0.01
    settings: tuple[str, ...] | None = None


PROFILE_SETTINGS: dict[str, Profile] = {
    # the notebook's smoke run in the default test suite: three data sources, one sigma per regime, 2 seeds
    "quick": Profile("quick", (0, 1), (
        Regime("defaults", 256, None, 0.5, 2, (1.0,), max_train_rows=1500),
        Regime("noisy", 32, 0.5, 2.0, 1, (2.0,), max_train_rows=400)),
        settings=("adult-sex", "compas-race", "synthetic")),
    # the recommendations checked against real runs (issue 51.5): the quick profile's regimes with the
    # recommendations predicted, on six small settings (every option's real runs fit the machine; the full
    # profile's 78 cells with seven option runs each do not); 5 seeds, so each measured change has a standard error
    "recommendations": Profile("recommendations", (0, 1, 2, 3, 4), (
        Regime("defaults", 256, None, 0.5, 2, (1.0,), max_train_rows=1500),
        Regime("noisy", 32, 0.5, 2.0, 1, (2.0,), max_train_rows=400)),
        options=DiagnosisOptions(recommendations=True),
        settings=("adult-sex", "compas-race", "german-age", "synthetic", "titanic-gender", "wage-race")),
    "full": Profile("full", (0, 1, 2, 3, 4), (
        Regime("defaults", 256, None, 0.5, 20, (0.5, 1.0, 2.0)),
        Regime("noisy", 32, 0.5, 2.0, 5, (1.0, 2.0, 4.0), max_train_rows=4000))),
}


def profile_settings(profile: str) -> Profile:
    check_choice(profile, "profile", PROFILES)
    return PROFILE_SETTINGS[profile]


@dataclass(frozen=True)
class Cell:
    setting: ValidationSetting
    regime: Regime
    sigma: float

    @property
    def label(self) -> str:
        return f"{self.setting.name}/{self.regime.name}/σ={self.sigma:g}"


def cells(profile: str, settings: Sequence[ValidationSetting] = SETTINGS) -> list[Cell]:
    """Every (setting, regime, sigma) of a profile."""
    prof = profile_settings(profile)
    return [Cell(s, r, sigma) for s in settings for r in prof.regimes for sigma in r.sigmas]


_LOADED: dict[str, object] = {}


def load_setting(setting: ValidationSetting):
    """The setting's full data set (loaded once per process: every cell of a setting reads the same rows)."""
    key = json.dumps([setting.dataset, setting.data_options], sort_keys=True, default=str)
    if key not in _LOADED:
        _LOADED[key] = datasets.load(setting.dataset, **setting.data_options)
    return _LOADED[key]


def _subsample_fraction(full_rows: int, regime: Regime, test_fraction: float = 0.2) -> float:
    if regime.max_train_rows is None:
        return 1.0
    return float(min(1.0, regime.max_train_rows / (full_rows * (1 - test_fraction))))


def compare_config(cell: Cell, profile: str, full_rows: int) -> CompareConfig:
    """The ``dpfair compare`` configuration whose costs the cell's diagnosis predicts."""
    prof, regime, setting = profile_settings(profile), cell.regime, cell.setting
    return CompareConfig(dataset=setting.dataset, data_options=dict(setting.data_options), model=setting.model,
                         l2=prof.l2, methods=("sgd", "dpsgd"), noise_multiplier=cell.sigma,
                         clip_bound=regime.clip_bound, train_group_fraction=dict(setting.train_group_fraction),
                         train_subsample=_subsample_fraction(full_rows, regime),
                         train=TrainConfig(epochs=regime.epochs, batch_size=regime.batch_size, lr=regime.lr),
                         seeds=prof.seeds)


def plan_for(cell: Cell) -> PrivacyPlan:
    r = cell.regime
    return PrivacyPlan(noise_multiplier=cell.sigma, clip_bound=r.clip_bound, batch_size=r.batch_size,
                       epochs=r.epochs, lr=r.lr)


def _collapsed(accuracy: pd.Series, test) -> bool:
    """DP-SGD predicts one label for every row: each group's accuracy is that label's share of the group."""
    for label in range(test.n_classes):
        shares = []
        for k, name in enumerate(test.group_names):
            rows = test.group == k
            shares.append(float((test.y[rows] == label).double().mean()))
        if all(abs(accuracy[name] - s) < 1e-9 for name, s in zip(test.group_names, shares)):
            return True
    return False


def cell_diagnosis(cell: Cell, seed: int, *, profile: str, cache: RunCache, split_runs: SplitRuns) -> dict:
    """The cached diagnosis of one cell's seed (the expectation over the splits s, s + 1, s + 2 of
    :func:`~dpfair_analysis.diagnose.diagnose_splits`, as ``dpfair diagnose`` computes it): its per-group table
    (with the per-split prediction), mechanism, collapse, verdicts and, where the profile's options ask for them,
    its recommendations."""
    prof = profile_settings(profile)
    setting = cell.setting
    full = load_setting(setting)
    config = compare_config(cell, profile, len(full))
    options = prof.options          # split s is predicted with seed options.seed + s (diagnose_splits)
    key = config_key("diagnose-validation", PREDICTOR_VERSION, setting.name, setting.dataset,
                     setting.data_options, setting.model, setting.train_group_fraction, asdict(cell.regime),
                     cell.sigma, seed, asdict(options), prof.l2, SPLITS,
                     *((RECOMMENDATIONS_VERSION,) if options.recommendations else ()))

    def model(s: int):
        return build_model(setting.model, input_shape=tuple(full.X.shape[1:]), n_classes=full.n_classes, seed=s,
                           l2=prof.l2)

    def compute() -> dict:
        d = diagnose_splits(full, model, plan_for(cell), splits=SPLITS, seed=seed,
                            test_fraction=config.test_fraction, train_group_fraction=config.train_group_fraction,
                            train_subsample=config.train_subsample, options=options, dataset=setting.source,
                            model_name=setting.model, split_runs=split_runs)
        split = d.split_json()["per_split"]
        per_split = pd.DataFrame(split).set_index("group").add_prefix("split_").reset_index()
        groups = d.groups.drop(columns=["reasons"]).assign(reasons=[", ".join(r) for r in d.groups["reasons"]])
        return {"groups": groups.merge(per_split, on="group"),
                "mechanism": d.mechanism, "collapsed": d.prediction.collapsed, "seconds": d.seconds,
                "noise_per_weight": d.prediction.noise_per_weight, "epsilon": d.plan.epsilon,
                "most_hurt": d.most_hurt, "split_most_hurt": d.split_most_hurt,
                "recommendations": d.recommendations}

    return cache.get_or_compute(key, compute)


def run_cell(cell: Cell, *, profile: str, cache: RunCache | None = None, progress: bool = False,
             split_runs: SplitRuns | None = None) -> pd.DataFrame:
    """Records of one cell: per seed and group, the prediction beside the actual cost (module docstring).
    ``split_runs``: shared with the same setting's other cells (their splits' trajectories serve every sigma)."""
    cache = cache or RunCache(None)
    prof = profile_settings(profile)
    setting = cell.setting
    full = load_setting(setting)
    config = compare_config(cell, profile, len(full))
    result = run_compare(config, progress=progress, cache=cache)
    per_seed = result.per_seed
    rows = []
    split_runs = split_runs if split_runs is not None else SplitRuns()  # seed s's splits: s, s + 1, s + 2

    for seed in prof.seeds:
        _, test_data = comparison_split(full, seed=seed, test_fraction=config.test_fraction,
                                        train_group_fraction=config.train_group_fraction,
                                        train_subsample=config.train_subsample)
        diagnosis = cell_diagnosis(cell, seed, profile=profile, cache=cache, split_runs=split_runs)
        seed_rows = per_seed[per_seed["seed"] == seed]
        dp = seed_rows[seed_rows["method"] == "dpsgd"].set_index("group")
        sgd = seed_rows[seed_rows["method"] == "sgd"].set_index("group")
        actually_collapsed = _collapsed(dp["accuracy"], test_data)
        verdict, split_verdict = diagnosis["most_hurt"], diagnosis.get("split_most_hurt") or {}
        for g in diagnosis["groups"].itertuples():
            rows.append({
                "setting": setting.name, "source": setting.source, "regime": cell.regime.name, "sigma": cell.sigma,
                "seed": seed, "group": g.group, "n_train": int(g.n), "n_test": int(g.n_eval),
                "predicted": g.cost, "low": g.low, "high": g.high, "half_width": g.uncalibrated_half_width,
                "p_most_hurt": g.p_most_hurt, "split_predicted": g.split_predicted_cost,
                "split_low": g.split_predicted_cost_low, "split_high": g.split_predicted_cost_high,
                "split_p_most_hurt": g.split_p_most_hurt, "too_small": bool(g.too_small),
                # the call's verdict (most_hurt_group): named, or tied with the top (cannot be called)
                "named": g.group == verdict.get("group"),
                "tied": verdict.get("group") is None and g.group in (verdict.get("tied") or ()),
                "split_named": g.group == split_verdict.get("group"),
                "split_tied": split_verdict.get("group") is None and g.group in (split_verdict.get("tied") or ()),
                "clip_part": g.clip_part, "noise_part": g.noise_part, "reasons": g.reasons,
                "predicted_sgd_accuracy": g.acc_nonprivate,
                "actual": float(dp.loc[g.group, "cost"]), "dp_accuracy": float(dp.loc[g.group, "accuracy"]),
                "sgd_accuracy": float(sgd.loc[g.group, "accuracy"]),
                "grad_norm": g.grad_norm, "clip_fraction": g.clip_fraction, "trace": g.trace,
                "boundary": g.boundary, "mechanism": diagnosis["mechanism"],
                "predicted_collapse": diagnosis["collapsed"], "actual_collapse": actually_collapsed,
                "noise_per_weight": diagnosis["noise_per_weight"], "epsilon": diagnosis["epsilon"],
                "diagnosis_seconds": diagnosis["seconds"]})
    return pd.DataFrame(rows)


# ============================================================================ the recommendations against real runs
def option_config(config: CompareConfig, recommendation: dict) -> tuple[CompareConfig, str] | None:
    """The ``dpfair compare`` configuration and method that run one recommendation for real, at the cell's
    settings (``config``): its ``changes`` -- a method (at DP-SGD's epsilon, equal privacy), a clipping bound, a
    batch size with its noise multiplier, a noise multiplier. ``None`` where no registered method runs it (paper
    001's mitigation is an objective of the loop, not a method of ``dpfair compare``)."""
    changes = recommendation["changes"]
    if "method" in changes:
        if changes["method"] not in registry.names():
            return None
        return replace(config, methods=("sgd", changes["method"]), equal_privacy=True), changes["method"]
    option = config
    if "clip_bound" in changes:
        option = replace(option, clip_bound=float(changes["clip_bound"]))
    if "noise_multiplier" in changes:
        option = replace(option, noise_multiplier=float(changes["noise_multiplier"]))
    if "batch_size" in changes:
        option = replace(option, train=replace(option.train, batch_size=int(changes["batch_size"])))
    return option, "dpsgd"


def _worst_and_gap(costs: pd.Series) -> tuple[float, float]:
    """min_k Delta^k and max_k Delta^k - min_k Delta^k of per-group costs (the population row left out)."""
    groups = costs.drop(index=["all", "max_gap"], errors="ignore")
    return float(groups.min()), float(groups.max() - groups.min())


def run_recommendation_cell(cell: Cell, *, profile: str = "recommendations", cache: RunCache | None = None,
                            split_runs: SplitRuns | None = None) -> pd.DataFrame:
    r"""Every recommendation of one cell's diagnoses beside its real runs: one record per (seed, recommendation).

    Predicted (the diagnosis' expectation over its splits): the change of the worst group's cost against the plan,
    :math:`\delta_w = \min_k \Delta^k_{opt} - \min_k \Delta^k_{plan}`, and of the gap. Measured: the same two
    changes on the seed's real runs -- the option run by ``dpfair compare`` (:func:`option_config`) and the planned
    DP-SGD, each against the plan's SGD run (the diagnosis' non-private reference for every option). Records of an
    option no registered method runs have NaN measurements."""
    cache = cache or RunCache(None)
    prof = profile_settings(profile)
    full = load_setting(cell.setting)
    config = compare_config(cell, profile, len(full))
    planned = run_compare(config, progress=False, cache=cache).per_seed
    split_runs = split_runs if split_runs is not None else SplitRuns()
    rows = []
    for seed in prof.seeds:
        diagnosis = cell_diagnosis(cell, seed, profile=profile, cache=cache, split_runs=split_runs)
        runs = planned[planned["seed"] == seed]
        sgd = runs[runs["method"] == "sgd"].set_index("group")["accuracy"]
        plan_worst, plan_gap = _worst_and_gap(runs[runs["method"] == "dpsgd"].set_index("group")["accuracy"] - sgd)
        for rec in diagnosis.get("recommendations") or []:
            run = option_config(config, rec)
            measured_worst = measured_gap = math.nan
            if run is not None:
                option, method = run
                per_seed = run_compare(replace(option, seeds=(seed,)), progress=False, cache=cache).per_seed
                # against the plan's SGD run, as the diagnosis predicts every option (a larger batch's own SGD differs)
                accuracy = per_seed[per_seed["method"] == method].set_index("group")["accuracy"]
                worst, gap = _worst_and_gap(accuracy - sgd)
                measured_worst, measured_gap = worst - plan_worst, gap - plan_gap
            rows.append({"setting": cell.setting.name, "source": cell.setting.source, "regime": cell.regime.name,
                         "sigma": cell.sigma, "seed": seed, "action": rec["action"], "verdict": rec["verdict"],
                         "predicted_worst_change": rec["worst_change"], "predicted_gap_change": rec["gap_change"],
                         "measured_worst_change": measured_worst, "measured_gap_change": measured_gap,
                         "measured": run is not None})
    return pd.DataFrame(rows)


def run_recommendation_check(profile: str = "recommendations", *, cache: RunCache | None = None,
                             progress: bool = True) -> pd.DataFrame:
    """:func:`run_recommendation_cell` over every cell of ``profile`` on its available settings."""
    names = profile_settings(profile).settings
    settings = [s for s in SETTINGS if (names is None or s.name in names) and s.available()]
    frames, stores = [], {}
    for c in tqdm(cells(profile, settings), desc=f"recommendations ({profile})", disable=not progress):
        store = stores.get(c.setting.name) or SplitRuns()
        stores = {c.setting.name: store}
        frames.append(run_recommendation_cell(c, profile=profile, cache=cache, split_runs=store))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _sign(values: pd.Series, tolerance: float) -> pd.Series:
    """+1 / -1 beyond ``tolerance``, 0 within it."""
    return np.sign(values).where(values.abs() >= tolerance, 0.0)


def _per_kind(per_cell: pd.DataFrame, summary) -> pd.DataFrame:
    """``summary(part, action)`` of each recommendation kind's cells, in order, then of all cells (``"all"``)."""
    rows = [summary(part, action) for action, part in per_cell.groupby("action", sort=False)]
    rows.append(summary(per_cell, "all"))
    return pd.DataFrame(rows)


def recommendation_agreement(records: pd.DataFrame, *, tolerance: float = 0.0) -> pd.DataFrame:
    """Per recommendation kind (``action``) and over all: how the predicted worst-group change agrees with the
    measured one, per cell (the changes averaged over seeds).

    Columns: action, cells, sign_agreement (share of cells where the two changes have the same sign, each taken
    as 0 within ``tolerance``), spearman (rank correlation of the two over cells; NaN under 3 cells or a constant
    side), predicted and measured (their means), helped (cells where the real worst group lost less).
    Unmeasured options (:func:`option_config` is None) are left out."""
    measured = records[records["measured"].astype(bool)]
    per_cell = measured.groupby(["action", *CELL], sort=False)[
        ["predicted_worst_change", "measured_worst_change"]].mean().reset_index()

    def summary(part: pd.DataFrame, action: str) -> dict:
        p, m = part["predicted_worst_change"], part["measured_worst_change"]
        same = _sign(p, tolerance) == _sign(m, tolerance)
        rho = float(stats.spearmanr(p, m).statistic) if len(part) >= 3 and np.ptp(p) > 0 and np.ptp(m) > 0 \
            else math.nan
        return {"action": action, "cells": len(part), "sign_agreement": float(same.mean()), "spearman": rho,
                "predicted": float(p.mean()), "measured": float(m.mean()), "helped": int((m > 0).sum())}

    return _per_kind(per_cell, summary)


#: A measured change is *resolved* when its mean over seeds is more than this many standard errors from zero
#: (and beyond :data:`~dpfair_analysis.diagnose.explanation.NEGLIGIBLE`): :func:`resolved_sign`.
RESOLUTION_SE = 2.0
#: A recommendation's outcome in one cell under the resolution rule (:func:`recommendation_outcome`).
OUTCOMES = ("agrees", "wrong", "unresolved")
RESOLUTION_RULE = ("a measured change is resolved when |mean| > 2 standard errors over seeds and > the diagnosis' "
                   "negligible 0.005, a predicted one signed when |change| >= 0.005; agrees: a signed prediction "
                   "with the resolved measured sign, or a negligible prediction with an unresolved measurement; "
                   "wrong: a resolved measurement of the other sign or beside a negligible prediction; "
                   "unresolved: a signed prediction the runs neither confirm nor refute (not an agreement)")


def predicted_sign(change, *, negligible: float = NEGLIGIBLE) -> np.ndarray:
    r"""The predicted change's sign, 0 where it is negligible: :math:`\mathrm{sign}(\delta)` if
    :math:`|\delta| \ge \tau`, else 0 (:math:`\tau` = ``negligible``, the change the diagnosis calls none)."""
    change = np.asarray(change, dtype=float)
    return np.where(np.abs(change) >= negligible, np.sign(change), 0.0)


def resolved_sign(mean, se, *, negligible: float = NEGLIGIBLE, resolution: float = RESOLUTION_SE) -> np.ndarray:
    r"""The measured change's sign where the seeds resolve it, else 0:
    :math:`\mathrm{sign}(\bar m)` if :math:`|\bar m| > k\,\mathrm{se}` and :math:`|\bar m| > \tau`, else 0, with
    :math:`\bar m` the mean over seeds, :math:`\mathrm{se} = s / \sqrt{n}` its standard error, :math:`k` =
    ``resolution``, :math:`\tau` = ``negligible``. An undefined se (one seed) resolves nothing."""
    mean, se = np.asarray(mean, dtype=float), np.asarray(se, dtype=float)
    resolved = (np.abs(mean) > resolution * se) & (np.abs(mean) > negligible)  # False where se is NaN
    return np.where(resolved, np.sign(mean), 0.0)


def recommendation_outcome(predicted: float, measured: float) -> str:
    """One of :data:`OUTCOMES` for a predicted sign (:func:`predicted_sign`) and a resolved measured sign
    (:func:`resolved_sign`; 0 = unresolved): the rule of :data:`RESOLUTION_RULE`."""
    if measured == 0:
        return OUTCOMES[0] if predicted == 0 else OUTCOMES[2]
    return OUTCOMES[0] if predicted == measured else OUTCOMES[1]


def recommendation_cells(records: pd.DataFrame, *, negligible: float = NEGLIGIBLE,
                         resolution: float = RESOLUTION_SE) -> pd.DataFrame:
    r"""Per (kind, cell) of the measured recommendations: the predicted worst-group change (mean over the seeds'
    diagnoses), the measured one's mean :math:`\bar m` over seeds, its standard error :math:`s/\sqrt{n}`
    (``measured_se``; s with ddof 1) and n, the per-seed values (``seeds``, ``measured_per_seed``), the two signs
    (:func:`predicted_sign`, :func:`resolved_sign`) and the outcome (:func:`recommendation_outcome`)."""
    measured = records[records["measured"].astype(bool)]
    grouped = measured.groupby(["action", *CELL], sort=False)
    out = grouped.agg(predicted_worst_change=("predicted_worst_change", "mean"),
                      measured_worst_change=("measured_worst_change", "mean"),
                      measured_sd=("measured_worst_change", "std"), n=("measured_worst_change", "size"),
                      seeds=("seed", list), measured_per_seed=("measured_worst_change", list)).reset_index()
    out["measured_se"] = out.pop("measured_sd") / np.sqrt(out["n"])
    out["predicted_sign"] = predicted_sign(out["predicted_worst_change"], negligible=negligible)
    out["measured_sign"] = resolved_sign(out["measured_worst_change"], out["measured_se"], negligible=negligible,
                                         resolution=resolution)
    out["outcome"] = [recommendation_outcome(p, m) for p, m in zip(out["predicted_sign"], out["measured_sign"])]
    return out


def resolved_agreement(per_cell: pd.DataFrame) -> pd.DataFrame:
    """Per kind and over all, from :func:`recommendation_cells`: resolved (cells whose measured change the seeds
    resolve), resolved_agreement (the share of those with the predicted sign; NaN if none), agreement (the share
    of all cells that agree, :data:`RESOLUTION_RULE`), wrong and unresolved (counts of those outcomes)."""
    def summary(part: pd.DataFrame, action: str) -> dict:
        resolved = part[part["measured_sign"] != 0]
        return {"action": action, "resolved": len(resolved),
                "resolved_agreement": float((resolved["outcome"] == "agrees").mean()) if len(resolved) else math.nan,
                "agreement": float((part["outcome"] == "agrees").mean()),
                "wrong": int((part["outcome"] == "wrong").sum()),
                "unresolved": int((part["outcome"] == "unresolved").sum())}

    return _per_kind(per_cell, summary)


def recommendation_table(records: pd.DataFrame) -> pd.DataFrame:
    """The three rules side by side per kind: plain signs (``sign_agreement``), changes under
    :data:`~dpfair_analysis.diagnose.explanation.NEGLIGIBLE` as none (``sign_agreement_negligible``), and the
    resolution rule (:func:`resolved_agreement`), with the Spearman, mean changes and helped cells of
    :func:`recommendation_agreement`."""
    plain = recommendation_agreement(records)
    negligible = recommendation_agreement(records, tolerance=NEGLIGIBLE)[["action", "sign_agreement"]]
    return (plain.merge(negligible.rename(columns={"sign_agreement": "sign_agreement_negligible"}), on="action")
            .merge(resolved_agreement(recommendation_cells(records)), on="action"))


def recommendation_check_json(records: pd.DataFrame, *, profile: str = "recommendations") -> dict:
    """The recommendation check as a notebook reads it: the profile, the records (one per seed), the agreement per
    kind with plain signs and with changes under the diagnosis'
    :data:`~dpfair_analysis.diagnose.explanation.NEGLIGIBLE` taken as none, the three rules side by side
    (``table``, :func:`recommendation_table`, under ``rule``) and the per-cell means, standard errors, n and
    outcomes (``cells``, :func:`recommendation_cells`)."""
    prof = profile_settings(profile)

    def plain(frame: pd.DataFrame) -> list[dict]:
        return frame.astype(object).where(frame.notna(), None).to_dict("records")

    return {"issue": "51.5", "profile": profile, "seeds": list(prof.seeds), "settings": list(prof.settings or ()),
            "regimes": [asdict(r) for r in prof.regimes], "negligible": NEGLIGIBLE, "resolution_se": RESOLUTION_SE,
            "rule": RESOLUTION_RULE,
            "agreement": plain(recommendation_agreement(records)),
            "agreement_negligible": plain(recommendation_agreement(records, tolerance=NEGLIGIBLE)),
            "table": plain(recommendation_table(records)), "cells": plain(recommendation_cells(records)),
            "records": plain(records)}


def recommendation_check_summary(check: dict) -> str:
    """What the recorded check (:func:`recommendation_check_json`) shows, in words generated from its numbers:
    the cells, the agreement under each rule against the 80% target, Spearman, how many changes the seeds resolve
    and which resolved ones the advice got wrong, and the kinds from best to worst on resolved agreement."""
    table = pd.DataFrame(check["table"]).set_index("action")
    cells = pd.DataFrame(check["cells"])
    total = table.loc["all"]
    kinds = table.drop(index="all")
    n_cells = int(total["cells"])
    resolved, wrong = int(total["resolved"]), int(total["wrong"])
    unresolved = cells[cells["outcome"] == "unresolved"]
    noisy = int((unresolved["regime"] == "noisy").sum())

    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    lines = [f"{n_cells} (kind, cell) pairs over {len(check['seeds'])} seeds, {len(kinds)} kinds of advice "
             f"({', '.join(kinds.index)}); target: sign agreement >= 80%.",
             f"Plain signs agree in {pct(total['sign_agreement'])} of the pairs; with changes under "
             f"{check['negligible']:g} taken as none in {pct(total['sign_agreement_negligible'])}; "
             f"Spearman over all pairs {total['spearman']:+.2f}.",
             f"The seeds resolve {resolved} of the {n_cells} measured changes (|mean| > {check['resolution_se']:g} "
             f"standard errors and > {check['negligible']:g}); on those the advice has the measured sign in "
             f"{resolved - wrong} ({pct(total['resolved_agreement'])}). {len(unresolved)} signed predictions are "
             f"unresolved ({noisy} in the noisy regime), so agreement over all pairs under the resolution rule is "
             f"{pct(total['agreement'])}."]
    for row in cells[cells["outcome"] == "wrong"].itertuples():
        lines.append(f"Wrong on a resolved change: {row.action} on {row.setting}/{row.regime} (predicted "
                     f"{row.predicted_worst_change:+.4f}, measured {row.measured_worst_change:+.3f} ± "
                     f"{row.measured_se:.3f}).")
    ranked = kinds.sort_values(["resolved_agreement", "spearman"], ascending=False)
    lines.append("By kind (agreement on resolved changes, Spearman): " + "; ".join(
        f"{kind} {pct(r.resolved_agreement)} of {int(r.resolved)}, {r.spearman:+.2f}" for kind, r in ranked.iterrows())
        + ".")
    return "\n".join(lines)


@dataclass
class ValidationResult:
    profile: str
    records: pd.DataFrame
    skipped: list[str]
    seconds: float


def run_validation(profile: str = "quick", *, settings: Sequence[ValidationSetting] | None = None,
                   cache: RunCache | None = None, progress: bool = True) -> ValidationResult:
    """Every cell of ``profile`` on the available settings (default: the profile's; the others listed in
    ``skipped``)."""
    start = time.perf_counter()
    if settings is None:
        names = profile_settings(profile).settings
        settings = SETTINGS if names is None else tuple(s for s in SETTINGS if s.name in names)
    available = [s for s in settings if s.available()]
    skipped = [f"{s.name} (data set {s.dataset!r} not installed: dpfair data fetch {s.dataset} --from PATH)"
               for s in settings if not s.available()]
    frames, stores = [], {}
    for c in tqdm(cells(profile, available), desc=f"validation ({profile})", disable=not progress):
        # a setting's cells at every sigma share their splits' trajectories (SplitRuns); one setting's at a time
        store = stores.get(c.setting.name) or SplitRuns()
        stores = {c.setting.name: store}
        frames.append(run_cell(c, profile=profile, cache=cache, split_runs=store))
    records = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return ValidationResult(profile, records, skipped, time.perf_counter() - start)


# ============================================================================ evaluation
CELL = ["setting", "regime", "sigma"]


def naive_scores(records: pd.DataFrame) -> pd.DataFrame:
    """Each naive predictor's hurt score (larger = predicted to lose more), per record."""
    out = pd.DataFrame(index=records.index)
    out["size"] = -records["n_train"].astype(float)
    out["accuracy"] = -records["sgd_accuracy"]
    out["grad_norm"] = records["grad_norm"]
    out["clip_fraction"] = records["clip_fraction"]
    return out


def leave_one_dataset_out(records: pd.DataFrame) -> pd.DataFrame:
    """Calibrated predictions for every record, each from a calibration fitted on the *other* sources only.

    Adds columns calibrated, calibrated_low, calibrated_high and calibration_sources (the
    sources it was fitted on, which never include the record's own: checked by
    :meth:`~dpfair_analysis.diagnose.Calibration.check_applicable`). With one source only,
    nothing can be left out and the columns are NaN. The naive predictors' linear maps are
    fitted the same way (columns ``naive_<name>``, ``naive_<name>_low/_high``).
    """
    out = records.copy()
    for column in ("calibrated", "calibrated_low", "calibrated_high"):
        out[column] = np.nan
    out["calibration_sources"] = ""
    scores = naive_scores(records)
    for name in NAIVE:
        for suffix in ("", "_low", "_high"):
            out[f"naive_{name}{suffix}"] = np.nan
    fit_frame = records.assign(dataset=records["source"])
    for source in sorted(records["source"].unique()):
        held = records["source"] == source
        others = fit_frame[~held]
        if others.empty:
            continue
        calibration = fit_calibration(others)
        calibration.check_applicable(source)
        pred = calibration.clip_scale * records.loc[held, "clip_part"] + calibration.noise_scale * records.loc[
            held, "noise_part"]
        half = calibration.widen * records.loc[held, "half_width"]
        out.loc[held, "calibrated"] = pred
        out.loc[held, "calibrated_low"] = pred - half
        out.loc[held, "calibrated_high"] = pred + half
        out.loc[held, "calibration_sources"] = ",".join(calibration.datasets)
        for name in NAIVE:
            x, y = scores.loc[~held, name].to_numpy(), records.loc[~held, "actual"].to_numpy()
            slope, intercept = np.polyfit(x, y, 1) if np.ptp(x) > 0 else (0.0, float(np.mean(y)))
            resid = float(np.std(y - (slope * x + intercept), ddof=2)) if len(y) > 2 else float("nan")
            p = slope * scores.loc[held, name] + intercept
            out.loc[held, f"naive_{name}"] = p
            out.loc[held, f"naive_{name}_low"] = p - 1.645 * resid
            out.loc[held, f"naive_{name}_high"] = p + 1.645 * resid
    return out


def cell_summary(records: pd.DataFrame) -> pd.DataFrame:
    """Per cell and group: mean and sd over seeds of actual and predicted costs and of the naive scores."""
    scores = naive_scores(records).add_prefix("score_")
    frame = pd.concat([records, scores], axis=1)
    named = {"actual_mean": ("actual", "mean"), "actual_std": ("actual", "std"), "actual_count": ("actual", "count"),
             "predicted": ("predicted", "mean"), "low": ("low", "mean"), "high": ("high", "mean"),
             "clip_part": ("clip_part", "mean"), "noise_part": ("noise_part", "mean"), "n_test": ("n_test", "first"),
             "actual_collapse": ("actual_collapse", "mean"), "predicted_collapse": ("predicted_collapse", "mean"),
             "mechanism": ("mechanism", "first")}
    named |= {f"score_{n}": (f"score_{n}", "mean") for n in NAIVE}
    if "calibrated" in frame.columns:
        named["calibrated"] = ("calibrated", "mean")
    if "split_predicted" in frame.columns:
        named["split_predicted"] = ("split_predicted", "mean")
    table = frame.groupby(CELL + ["group"], sort=False).agg(**named)
    return table.reset_index()


def _most_hurt_callable(cell: pd.DataFrame) -> bool:
    ordered = cell.sort_values("actual_mean")
    if len(ordered) < 2:
        return False
    a, b = ordered.iloc[0], ordered.iloc[1]
    se = math.sqrt((a["actual_std"] ** 2 + b["actual_std"] ** 2) / max(a["actual_count"], 1))
    gap = b["actual_mean"] - a["actual_mean"]
    return bool(gap > 1.96 * se) if np.isfinite(se) and se > 0 else bool(gap > 0)


def per_cell_metrics(records: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: Spearman and most-hurt hit of the diagnosis and of each naive predictor."""
    summary = cell_summary(records)
    rows = []
    for key, cell in summary.groupby(CELL, sort=False):
        actual = cell["actual_mean"].to_numpy()
        row = dict(zip(CELL, key), groups=len(cell), callable=_most_hurt_callable(cell),
                   chance=1.0 / len(cell), actual_collapse=bool(cell["actual_collapse"].mean() > 0.5),
                   predicted_collapse=bool(cell["predicted_collapse"].mean() > 0.5),
                   mechanism=cell["mechanism"].iloc[0], most_hurt=cell["group"].iloc[int(np.argmin(actual))],
                   gap=float(np.sort(actual)[1] - np.sort(actual)[0]) if len(actual) > 1 else np.nan)
        predictors = {"diagnosis": -cell["predicted"].to_numpy()}
        if "split_predicted" in cell.columns and cell["split_predicted"].notna().all():
            predictors["per_split"] = -cell["split_predicted"].to_numpy()
        if "calibrated" in cell.columns and cell["calibrated"].notna().all():
            predictors["calibrated"] = -cell["calibrated"].to_numpy()
        predictors |= {n: cell[f"score_{n}"].to_numpy() for n in NAIVE}
        for name, hurt in predictors.items():
            if np.ptp(actual) == 0 or np.ptp(hurt) == 0:
                rho = np.nan
            else:
                rho = float(stats.spearmanr(-hurt, actual).statistic)
            row[f"spearman_{name}"] = rho
            row[f"hit_{name}"] = bool(np.argmax(hurt) == np.argmin(actual))
        if "named" in records.columns:
            calls = records[(records[CELL].apply(tuple, axis=1) == tuple(key))]
            named = calls[calls["named"].astype(bool)]
            seeds = calls["seed"].nunique()
            row["named_share"] = named["seed"].nunique() / seeds if seeds else np.nan
            row["named_hit"] = float((named["group"] == row["most_hurt"]).sum() / seeds) if seeds else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def coverage(records: pd.DataFrame) -> dict[str, float]:
    """Share of (cell, seed, group) records whose actual cost lies in each predictor's 90% interval."""
    out = {"diagnosis": float(((records["actual"] >= records["low"]) & (records["actual"] <= records["high"])).mean())}
    if "split_low" in records.columns and records["split_low"].notna().any():
        r = records[records["split_low"].notna()]
        out["per_split"] = float(((r["actual"] >= r["split_low"]) & (r["actual"] <= r["split_high"])).mean())
    if "calibrated_low" in records.columns and records["calibrated_low"].notna().any():
        ok = records["calibrated_low"].notna()
        r = records[ok]
        out["calibrated"] = float(((r["actual"] >= r["calibrated_low"]) & (r["actual"] <= r["calibrated_high"])).mean())
        for name in NAIVE:
            out[name] = float(((r["actual"] >= r[f"naive_{name}_low"]) & (r["actual"] <= r[f"naive_{name}_high"])).mean())
    return out


def evaluate(records: pd.DataFrame, *, by: str | None = None) -> pd.DataFrame:
    """The issue's validation table: one row per predictor (the diagnosis, calibrated, each naive one).

    Columns: predictor, description, spearman (mean over cells with a defined rank correlation),
    most_hurt (share of cells where the most-hurt group is named by the mean predicted cost over seeds),
    most_hurt_callable (the same over the callable cells), most_hurt_named and named_share (the diagnosis only:
    the share of one call per seed that names the cell's most-hurt group by its verdict, P(most hurt)'s rule,
    a tied call counting as a miss; and the share of calls that name a group at all), coverage (of the 90%
    intervals), mae (mean |predicted - actual|
    over records, for predictors in cost units), cells, callable_cells, chance. ``by`` (e.g.
    ``"regime"`` or ``"setting"``) gives the table per value of that column.
    """
    if by is not None:
        return pd.concat([evaluate(part).assign(**{by: value}) for value, part in records.groupby(by, sort=False)],
                         ignore_index=True)
    with_lodo = leave_one_dataset_out(records) if records["source"].nunique() > 1 else records
    metrics = per_cell_metrics(with_lodo)
    cover = coverage(with_lodo)
    names = (["diagnosis"] + (["per_split"] if "spearman_per_split" in metrics.columns else [])
             + (["calibrated"] if "spearman_calibrated" in metrics.columns else []) + list(NAIVE))
    rows = []
    callable_cells = metrics[metrics["callable"]]
    widths = interval_widths(with_lodo)
    columns = {"diagnosis": "predicted", "per_split": "split_predicted", "calibrated": "calibrated"}
    for name in names:
        column = columns.get(name, f"naive_{name}")
        mae = float((with_lodo[column] - with_lodo["actual"]).abs().mean()) if column in with_lodo.columns else np.nan
        rows.append({"predictor": name,
                     "description": {"diagnosis": "dpfair diagnose (uncalibrated), expectation over splits",
                                     "per_split": "dpfair diagnose (uncalibrated), per split",
                                     "calibrated": "dpfair diagnose, calibrated leave-one-data-set-out"}.get(
                                         name, NAIVE_DESCRIPTION.get(name, name)),
                     "spearman": float(metrics[f"spearman_{name}"].mean()),
                     "most_hurt": float(metrics[f"hit_{name}"].mean()),
                     "most_hurt_callable": float(callable_cells[f"hit_{name}"].mean()) if len(callable_cells)
                     else np.nan,
                     "most_hurt_named": (float(metrics["named_hit"].mean())
                                         if name == "diagnosis" and "named_hit" in metrics.columns else np.nan),
                     "named_share": (float(metrics["named_share"].mean())
                                     if name == "diagnosis" and "named_share" in metrics.columns else np.nan),
                     "coverage": cover.get(name, np.nan), "mae": mae,
                     "width_to_spread": widths.get(name, {}).get("width_to_spread", np.nan),
                     "width_to_seed_spread": widths.get(name, {}).get("width_to_seed_spread", np.nan),
                     "cells": len(metrics), "callable_cells": len(callable_cells),
                     "chance": float(metrics["chance"].mean())})
    return pd.DataFrame(rows)


def interval_widths(records: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Mean 90% interval width over a cell's records divided by (a) the spread of the groups' measured costs in
    the cell (max - min over groups of the mean over seeds: what an interval must beat to separate groups) and
    (b) each group's seed spread (2 x 1.645 x its sd over seeds: an interval's width if it knew the truth's
    distribution), averaged over cells; per predictor with an interval."""
    pairs = {"diagnosis": ("low", "high"), "per_split": ("split_low", "split_high"),
             "calibrated": ("calibrated_low", "calibrated_high")}
    out = {}
    for name, (low, high) in pairs.items():
        if low not in records.columns or records[low].isna().all():
            continue
        frame = records.assign(width=records[high] - records[low])
        ratios, seed_ratios = [], []
        for _, cell in frame.groupby(CELL, sort=False):
            per_group = cell.groupby("group").agg(width=("width", "mean"), actual=("actual", "mean"),
                                                  sd=("actual", "std"))
            spread = float(per_group["actual"].max() - per_group["actual"].min())
            if spread > 0:
                ratios.append(float(per_group["width"].mean()) / spread)
            seed = 2 * 1.645 * per_group["sd"]
            ok = seed > 0
            if ok.any():
                seed_ratios.append(float((per_group["width"][ok] / seed[ok]).mean()))
        out[name] = {"width_to_spread": float(np.mean(ratios)) if ratios else np.nan,
                     "width_to_seed_spread": float(np.mean(seed_ratios)) if seed_ratios else np.nan}
    return out


def most_hurt_calibration(records: pd.DataFrame, *, column: str = "p_most_hurt",
                          bins: Sequence[float] = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0)) -> pd.DataFrame:
    """Calibration of the predicted probability that a group is the most hurt in a run: per bin of the
    prediction, the mean predicted probability beside the share of (cell, seed, group) records whose group
    was the most hurt in that seed's run, with counts and the Brier score of all records (column brier)."""
    r = records[records[column].notna()].copy()
    worst = r.loc[r.groupby(CELL + ["seed"])["actual"].idxmin(), ["setting", "regime", "sigma", "seed", "group"]]
    worst = worst.assign(was_most_hurt=True)
    r = r.merge(worst, on=CELL + ["seed", "group"], how="left")
    r["was_most_hurt"] = r["was_most_hurt"].fillna(False).astype(float)
    r["bin"] = pd.cut(r[column], bins=list(bins), include_lowest=True)
    table = r.groupby("bin", observed=True).agg(predicted=(column, "mean"), observed=("was_most_hurt", "mean"),
                                                records=(column, "size")).reset_index()
    table["bin"] = table["bin"].astype(str)
    table["brier"] = float(((r[column] - r["was_most_hurt"]) ** 2).mean())
    return table


def _verdict(call: pd.DataFrame, *, prefix: str = "") -> tuple[str | None, str, float]:
    """(named group or None, what the call says, the top's P(most hurt)) of one call's records: its verdict
    (columns ``named``/``tied``, or ``split_named``/``split_tied`` with ``prefix="split_"``, from
    :func:`~dpfair_analysis.diagnose.explanation.most_hurt_group`); records without them (recorded before the
    verdict had them): the group of the highest P(most hurt), the same rule without its ties."""
    p = call[f"{prefix}p_most_hurt"]
    top = call.loc[p.idxmax()]
    if f"{prefix}named" not in call.columns:
        return str(top["group"]), str(top["group"]), float(top[f"{prefix}p_most_hurt"])
    named = call[call[f"{prefix}named"].astype(bool)]
    if len(named):
        return str(named["group"].iloc[0]), str(named["group"].iloc[0]), float(named[f"{prefix}p_most_hurt"].iloc[0])
    tied = call[call[f"{prefix}tied"].astype(bool)].sort_values(f"{prefix}p_most_hurt", ascending=False)
    if len(tied):
        return None, "cannot be called: " + ", ".join(map(str, tied["group"])), float(top[f"{prefix}p_most_hurt"])
    return None, "no group hurt", float(top[f"{prefix}p_most_hurt"])


def single_call_vs_expectation(records: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Per cell: the most-hurt verdict of one call at ``seed`` in expectation mode and in per-split mode (the
    group it names, or that it cannot be called and between which groups: the rule of
    :func:`~dpfair_analysis.diagnose.explanation.most_hurt_call`), the top's P(most hurt) in each, beside the
    most-hurt group of the mean actual cost over seeds and whether the cell is callable; ``differ`` marks the
    cells where the two modes' verdicts differ; a call that names no group is never right."""
    summary = cell_summary(records)
    rows = []
    for key, cell in summary.groupby(CELL, sort=False):
        one = records[(records[CELL].apply(tuple, axis=1) == key) & (records["seed"] == seed)]
        if one.empty:
            continue
        expected, expected_says, expected_p = _verdict(one)
        split, split_says, split_p = _verdict(one, prefix="split_")
        actual = cell.loc[cell["actual_mean"].idxmin(), "group"]
        actual_seed = one.loc[one["actual"].idxmin(), "group"]
        rows.append(dict(zip(CELL, key), callable=_most_hurt_callable(cell), actual_most_hurt=actual,
                         actual_most_hurt_this_seed=actual_seed,
                         expectation_names=expected_says, expectation_p=expected_p,
                         per_split_names=split_says, per_split_p=split_p,
                         expectation_right=expected == actual, per_split_right=split == actual,
                         differ=expected_says != split_says))
    return pd.DataFrame(rows)


def where_it_loses(records: pd.DataFrame) -> pd.DataFrame:
    """Per setting and regime: the diagnosis' Spearman and most-hurt hit rate beside the best naive predictor's."""
    with_lodo = leave_one_dataset_out(records) if records["source"].nunique() > 1 else records
    metrics = per_cell_metrics(with_lodo)
    rows = []
    for (setting, regime), part in metrics.groupby(["setting", "regime"], sort=False):
        naive = {n: (part[f"spearman_{n}"].mean(), part[f"hit_{n}"].mean()) for n in NAIVE}
        best = max(naive, key=lambda n: (np.nan_to_num(naive[n][1], nan=-1), np.nan_to_num(naive[n][0], nan=-2)))
        ours = (part["spearman_diagnosis"].mean(), part["hit_diagnosis"].mean())
        rows.append({"setting": setting, "regime": regime, "cells": len(part),
                     "callable": int(part["callable"].sum()), "mechanism": part["mechanism"].mode().iloc[0],
                     "actual_collapse": int(part["actual_collapse"].sum()),
                     "predicted_collapse": int(part["predicted_collapse"].sum()),
                     "spearman_diagnosis": ours[0], "hit_diagnosis": ours[1], "best_naive": best,
                     "spearman_best_naive": naive[best][0], "hit_best_naive": naive[best][1],
                     "diagnosis_loses": bool(ours[1] < naive[best][1] or (
                         ours[1] == naive[best][1] and np.nan_to_num(ours[0], nan=-2) < np.nan_to_num(naive[best][0],
                                                                                                   nan=-2)))})
    return pd.DataFrame(rows)


def collapse_table(records: pd.DataFrame) -> pd.DataFrame:
    """Cells where DP-SGD actually collapsed to a constant classifier (in a majority of seeds) or was predicted to."""
    metrics = per_cell_metrics(records)
    return metrics[metrics["actual_collapse"] | metrics["predicted_collapse"]][
        CELL + ["actual_collapse", "predicted_collapse", "most_hurt"]].reset_index(drop=True)


# ============================================================================ cost
def measure_cost(setting: ValidationSetting, regime: Regime, sigma: float, *, profile: str = "full", seed: int = 0,
                 repeats: int = 3, options: DiagnosisOptions | None = None) -> dict:
    """Seconds of one diagnosis (``dpfair diagnose``'s default: the expectation over :data:`SPLITS` splits, with
    and without its recommendations; and one split's, with them) and of one DP-SGD
    training run at the same settings on the same rows, in this process, interleaved: after a warm-up of each
    (imports, first calls, the accountant's memo -- both sides have one), ``repeats`` rounds of (diagnosis,
    diagnosis with recommendations, training); medians and their ratios, in wall time (``ratio...``) and in
    the process's CPU time (``cpu_ratio...``: on a machine shared with other work, wall time measures the
    scheduler as much as the code; both sides run single-threaded)."""
    prof = profile_settings(profile)
    full = load_setting(setting)
    cell = Cell(setting, regime, sigma)
    config = compare_config(cell, profile, len(full))
    train_data, test_data = comparison_split(full, seed=seed, train_group_fraction=config.train_group_fraction,
                                             train_subsample=config.train_subsample)
    base = options or prof.options     # split s is predicted with seed base.seed + s

    def model():
        return build_model(setting.model, input_shape=tuple(train_data.X.shape[1:]), n_classes=train_data.n_classes,
                           seed=seed, l2=prof.l2)

    plan = plan_for(cell)

    def expectation(recommendations: bool):
        return diagnose_splits(full, lambda s: model(), plan, splits=SPLITS, seed=seed,
                               test_fraction=config.test_fraction, train_group_fraction=config.train_group_fraction,
                               train_subsample=config.train_subsample,
                               options=replace(base, recommendations=recommendations))

    jobs = {
        "diagnosis": lambda: expectation(False),
        "diagnosis_with_recommendations": lambda: expectation(True),
        "per_split_with_recommendations": lambda: diagnose(train_data, test_data, model(), plan,
                                                           options=replace(base, recommendations=True),
                                                           split_seeds=(seed,)),
        "dp_training": lambda: train(model(), train_data, make_policy("dpsgd", clip_bound=regime.clip_bound,
                                                                      noise_multiplier=sigma),
                                     replace(config.train, seed=seed), test_data=test_data, progress=False),
    }
    for job in jobs.values():  # warm-up
        job()
    timings = {name: [] for name in jobs}
    cpu = {name: [] for name in jobs}
    for _ in range(repeats):
        for name, job in jobs.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            job()
            timings[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    out = {k: float(np.median(v)) for k, v in timings.items()}
    out |= {f"{k}_cpu": float(np.median(v)) for k, v in cpu.items()}
    out["ratio"] = out["diagnosis"] / out["dp_training"]
    out["ratio_with_recommendations"] = out["diagnosis_with_recommendations"] / out["dp_training"]
    out["cpu_ratio"] = out["diagnosis_cpu"] / out["dp_training_cpu"]
    out["cpu_ratio_with_recommendations"] = out["diagnosis_with_recommendations_cpu"] / out["dp_training_cpu"]
    out["cpu_ratio_per_split_with_recommendations"] = (out["per_split_with_recommendations_cpu"]
                                                       / out["dp_training_cpu"])
    out["splits"] = SPLITS
    out |= {"setting": setting.name, "regime": regime.name, "sigma": sigma, "n_train": len(train_data),
            "steps": int(math.ceil(regime.epochs * len(train_data) / regime.batch_size)), "repeats": repeats}
    return out


def full_study_command() -> str:
    """The command that runs the full validation study (resumable: every run and diagnosis is cached)."""
    return ("make diagnose-study     # = .venv/bin/python notebooks/execute.py diagnose --in-place --profile full\n"
            "# or without the notebook (records only):\n"
            ".venv/bin/python -c \"from dpfair_analysis.experiments.diagnosis_validation import run_validation; "
            "run_validation('full').records.to_csv('diagnose_full_records.csv', index=False)\"")


def time_cell(cell: Cell, *, profile: str = "full", cache_dir=None) -> dict:
    """Wall time of one cell (its SGD and DP-SGD runs for every seed and its diagnoses) with an empty cache
    (a temporary directory unless ``cache_dir``): the unit the full study is made of."""
    with tempfile.TemporaryDirectory() as tmp:
        cache = RunCache(cache_dir or tmp)
        start = time.perf_counter()
        frame = run_cell(cell, profile=profile, cache=cache)
        seconds = time.perf_counter() - start
    return {"cell": cell.label, "profile": profile, "seconds": seconds, "records": len(frame),
            "runs": cache.misses, "diagnosis_seconds": float(frame["diagnosis_seconds"].sum())}
