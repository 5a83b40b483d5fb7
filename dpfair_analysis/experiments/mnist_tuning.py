"""The MNIST tuning study (papers 000 and 002): the reproduction protocol of :mod:`.tuning` applied to paper 000's
unbalanced full MNIST -- the budget (:data:`~dpfair_analysis.experiments.mnist_tuning.MNIST_GRID`), the methods
and the order they run in, the comparison every run starts from and the groups the papers' tables show.

Full-MNIST runs are 25 minutes each: :func:`mnist_tuning_plan` lists them in the order that answers the questions
first, and ``notebooks/record_runs.py --study mnist-tuning`` computes and records them one at a time
(:class:`~dpfair_analysis.experiments.cache.RunRecords`, ``paper_figs/fairdp/mnist_tuning_runs.json``); the
notebook ``fairdp_mnist_tuning`` reads them.
"""

from __future__ import annotations

from typing import Any, Sequence

from dpfair_analysis.experiments.tuning import TuningGrid, tuning_plan

#: paper 000 §6.1 prints r = 0.01 and nothing about how batches are drawn; DP-SGD's accountant assumes
#: Poisson sampling, the papers' code most likely drew shuffled fixed-size batches; 0.05 and 0.1 are the
#: rates of paper 002's Figure 4 (whose MNIST runs were read on the test set, so they cannot serve as tuning)
MNIST_GRID = TuningGrid({"lr": (0.01, 0.05, 0.1), "sampling": ("poisson", "shuffle")},
                        printed={"lr": 0.01, "sampling": "poisson"},
                        note="r printed by paper 000; sampling not printed, Poisson is what the accountant assumes")
#: the methods of the MNIST tuning, in the order they are run: DPSGD and DPSGD-F answer the study's questions
#: (the learning rate; Poisson against shuffled batches); SGD is every cost's reference; then
#: paper 002's Opt-Q and FairDP, then paper 000's Naive; then the later mitigations (issue 51: Esipova et al.'s
#: DPSGD-Global-Adapt, Zhao et al.'s bounded adaptive clipping) on paper 000's class-8 setting -- every one on the
#: same budget and at equal privacy
MNIST_TUNING_METHODS = ("dpsgd", "dpsgdf", "sgd", "optq", "fairdp", "naive", "globaladapt", "boundedadaptive")
#: the order the recording driver runs them in (a tuple: those methods interleaved configuration by
#: configuration): at ~25 CPU-minutes a run, DPSGD and DPSGD-F side by side answer the sampling question at the
#: printed rate after four runs, then SGD (every cost's reference, the cheapest), Opt-Q beside FairDP, Naive,
#: then Global-Adapt beside bounded adaptive clipping
MNIST_TUNING_ORDER = (("dpsgd", "dpsgdf"), "sgd", ("optq", "fairdp"), "naive", ("globaladapt", "boundedadaptive"))
#: the MNIST groups the papers' tables show (paper 000 Table 1: the total, class 2 and class 8)
MNIST_GROUPS = ("all", "2", "8")


#: Global-Adapt's options on MNIST, from its authors' MNIST script (``layer6ai-labs/fair-dp``,
#: ``experiment_scripts/mnist_script.sh``: class 8 at ratio 0.09, C = 1, sigma = 0.8, b = 256, 60 epochs, lr 0.1,
#: Z_0 = ``strict_max_grad_norm`` 50, ``threshold`` 0.7; eta_Z = 0.1 and sigma_b = 10 from their config's defaults):
#: the toolkit's defaults are their Adult and Dutch scripts', which differ only in tau = 1
GLOBAL_ADAPT_MNIST = {"threshold": 0.7}


def mnist_tuning_base(profile: str = "full"):
    """The comparison every MNIST tuning run starts from: paper 000's unbalanced full MNIST as paper 002 reuses it
    (:func:`~dpfair_analysis.experiments.fairdp.preset`; ``"quick"``: the offline 5,000-image smoke setting), with
    Global-Adapt at its authors' MNIST options (:data:`GLOBAL_ADAPT_MNIST`; no other method's runs change)."""
    from dpfair_analysis.experiments import fairdp  # torch: the study's constants load without it

    return fairdp.preset("mnist", profile, seeds=1).with_options("globaladapt", **GLOBAL_ADAPT_MNIST)


def mnist_tuning_plan(base, *, seeds: Sequence[int] = (0,)) -> list[tuple[str, dict[str, Any], int]]:
    """(method, configuration, seed) of every run of the study, in :data:`MNIST_TUNING_ORDER` over
    :data:`MNIST_GRID` (:func:`~dpfair_analysis.experiments.tuning.tuning_plan`)."""
    return tuning_plan(base, methods=MNIST_TUNING_ORDER, grid=MNIST_GRID, seeds=seeds)


#: the methods of the later papers' worst-class claims on this grid (Zhao et al.: bounded adaptive clipping against
#: constant clipping, DPSGD, and unbounded adaptive clipping, Opt-Q) and Global-Adapt beside them
LATER_METHODS = ("dpsgd", "optq", "boundedadaptive", "globaladapt")
#: this grid as a setting of :func:`~dpfair_analysis.verify.reproduction.later_claim_verdicts`, and how it relates to
#: the paper's (the CNN setting nearest to Zhao et al.'s skewed MNIST: their verdicts are judged here)
LATER_SETTING = "mnist-full-class8-cnn"
LATER_SETTING_NOTE = ("nearest to the paper's skewed MNIST, not it: full MNIST with class 8 cut to 500 of 5,851 "
                      "(paper 000's skew; Esipova et al.'s 0.09), paper 000's CNN, sigma 0.8 over 60 epochs, each "
                      "method's configuration chosen on validation worst-class accuracy over lr x sampling")

