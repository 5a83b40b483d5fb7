"""The entry points: :func:`diagnose` runs the plan, the problem, the trajectories, the prediction, the
explanation and the recommendations on one split; :func:`diagnose_splits` predicts the expectation over
several splits of a data set (what a user of ``dpfair compare --seeds`` sees on average);
:class:`Diagnosis` is what they found.

**Expectation over splits** (:func:`diagnose_splits`, what ``dpfair diagnose`` runs by default). One
split's prediction is what a run on *that* split will show: a group's cost is a mean over its few evaluation
rows, and which rows those are moves it (one study cell named the other group for seed 0's split than for
the average over five). What a user of ``dpfair compare --seeds`` sees on average is the expectation over
random splits: :func:`diagnose_splits` predicts S splits (default :data:`SPLITS`; the seeds s, s + 1, ...,
as ``compare`` draws them), each on its own trajectories and its own test rows, and pools them: each
group's cost is the mean over the splits, its 90% interval is for a run on a random split,
+- 1.645 w sqrt(mean_s Var_s + max(0, Var_s(cost_s) - V_rows)), V_rows = mean_s v_k,s / n_k,s (a split's
spread, step 4 of :mod:`.prediction`, whose v_k / n_k is already the test rows' share of the variance over
splits; and the rest of the predicted costs' variance over splits: the training rows'), and its chance to
be the most hurt is counted over every split's draws. The most-hurt verdict is that probability's: the group
with the highest P(most hurt), or none when groups are tied with it within the Monte Carlo and split
uncertainty of the top's lead (:func:`.explanation.most_hurt_call`, the rule; its split blocks are the
splits' draws, :attr:`.prediction.Prediction.sample_blocks`); the rank is the order of the mean costs, and the
two can differ. The theory's quantities come from the first split, and its own prediction and verdict are
kept (:attr:`Diagnosis.split_prediction`, :attr:`Diagnosis.split_most_hurt`). :func:`diagnose` predicts one given split
("per-split"). The JSON's ``split`` block and settings say which (``split_mode``, ``splits``, ``split_seeds``).

(Pooling a split's training rows into its evaluation rows -- an expectation from one trajectory -- was
tried and dropped: the models fit the rows they were trained on, and on the study's data sets it moved the
predicted costs away from the seed-averaged actual ones, 0.009 mean absolute error against 0.004 for the
average of per-split predictions at the defaults.)
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from dpfair_analysis.data.dataset import GroupedDataset, comparison_split
from dpfair_analysis.diagnose.dynamics import EULER_STIFFNESS, TrajectoryCache, covariance
from dpfair_analysis.diagnose.explanation import (
    dominant_mechanism,
    explain,
    most_hurt_group,
    most_hurt_probabilities,
    number_or_none,
    privacy_spend_prediction,
    reasons_for,
    theory_quantities,
)
from dpfair_analysis.diagnose.mechanisms import Mechanism, mechanism_for
from dpfair_analysis.diagnose.plan import MIN_TRAIN_ROWS, Calibration, DiagnosisOptions, PrivacyPlan, ResolvedPlan
from dpfair_analysis.diagnose.prediction import (
    MIN_GROUP_ROWS,
    Z90,
    Prediction,
    Reference,
    outcome,
    predict,
    split_mean,
)
from dpfair_analysis.diagnose.problem import Problem, largest_curvature, stratified
from dpfair_analysis.diagnose.recommendations import RecommendationSplit, recommendations
from dpfair_analysis.validation import check_positive_int

#: Splits :func:`diagnose_splits` (and ``dpfair diagnose``) averages over by default.
SPLITS = 3

#: Keys of each group in the JSON (the issue's schema, exactly).
GROUP_KEYS = ("group", "n", "predicted_cost", "predicted_cost_low", "predicted_cost_high", "p_most_hurt", "rank",
              "reasons", "clip_fraction", "clip_bias", "noise_term", "clip_direction", "clip_magnitude", "trace",
              "boundary")
JSON_KEYS = ("groups", "most_hurt", "privacy_spend", "split", "settings", "epsilon", "delta", "recommendations")


@dataclass
class Diagnosis:
    """What :func:`diagnose` found; :meth:`to_json`, :func:`format_diagnosis`, :func:`report_html` show it."""

    dataset: str
    plan: ResolvedPlan
    groups: pd.DataFrame             # one row per group: prediction + theory quantities + rank + reasons
    prediction: Prediction
    mechanism: str                   # which mechanism dominates: clipping | noise | both | neither
    most_hurt: dict
    recommendations: list[dict]
    model: str
    seconds: float = 0.0
    calibration: Calibration = field(default_factory=Calibration)
    notes: list[str] = field(default_factory=list)
    data_info: dict = field(default_factory=dict)
    split_mode: str = "per-split"    # or "expectation" (over split_seeds)
    split_seeds: tuple[int, ...] = ()
    split_prediction: Prediction | None = None   # expectation mode: the first split's own prediction
    split_most_hurt: dict | None = None          # expectation mode: the first split's own verdict

    def settings(self) -> dict:
        p = self.prediction
        return {**self.plan.as_dict(), "dataset": self.dataset, "model": self.model,
                "mechanism": self.mechanism, "collapse_predicted": p.collapsed,
                "collapse_label": p.collapse_label,
                "noise_per_weight": p.noise_per_weight, "sampling_noise_per_weight": p.sampling_per_weight,
                "weight_scale": p.weight_scale, "integration_steps": p.integration_steps,
                "split_mode": self.split_mode, "splits": max(len(self.split_seeds), 1),
                "split_seeds": list(self.split_seeds),
                "calibration": asdict(self.calibration), "seconds": self.seconds, "data": dict(self.data_info)}

    def to_json(self) -> dict:
        """The issue's schema: groups (exactly :data:`GROUP_KEYS` each), most_hurt, privacy_spend (which group is
        predicted to spend more privacy per record: :attr:`privacy_spend`), settings, epsilon, delta,
        recommendations."""
        columns = {"predicted_cost": "cost", "predicted_cost_low": "low", "predicted_cost_high": "high",
                   "clip_fraction": "clip_fraction", "clip_bias": "clip_bias", "noise_term": "noise_term",
                   "clip_direction": "clip_direction", "clip_magnitude": "clip_magnitude",
                   "trace": "trace", "boundary": "boundary", "p_most_hurt": "p_most_hurt"}
        groups = []
        for row in self.groups.to_dict("records"):
            numbers = {key: number_or_none(row[column]) for key, column in columns.items()}
            groups.append({key: numbers[key] if key in numbers else None for key in GROUP_KEYS}
                          | {"group": str(row["group"]), "n": int(row["n"]), "rank": int(row["rank"]),
                             "reasons": list(row["reasons"])})
        return {"groups": groups, "most_hurt": self.most_hurt, "privacy_spend": self.privacy_spend,
                "split": self.split_json(), "settings": self.settings(),
                "epsilon": number_or_none(self.plan.epsilon), "delta": self.plan.plan.delta,
                "recommendations": self.recommendations}

    @property
    def privacy_spend(self) -> dict:
        """Which group is predicted to spend more privacy per record, from the shares clipped at C
        (:func:`.explanation.privacy_spend_prediction`; the explanation's line is its sentence)."""
        return privacy_spend_prediction(self.groups, method=self.plan.plan.method)

    def split_json(self) -> dict:
        """Which split the costs are for: ``mode`` (expectation | per-split), ``splits``, ``seeds``, and in
        expectation mode ``per_split``, the first split's own prediction per group (cost, interval,
        p_most_hurt) -- what one run on that split is predicted to show -- and ``most_hurt``, its own verdict
        by the same rule (:func:`.explanation.most_hurt_group`: group, callable, tied)."""
        out = {"mode": self.split_mode, "splits": max(len(self.split_seeds), 1), "seeds": list(self.split_seeds),
               "per_split": None}
        if self.split_prediction is not None:
            table = self.split_prediction.table
            chance = most_hurt_probabilities(self.split_prediction.samples, list(table["group"]))
            out["per_split"] = [{"group": str(row["group"]), "predicted_cost": number_or_none(row["cost"]),
                                 "predicted_cost_low": number_or_none(row["low"]),
                                 "predicted_cost_high": number_or_none(row["high"]),
                                 "p_most_hurt": number_or_none(chance[row["group"]])}
                                for row in table.to_dict("records")]
            if self.split_most_hurt is not None:
                out["most_hurt"] = {key: self.split_most_hurt[key] for key in ("group", "callable", "tied")}
        return out

    def explanation(self) -> list[str]:
        """Plain sentences: the regime, the verdict, and why per group (:func:`.explanation.explain`)."""
        return explain(self)


def diagnose(train: GroupedDataset, evaluation: GroupedDataset, model: nn.Module, plan: PrivacyPlan, *,
             options: DiagnosisOptions = DiagnosisOptions(), calibration: Calibration = Calibration(),
             dataset: str | None = None, model_name: str | None = None,
             more_splits: Sequence[tuple[GroupedDataset, GroupedDataset, nn.Module]] = (),
             split_seeds: Sequence[int] = ()) -> Diagnosis:
    """Predict each group's cost of privacy Delta^k under ``plan``, with an interval, a ranking and reasons.

    Parameters
    ----------
    train : GroupedDataset
        The rows the private run would train on.
    evaluation : GroupedDataset
        The rows the costs are measured on (e.g. the test split of ``dpfair compare``).
    model : nn.Module
        The model at its initial weights (both runs start there; a trained model gives a
        fine-tuning diagnosis). Its ``l2`` attribute is the L2 weight. Not modified.
    plan : PrivacyPlan
        The planned private run.
    options : DiagnosisOptions
        How much work to do. The split of seed s (``split_seeds``) is predicted (its rows and draws) with the
        seed ``options.seed + s``: a split's prediction is the same whichever diagnosis it is part of.
    calibration : Calibration
        Default: none. One fitted on other data sets (refused if fitted on ``dataset``).
    dataset, model_name : str, optional
        Names for the report (``dataset`` defaults to ``train.name``).
    more_splits : sequence of (train, evaluation, model)
        Other splits of the same data, pooled into the expectation over splits (module
        docstring); usually given by :func:`diagnose_splits`. Without: this split alone.
    split_seeds : sequence of int
        The seeds the splits were drawn with (reported), one per split; none: 0, 1, ...

    Returns
    -------
    Diagnosis
    """
    start = time.perf_counter()
    splits = [(train, evaluation, model), *more_splits]
    seeds = [int(s) for s in split_seeds] or list(range(len(splits)))
    if len(seeds) != len(splits):
        raise ValueError(f"split_seeds has {len(seeds)} seeds for {len(splits)} splits: give one per split or none")
    runs = []
    for (t, e, m), seed in zip(splits, seeds):
        split_options = replace(options, seed=options.seed + seed)
        runs.append(_SplitRun(_SplitBase(t, e, m, plan, split_options), plan, split_options, calibration))
    return _diagnosis(runs, seeds, plan, options=options, calibration=calibration, dataset=dataset or train.name,
                      model_name=model_name or type(model).__name__, start=start)


def diagnose_splits(data: GroupedDataset, model: Callable[[int], nn.Module], plan: PrivacyPlan, *,
                    splits: int = SPLITS, seed: int = 0, test_fraction: float = 0.2,
                    train_group_fraction: dict | None = None, train_subsample: float = 1.0,
                    options: DiagnosisOptions = DiagnosisOptions(), calibration: Calibration = Calibration(),
                    dataset: str | None = None, model_name: str | None = None,
                    split_runs: SplitRuns | None = None) -> Diagnosis:
    """The expectation over ``splits`` splits of ``data`` (seeds ``seed``, ``seed + 1``, ...; module docstring;
    ``splits=1``: seed ``seed``'s split alone, as :func:`diagnose`).

    Parameters
    ----------
    data : GroupedDataset
        The whole data set; each split is :func:`~dpfair_analysis.data.dataset.comparison_split` of it
        with the split's seed, exactly as ``dpfair compare`` draws its seeds' rows.
    model : callable
        ``model(seed)``: the model at its initial weights for a split's seed (as ``compare`` seeds it).
    plan : PrivacyPlan
        The planned private run.
    splits : int
        How many splits (1: the per-split prediction of seed ``seed``'s split).
    seed : int
        The first split's seed.
    test_fraction, train_group_fraction, train_subsample
        As :func:`~dpfair_analysis.data.dataset.comparison_split`.
    options, calibration, dataset, model_name
        As :func:`diagnose` (split s is predicted with the seed ``options.seed + s``).
    split_runs : SplitRuns, optional
        The splits already predicted, shared by calls whose splits overlap (seeds s and s + 1 with 3 splits
        have 2 in common): each split is predicted once, and the diagnosis is the one it would be without.

    Returns
    -------
    Diagnosis
    """
    start = time.perf_counter()
    splits = check_positive_int(splits, "splits")
    seeds = [seed + s for s in range(splits)]
    store = split_runs if split_runs is not None else SplitRuns()
    source = (id(data), float(test_fraction), repr(train_group_fraction), float(train_subsample))
    runs = []
    for s in seeds:
        split_options = replace(options, seed=options.seed + s)
        train, evaluation, split_model = store.split((source, s), lambda s=s: (*comparison_split(
            data, seed=s, test_fraction=test_fraction, train_group_fraction=train_group_fraction,
            train_subsample=train_subsample), model(s)), keep=data)
        base = store.base((source, s, split_options, _SplitBase.key(plan, len(train))),
                          lambda: _SplitBase(train, evaluation, split_model, plan, split_options))
        runs.append(store.run((id(base), repr(plan), repr(calibration)),
                              lambda: _SplitRun(base, plan, split_options, calibration)))
    return _diagnosis(runs, seeds, plan, options=options, calibration=calibration, dataset=dataset or data.name,
                      model_name=model_name or type(runs[0].base.model).__name__, start=start)


class SplitRuns:
    """Splits, their bases (:class:`_SplitBase`: the problem, the trajectories, the non-private reference) and
    their predictions, kept by what each depends on (the data's identity and the split's seed and settings; the
    options and the plan's T, r, b; the whole plan and the calibration): pass one to :func:`diagnose_splits`
    calls on the same data with the same ``model`` function whose splits overlap (seeds s and s + 1 with 3
    splits share 2) or whose plans differ in sigma alone, and each split is split, integrated and predicted once.
    """

    def __init__(self) -> None:
        self._splits: dict[tuple, tuple] = {}
        self._bases: dict[tuple, _SplitBase] = {}
        self._runs: dict[tuple, _SplitRun] = {}
        self._kept: list = []          # the data sets whose id() is in a key stay alive while the store does
        self.made = 0                  # predictions made
        self.bases_made = 0

    def split(self, key: tuple, make: Callable[[], tuple], *, keep: object) -> tuple:
        """(train, evaluation, model) of ``key`` (``keep``: the object whose id() the key holds)."""
        if key not in self._splits:
            self._splits[key] = make()
            if not any(k is keep for k in self._kept):
                self._kept.append(keep)
        return self._splits[key]

    def base(self, key: tuple, make: Callable[[], _SplitBase]) -> _SplitBase:
        if key not in self._bases:
            self._bases[key] = make()
            self.bases_made += 1
        return self._bases[key]

    def run(self, key: tuple, make: Callable[[], _SplitRun]) -> _SplitRun:
        if key not in self._runs:
            self._runs[key] = make()
            self.made += 1
        return self._runs[key]


def _diagnosis(runs: list[_SplitRun], seeds: list[int], plan: PrivacyPlan, *, options: DiagnosisOptions,
               calibration: Calibration, dataset: str, model_name: str, start: float) -> Diagnosis:
    """The diagnosis of these splits' runs: the first split's, or the expectation over all (module docstring);
    the theory's quantities and the recommendations from the first split."""
    calibration.check_applicable(dataset)
    run, more = runs[0], len(runs) > 1
    base = run.base
    train = base.train
    for other in runs[1:]:
        if other.base.train.group_names != train.group_names:
            raise ValueError(f"more_splits have other groups than train: {other.base.train.group_names} vs "
                             f"{train.group_names}")
    resolved = run.resolved
    # the pooling, the theory's quantities and the recommendations draw from their own stream, not a split's
    entropy = [options.seed, seeds[0], len(seeds), 1]
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence(entropy).generate_state(1)[0]))
    prediction = run.prediction
    if more:
        prediction = pool_splits([r.prediction for r in runs], calibration=calibration, generator=generator)
    problem = base.problem
    theory = theory_quantities(problem, base.reference.trajectory.checkpoints, resolved, generator)
    groups = prediction.table.merge(theory, on="group")
    population_boundary = float((groups["boundary"] * groups["n"]).sum() / groups["n"].sum())
    groups["reasons"] = [reasons_for(row, population_boundary=population_boundary, n_total=len(train),
                                     n_groups=train.n_groups) for _, row in groups.iterrows()]
    groups["p_most_hurt"] = most_hurt_probabilities(prediction.samples, list(problem.group_names)).reindex(
        groups["group"]).to_numpy()
    # rank: the order of the mean predicted costs (1 = most negative); the most-hurt verdict is P(most hurt)'s
    groups["rank"] = groups["cost"].rank(method="first").astype(int)
    groups = groups.sort_values("rank").reset_index(drop=True)
    hurt = most_hurt_group(groups, prediction.samples, list(problem.group_names), blocks=prediction.sample_blocks)
    split_hurt = None
    if more:
        own = run.prediction.table.assign(rank=run.prediction.table["cost"].rank(method="first").astype(int))
        own = own.sort_values("rank").reset_index(drop=True)
        split_hurt = most_hurt_group(own, run.prediction.samples, list(problem.group_names))
    notes = []
    if prediction.unstable_directions:
        notes.append(f"Warning: the learning rate is unstable along {prediction.unstable_directions} curvature "
                     f"direction(s) (r a_j > 2): the noise there is capped in the prediction and the run may diverge.")
    small = groups[groups["too_small"]]
    if len(small):
        listed = ", ".join(f"{g} ({n:,} training / {e:,} evaluation rows)" for g, n, e in
                           zip(small["group"], small["n"].astype(int), small["n_eval"].astype(int)))
        notes.append(f"Too few rows to predict from the model: {listed}, below the minimum of {MIN_GROUP_ROWS}; "
                     f"the interval given is the range of the change of so few rows (binomial), not the model's.")
    if not base.exact:
        notes.append(f"The model has {problem.P:,} parameters (> {options.max_exact_params}): the accumulated "
                     f"noise uses diagonal curvature and step covariances (the rows' Gauss-Newton diagonals).")
    diagnosis = Diagnosis(dataset=dataset, plan=resolved, groups=groups, prediction=prediction,
                          mechanism=dominant_mechanism(prediction), most_hurt=hurt, recommendations=[],
                          model=model_name, calibration=calibration, notes=notes,
                          split_mode="expectation" if more else "per-split", split_seeds=tuple(seeds),
                          split_prediction=run.prediction if more else None, split_most_hurt=split_hurt)
    if options.recommendations:  # on the headline's splits, against the headline's costs
        splits = [RecommendationSplit(r.base.problem, r.base.reference, r.base.evaluation, r.base.trajectories,
                                      r.base.exact) for r in runs]
        diagnosis.recommendations = recommendations(splits, plan, resolved, prediction.table,
                                                    draws=options.recommendation_draws, calibration=calibration,
                                                    integration_steps=options.recommendation_steps,
                                                    generator=generator)
    diagnosis.seconds = time.perf_counter() - start
    return diagnosis


def _check_split(train: GroupedDataset, evaluation: GroupedDataset, model: nn.Module) -> int:
    """The training rows' count, after checking one split's arguments."""
    for value, name in ((train, "train"), (evaluation, "evaluation")):
        if not isinstance(value, GroupedDataset):
            raise TypeError(f"{name} must be a GroupedDataset, got {type(value).__name__}")
    if train.group_names != evaluation.group_names:
        raise ValueError(f"train and evaluation have different groups: {train.group_names} vs "
                         f"{evaluation.group_names}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if len(train) < MIN_TRAIN_ROWS:
        raise ValueError(f"train has {len(train)} rows; a diagnosis needs at least {MIN_TRAIN_ROWS}")
    return len(train)


class _SplitBase:
    """One split's problem, trajectories and non-private reference: all of a prediction but the planned run's
    noise, shared by plans that differ in sigma (or target epsilon) alone. Seeded by ``options.seed`` (its rows
    and the reference's draws)."""

    def __init__(self, train: GroupedDataset, evaluation: GroupedDataset, model: nn.Module, plan: PrivacyPlan,
                 options: DiagnosisOptions) -> None:
        self.train, self.evaluation, self.model = train, evaluation, model
        resolved = plan.resolve(_check_split(train, evaluation, model))
        problem = Problem(model, train, rows=options.rows, curvature_rows=options.curvature_rows,
                          theory_rows=options.theory_rows, seed=options.seed)
        with torch.no_grad():
            n_out = problem.model(train.X[:1].to(torch.float64)).shape[1]
        if train.n_classes != n_out:
            raise ValueError(f"the data have {train.n_classes} label classes but the model outputs {n_out} logits "
                             f"(it must output one per class)")
        self.problem, self.exact = problem, problem.P <= options.max_exact_params
        implicit = problem.linear is not None and self.exact
        integration_steps, curvature = self._integration_steps(problem, resolved, options, implicit=implicit)
        self.trajectories = TrajectoryCache(problem, integration_steps=integration_steps, implicit=implicit,
                                            curvature=curvature)
        sgd = Mechanism("sgd", steps=resolved.steps, lr=resolved.lr, batch_size=plan.batch_size,
                        sampling_rate=resolved.sampling_rate, label="SGD")
        np_trajectory = self.trajectories.get(sgd, checkpoints=(1 / 3, 2 / 3, 1.0))
        np_covariance = covariance(problem, sgd, np_trajectory, exact=self.exact)
        draws = max(options.draws, options.recommendation_draws)
        self.reference = Reference(np_trajectory, outcome(problem, np_trajectory.theta, np_covariance, evaluation,
                                                          draws=draws,
                                                          generator=torch.Generator().manual_seed(options.seed)))

    @staticmethod
    def key(plan: PrivacyPlan, n_train: int) -> tuple:
        """What of the plan a base depends on: T, r, b and q (not sigma, C or the method)."""
        resolved = plan.resolve(n_train)
        return resolved.steps, resolved.lr, plan.batch_size, resolved.sampling_rate

    @staticmethod
    def _integration_steps(problem: Problem, resolved: ResolvedPlan, options: DiagnosisOptions, *,
                           implicit: bool) -> tuple[int, float | None]:
        """(K, lambda_max for explicit steps). Logistic regression's implicit steps (a Jacobian formed exactly: at most
        ``max_exact_params``) need no more than ``implicit_steps`` whatever r lambda_max. Explicit Euler steps need
        h lambda_max <= 0.5 (h = r T / K): K_euler = min(T, max(``min_steps``, r T lambda_max / 0.5)). Where
        K_euler > ``chebyshev_steps`` the trajectory takes ``chebyshev_steps`` damped Runge-Kutta-Chebyshev steps
        of the fewest stages that keep h lambda_max within half their stable interval
        (:func:`~.dynamics.stages_for`; so do fewer steps asked for, e.g. the recommendations'):
        ~sqrt(K r T lambda_max) drift evaluations instead of K_euler. Past
        ``max_steps`` Euler steps the drift is estimated on fewer rows, as many as keep K_euler x rows at
        max_steps x rows (never fewer than 500)."""
        if implicit:
            return int(min(resolved.steps, options.implicit_steps)), None
        lam = largest_curvature(problem, problem.theta0)
        horizon = resolved.lr * resolved.steps
        steps = int(min(resolved.steps, max(options.min_steps, math.ceil(horizon * lam / EULER_STIFFNESS))))
        if steps > options.max_steps:
            fewer = max(500, options.rows * options.max_steps // steps)
            if fewer < len(problem.drift_data):
                problem.drift_data = stratified(problem.drift_data, fewer, options.seed + 3)
        return min(steps, options.chebyshev_steps), lam


class _SplitRun:
    """A split's prediction of the planned run on its :class:`_SplitBase` (the draws seeded by ``options.seed``,
    apart from the base's)."""

    def __init__(self, base: _SplitBase, plan: PrivacyPlan, options: DiagnosisOptions,
                 calibration: Calibration) -> None:
        self.base = base
        self.resolved = plan.resolve(len(base.train))
        planned = mechanism_for(plan, self.resolved, plan.method, dimension=base.problem.P)
        stream = int(np.random.SeedSequence([options.seed, 2]).generate_state(1)[0])
        self.prediction = predict(base.problem, planned, base.reference, base.evaluation, draws=options.draws,
                                  calibration=calibration, trajectories=base.trajectories, exact=base.exact,
                                  generator=torch.Generator().manual_seed(stream))


def pool_splits(predictions: Sequence[Prediction], *, calibration: Calibration,
                generator: torch.Generator | None = None) -> Prediction:
    """The expectation over splits of per-split predictions (module docstring): mean costs and parts, the
    interval of a run on a random split, every split's samples with the training rows' spread added."""
    first = predictions[0]
    tables = [p.table.set_index("group") for p in predictions]
    numeric = ["cost", "clip_part", "noise_part", "acc_nonprivate", "acc_private", "acc_private_noiseless",
               "acc_nonprivate_noiseless", "change_rate", "row_var", "n_eval"]
    stacked = pd.concat([t[numeric] for t in tables], keys=range(len(tables)))
    table = split_mean([p.table for p in predictions], numeric)
    noise = pd.concat([(t["half_width"] / (Z90 * calibration.widen)) ** 2 for t in tables], axis=1).mean(axis=1)
    noise_raw = pd.concat([(t["uncalibrated_half_width"] / Z90) ** 2 for t in tables], axis=1).mean(axis=1)
    # the training rows: the variance of the costs over splits beyond the test rows' share v_k / n_k (already in
    # each split's spread; a random-effects split of the variance; never negative)
    rows = pd.concat([t["row_var"] / t["n_eval"].clip(lower=1) for t in tables], axis=1).mean(axis=1)
    training = (stacked["cost"].groupby(level=1, sort=False).var(ddof=1).fillna(0.0) - rows).clip(lower=0.0)
    table["half_width"] = Z90 * calibration.widen * np.sqrt(noise + training)
    table["uncalibrated_half_width"] = Z90 * np.sqrt(noise_raw + training)
    table["too_small"] = pd.concat([t["too_small"] for t in tables], axis=1).any(axis=1)
    table["n_eval"] = table["n_eval"].round().astype(int)
    acc = table["acc_nonprivate"]
    table["low"] = np.maximum(table["cost"] - table["half_width"], -acc)
    table["high"] = np.minimum(table["cost"] + table["half_width"], 1 - acc)
    table = table.reset_index()
    samples, parts = None, []
    if all(p.samples is not None for p in predictions):
        order = list(first.table["group"])
        spread = np.sqrt(training.reindex(order).to_numpy())
        for p in predictions:
            part = p.samples[:, [list(p.table["group"]).index(g) for g in order]]
            jitter = torch.randn(part.shape, generator=generator, dtype=torch.float64).numpy()
            parts.append(part + calibration.widen * spread * jitter)
        samples = np.concatenate(parts)
    blocks = tuple(len(part) for part in parts) if samples is not None else ()
    return replace(first, table=table[["group", *[c for c in first.table.columns if c != "group"]]],
                   collapsed=float(np.mean([p.collapsed for p in predictions])) > 0.5,
                   noise_per_weight=float(np.mean([p.noise_per_weight for p in predictions])),
                   sampling_per_weight=float(np.mean([p.sampling_per_weight for p in predictions])),
                   samples=samples, sample_blocks=blocks)
