"""Paper 001 Figures 4-6 setting on offline data: one-hidden-layer ReLU MLP (32 units), DP-SGD C=0.1, sigma=1.

Measured, not asserted (paper 001 Figures 3-6 on the offline data; Bank has no offline
file). One seed; batch 256, lr 1.0, Poisson sampling, 5 epochs by default; the
excessive risk is the per-row loss of the DP-SGD model minus that of the same MLP trained
without privacy (same seed, schedule and learning rate), on the training rows.

Usage: python benchmarks/fairness_lens_latent_factors.py DATA BY [EPOCHS] [PREPROCESSING]
  e.g. adult sex 5 | adult sex 5 pfld | adult race | compas race | synthetic -
  (synthetic: groups of 4000 and 1000 rows with mean input norms 1 and 3).
"""
import json, sys, time
import numpy as np
import torch
torch.set_num_threads(1)
from dpfair_analysis.data import load
from dpfair_analysis.models import build_model
from dpfair_analysis.training.loop import train, TrainConfig, schedule
from dpfair_analysis.training.clipping import UniformClipping, NonPrivate
from dpfair_analysis.gradients import per_sample_losses
from dpfair_analysis.theory.latent_factors import LatentFactorTracker, input_norm_vs_excess_risk, clipped_gradient_norms
from dpfair_analysis.theory.conditions import margin_proxy_correlation

name, by = sys.argv[1], sys.argv[2]
epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
opts = {} if by == "-" else {"by": by}
if len(sys.argv) > 4:
    opts["preprocessing"] = sys.argv[4]
if name == "synthetic":
    opts = {"sizes": (4000, 1000), "input_scale": (1.0, 3.0), "dim": 10}
data = load(name, **opts)
cfg = TrainConfig(epochs=epochs, batch_size=256, lr=1.0, seed=0)
total, ends = schedule(len(data), cfg)
spe = total / epochs
tracker = LatentFactorTracker(data, every=max(1, int(spe // 2)), eval_size=1000, seed=0, steps_per_epoch=spe)
t0 = time.time()
dp = build_model("mlp", input_shape=data.X.shape[1:], n_classes=data.n_classes, seed=0, hidden=(32,))
res = train(dp, data, UniformClipping(clip_bound=0.1, noise_multiplier=1.0), cfg, callbacks=[tracker], progress=False)
tracker.finish()
sgd = build_model("mlp", input_shape=data.X.shape[1:], n_classes=data.n_classes, seed=0, hidden=(32,))
train(sgd, data, NonPrivate(), cfg, progress=False)
with torch.no_grad():
    excess_rows = (per_sample_losses(dp, data.X, data.y) - per_sample_losses(sgd, data.X, data.y)).numpy()
ex = {n: float(excess_rows[(data.group == k).numpy()].mean()) for k, n in enumerate(data.group_names)}
table, corr = input_norm_vs_excess_risk(data, ex, sample_excess=excess_rows, bins=10)
f = tracker.frame
steps = sorted(f.step.unique())
pick = [steps[0], steps[len(steps) // 2], steps[-1]]
print(f"== {name} by {by}: n={len(data)} epochs={epochs} T={total} eps={res.epsilon:.3f} time={time.time()-t0:.0f}s")
print(f[f.step.isin(pick)].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
print(json.dumps(corr))
print(clipped_gradient_norms(dp, data, [0.01, 0.1, 1.0]).to_string(index=False, float_format=lambda v: f"{v:.4f}"))
print("margin-proxy (MLP, linearised):", margin_proxy_correlation(dp, data.X[tracker.index]))
