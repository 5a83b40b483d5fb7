"""The entry point: :func:`diagnose` runs the plan, the problem, the trajectories, the prediction, the
explanation and the recommendations; :class:`Diagnosis` is what it found."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import pandas as pd
import torch
from torch import nn

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.diagnose.dynamics import covariance, trajectory
from dpfair_analysis.diagnose.explanation import dominant_mechanism, explain, most_hurt_group, number_or_none, \
    reasons_for, theory_quantities
from dpfair_analysis.diagnose.mechanisms import Mechanism, mechanism_for
from dpfair_analysis.diagnose.plan import MIN_TRAIN_ROWS, Calibration, DiagnosisOptions, PrivacyPlan, \
    ResolvedPlan
from dpfair_analysis.diagnose.prediction import MIN_GROUP_ROWS, Prediction, correctness, predict
from dpfair_analysis.diagnose.problem import Problem, largest_curvature, stratified
from dpfair_analysis.diagnose.recommendations import recommendations

#: Keys of each group in the JSON (the issue's schema, exactly).
GROUP_KEYS = ("group", "n", "predicted_cost", "predicted_cost_low", "predicted_cost_high", "rank", "reasons",
              "clip_fraction", "clip_bias", "noise_term", "trace", "boundary")
JSON_KEYS = ("groups", "most_hurt", "settings", "epsilon", "delta", "recommendations")


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

    def settings(self) -> dict:
        p = self.prediction
        return {**self.plan.as_dict(), "dataset": self.dataset, "model": self.model,
                "mechanism": self.mechanism, "collapse_predicted": p.collapsed,
                "collapse_label": p.collapse_label,
                "noise_per_weight": p.noise_per_weight, "sampling_noise_per_weight": p.sampling_per_weight,
                "weight_scale": p.weight_scale, "integration_steps": p.integration_steps,
                "calibration": asdict(self.calibration), "seconds": self.seconds, "data": dict(self.data_info)}

    def to_json(self) -> dict:
        """The issue's schema: groups (exactly :data:`GROUP_KEYS` each), most_hurt, settings, epsilon, delta,
        recommendations."""
        columns = {"predicted_cost": "cost", "predicted_cost_low": "low", "predicted_cost_high": "high",
                   "clip_fraction": "clip_fraction", "clip_bias": "clip_bias", "noise_term": "noise_term",
                   "trace": "trace", "boundary": "boundary"}
        groups = []
        for row in self.groups.to_dict("records"):
            numbers = {key: number_or_none(row[column]) for key, column in columns.items()}
            groups.append({key: numbers[key] if key in numbers else None for key in GROUP_KEYS}
                          | {"group": str(row["group"]), "n": int(row["n"]), "rank": int(row["rank"]),
                             "reasons": list(row["reasons"])})
        return {"groups": groups, "most_hurt": self.most_hurt, "settings": self.settings(),
                "epsilon": number_or_none(self.plan.epsilon), "delta": self.plan.plan.delta,
                "recommendations": self.recommendations}

    def explanation(self) -> list[str]:
        """Plain sentences: the regime, the verdict, and why per group (:func:`.explanation.explain`)."""
        return explain(self)


def diagnose(train: GroupedDataset, evaluation: GroupedDataset, model: nn.Module, plan: PrivacyPlan, *,
             options: DiagnosisOptions = DiagnosisOptions(), calibration: Calibration = Calibration(),
             dataset: str | None = None, model_name: str | None = None) -> Diagnosis:
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
        How much work to do.
    calibration : Calibration
        Default: none. One fitted on other data sets (refused if fitted on ``dataset``).
    dataset, model_name : str, optional
        Names for the report (``dataset`` defaults to ``train.name``).

    Returns
    -------
    Diagnosis
    """
    import time

    start = time.perf_counter()
    for value, name in ((train, "train"), (evaluation, "evaluation")):
        if not isinstance(value, GroupedDataset):
            raise TypeError(f"{name} must be a GroupedDataset, got {type(value).__name__}")
    if train.group_names != evaluation.group_names:
        raise ValueError(f"train and evaluation have different groups: {train.group_names} vs "
                         f"{evaluation.group_names}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    dataset = dataset or train.name
    calibration.check_applicable(dataset)
    if len(train) < MIN_TRAIN_ROWS:
        raise ValueError(f"train has {len(train)} rows; a diagnosis needs at least {MIN_TRAIN_ROWS}")
    resolved = plan.resolve(len(train))
    problem = Problem(model, train, rows=options.rows, curvature_rows=options.curvature_rows,
                       theory_rows=options.theory_rows, seed=options.seed)
    with torch.no_grad():
        n_out = problem.model(train.X[:1].to(torch.float64)).shape[1]
    if train.n_classes != n_out:
        raise ValueError(f"the data have {train.n_classes} label classes but the model outputs {n_out} logits "
                         f"(it must output one per class)")
    generator = torch.Generator().manual_seed(options.seed)
    exact = problem.P <= options.max_exact_params
    lam = largest_curvature(problem, problem.theta0)
    horizon = resolved.lr * resolved.steps
    # a stable, non-oscillating integrator needs h lambda_max <= 0.5 (h = r T / K); past max_steps the drift is
    # estimated on fewer rows so that the work K x rows stays max_steps x rows (never fewer than 500 rows)
    integration_steps = int(min(resolved.steps, max(options.min_steps, math.ceil(horizon * lam / 0.5))))
    if integration_steps > options.max_steps:
        fewer = max(500, options.rows * options.max_steps // integration_steps)
        if fewer < len(problem.drift_data):
            problem.drift_data = stratified(problem.drift_data, fewer, options.seed + 3)
    sgd = Mechanism("sgd", steps=resolved.steps, lr=resolved.lr, batch_size=plan.batch_size,
                     sampling_rate=resolved.sampling_rate, label="SGD")
    np_trajectory = trajectory(problem, sgd, integration_steps=integration_steps, checkpoints=(1 / 3, 2 / 3, 1.0))
    np_covariance = covariance(problem, sgd, np_trajectory, exact=exact)
    np_point, np_draws = correctness(problem, np_trajectory.theta, np_covariance, evaluation,
                                      draws=max(options.draws, options.recommendation_draws), generator=generator)
    reference = (np_trajectory, np_point, np_draws)
    predict_kwargs = dict(integration_steps=integration_steps, exact=exact, generator=generator)
    planned = mechanism_for(plan, resolved, plan.method)
    prediction = predict(problem, planned, reference, evaluation, draws=options.draws, calibration=calibration,
                          **predict_kwargs)
    theory = theory_quantities(problem, np_trajectory.checkpoints, resolved, generator)
    groups = prediction.table.merge(theory, on="group")
    population_boundary = float((groups["boundary"] * groups["n"]).sum() / groups["n"].sum())
    groups["reasons"] = [reasons_for(row, population_boundary=population_boundary, n_total=len(train),
                                     n_groups=train.n_groups) for _, row in groups.iterrows()]
    groups["rank"] = groups["cost"].rank(method="first").astype(int)  # 1 = most hurt (most negative)
    groups = groups.sort_values("rank").reset_index(drop=True)
    hurt = most_hurt_group(groups)
    notes = []
    if prediction.unstable_directions:
        notes.append(f"Warning: the learning rate is unstable along {prediction.unstable_directions} curvature "
                     f"direction(s) (r a_j > 2): the noise there is capped in the prediction and the run may diverge.")
    small = groups[groups["too_small"]]
    if len(small):
        listed = ", ".join(f"{g} ({n:,} training / {e:,} evaluation rows)" for g, n, e in
                           zip(small["group"], small["n"].astype(int), small["n_eval"].astype(int)))
        notes.append(f"Too few rows to predict: {listed}, below the minimum of {MIN_GROUP_ROWS}; the interval "
                     f"given is the whole range a cost can take.")
    if not exact:
        notes.append(f"The model has {problem.P:,} parameters (> {options.max_exact_params}): the accumulated "
                     f"noise uses diagonal curvature and step covariances (the rows' Gauss-Newton diagonals).")
    diagnosis = Diagnosis(dataset=dataset, plan=resolved, groups=groups, prediction=prediction,
                          mechanism=dominant_mechanism(prediction), most_hurt=hurt, recommendations=[],
                          model=model_name or type(model).__name__, calibration=calibration, notes=notes)
    if options.recommendations:
        diagnosis.recommendations = recommendations(problem, plan, resolved, reference, evaluation, groups,
                                                    draws=options.recommendation_draws, calibration=calibration,
                                                    **predict_kwargs)
    diagnosis.seconds = time.perf_counter() - start
    return diagnosis
