"""Training: one loop, and the private and fair trainers built on it.

* :mod:`.loop` -- :func:`~.loop.train`, the one DP-SGD / SGD loop: Poisson-sampled batches, per-sample
  clipping and noise decided by a clipping policy, a privacy ledger of what each step released;
* :mod:`.clipping` -- the policy interface and :class:`~.clipping.UniformClipping` (DP-SGD); the papers' policies
  :mod:`.dpsgdf` (DPSGD-F and Naive, paper 000), :mod:`.optq` (adaptive quantile clipping), :mod:`.fairdp`
  (paper 002), :mod:`.mitigation` (paper 001's Eq. 6); :mod:`.policies` builds one by name;
* :mod:`.methods` -- the method registry that ``dpfair compare``, the diagnosis and the audits read;
* trainers of their own: :mod:`.lagrangian` (F-LD / PF-LD, paper 003), :mod:`.fedavg` (DP-FedAvg),
  :mod:`.baselines` (paper 003's Table 2 baselines); :mod:`.batched` trains several seeds in one pass;
* :mod:`.objectives` -- the per-sample losses.

The entry points below are imported on first use, so ``import dpfair_analysis.training`` stays cheap.
"""

from __future__ import annotations

from dpfair_analysis import lazy_exports

#: Each exported entry point and the module that defines it.
_HOMES = {
    "train": ".loop",
    "TrainConfig": ".loop",
    "TrainingResult": ".loop",
    "ClippingPolicy": ".clipping",
    "UniformClipping": ".clipping",
    "NonPrivate": ".clipping",
    "make_policy": ".policies",
    "DPSGDF": ".dpsgdf",
    "NaiveReweighting": ".dpsgdf",
    "OptQ": ".optq",
    "FairDP": ".fairdp",
    "FairnessLensMitigation": ".mitigation",
    "train_lagrangian": ".lagrangian",
    "LagrangianConfig": ".lagrangian",
    "LagrangianResult": ".lagrangian",
    "train_dpfedavg": ".fedavg",
    "FedAvgConfig": ".fedavg",
    "train_many": ".batched",
    "CrossEntropy": ".objectives",
}

__all__ = list(_HOMES)

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
