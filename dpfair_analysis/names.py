"""The names the command line checks, as a static table that imports nothing: methods, audited mechanisms,
claims, data sets and constraints.

The registries that own these names (the training methods, the audits, the claims, the data catalog, the
fairness constraints, the PF-LD experiment) import torch or numpy, or run code at import; the command line reads
this table instead, so that an unknown name is refused in a few milliseconds, before anything heavy is imported.
``tests/test_names.py`` asserts that each tuple here equals its registry's keys, in order, so the two cannot drift:
a new method, audit, claim or data set is added to its registry *and* here. A name a program registers at run time
(a method, an audit) is not here; the command line asks the live registry when one has been registered (see
``dpfair_analysis.cli.audit``).
"""

from __future__ import annotations

#: :data:`dpfair_analysis.training.methods.REGISTRY`: ``dpfair compare --methods`` (and ``dpsgd(C=<bound>)``).
METHODS = ("sgd", "dpsgd", "naive", "dpsgdf", "optq", "boundedadaptive", "globaladapt", "fairdp", "dpfedavg")

#: :data:`dpfair_analysis.verify.audits.MECHANISMS`: ``dpfair audit --mechanism`` (one release each).
AUDIT_MECHANISMS = ("dpsgd", "naive", "dpsgdf", "output-perturbation", "mitigation", "pfld-primal", "pfld-dual",
                    "pfld-primal-paper")

#: The trainers audited as they run, as shipped (:func:`dpfair_analysis.verify.audits.trainers.sampled_audits`):
#: each has an under-noised twin ``NAME@0.25``; ``pfld-primal-shared-batch`` is a known-broken control.
SAMPLED_SHIPPED = ("output-perturbation", "dpsgd", "naive", "dpsgdf", "optq", "boundedadaptive", "globaladapt",
                   "fairdp", "mitigation", "pfld", "dpfedavg")
#: ``dpfair audit --sampled --mechanism``.
SAMPLED_AUDITS = (*SAMPLED_SHIPPED, "pfld-primal-shared-batch", *(f"{name}@0.25" for name in SAMPLED_SHIPPED))

#: :data:`dpfair_analysis.testing.auditing.BUDGETS`: the privacy-testing kit's budgets (``dpfair audit --target
#: --budget``, the pytest plugin's ``--dp-budget``), weakest first.
KIT_BUDGETS = ("smoke", "quick", "full", "thorough")
#: :data:`dpfair_analysis.verify.claims.PAPERS` and ``BUDGETS``: ``dpfair verify --paper`` / ``--budget``.
CLAIM_PAPERS = ("000", "001", "002", "003", "004", "005", "006")
VERIFY_BUDGETS = ("quick", "full")
#: :data:`dpfair_analysis.verify.claims.CLAIMS`' ids, in order: ``dpfair verify --claim`` / ``--explain``.
CLAIMS = (
    '000.sec3.gaussian', '000.sec4.2.dpsgd-upper', '000.eq1.upper', '000.eq1.lower-half',
    '000.eq1.lower-half.nonnegative', '000.sec4.2.optimal-C.rank', '000.sec4.2.optimal-C.quantile',
    '000.sec5.2.count-sensitivity', '000.sec5.2.sum-sensitivity', '000.sec5.2.sum-sensitivity.guarded',
    '000.sec5.3.naive-sum-sensitivity', '000.sec5.3.naive-sum-sensitivity.noisy-sizes', '000.sec5.2.group-privacy',
    '000.sec5.2.group-privacy.guarded', '000.sec5.2.two-groups', '000.sec5.3.naive-group-privacy',
    '000.sec6.1.3.count-budget', '000.sec6.1.3.fewer-iterations', '000.tables.epsilon', '004.def3.gaussian',
    '004.thm1', '004.sec5.3.naive-sum-sensitivity', '004.sec5.2.two-groups', '004.sec6.1.fewer-iterations',
    '004.tables.epsilon', '001.sec3.gaussian', '001.sec3.gaussian.dwork-roth', '001.sec3.gaussian.std',
    '001.sec5.sensitivity', '001.sec5.sensitivity.intercept', '001.sec5.sensitivity.no-intercept', '001.thm1',
    '001.thm1.mean-hessian', '001.cor1',
    '001.cor1.trace', '001.cor1.trace.factor2', '001.cor2', '001.cor2.second-moment', '001.thm2',
    '001.thm2.noise-over-b2', '001.eq6.simplification', '001.thm3', '001.thm3.wlog', '001.thm3.minibatch', '001.ex1',
    '001.ex1.with-bias', '001.ex1.norm', '001.ex2', '001.ex2.identity', '001.ex2.sum', '001.thm4',
    '001.thm4.exact-noise-effect', '001.ex3', '001.ex3.with-bias', '001.ex3.norm', '001.thm5',
    '001.sec8.boundary-trace', '003.ex1', '003.ex2', '003.ex3', '003.thm1', '003.sec6.population-unclipped',
    '003.thm2', '003.thm2.unsigned', '003.thm1.sum-release', '003.thm2.sum-release', '003.sec7.missing',
    '003.sec7.less-noise', '003.sec4.2.gaussian', '003.sec4.2.gaussian.dwork-roth', '003.sec4.2.gaussian.std',
    '003.thm3', '003.thm3.mironov',
    '003.thm4', '003.lemma1', '003.lemma1.given-sensitivity', '003.lemma1.given-sensitivity.multiplier',
    '003.lemma1.shared-batch', '003.lemma2', '003.lemma2.given-sensitivity', '003.lemma2.given-sensitivity.multiplier',
    '003.thm5', '003.thm5.corrected', '003.sec6.1.rdp-to-dp', '003.thm6', '003.thm6.signed',
    '003.thm6.optimal-Cp', '003.thm7', '002.eq3', '002.eq4', '002.eq4.scaled', '002.eq4.bias-variance',
    '002.eq4.clipping-bias', '002.appD4.indices', '005.code.direction-magnitude',
    '005.code.noise-term', '005.code.global-condition', '005.code.accounting', '006.abs.vanishing-bound',
    '006.fig1.lower-bound',
    '006.code.count-noise',
)

#: :data:`dpfair_analysis.catalog.DATASETS` (the catalog itself imports nothing heavy either).
DATASETS = ("adult", "income", "adult-balanced", "compas", "german", "wage", "titanic", "mnist", "mnist-full",
            "mnist-full-unbalanced", "mnist-unbalanced", "bank", "dutch", "dutch-unbalanced", "synthetic", "csv")

#: :data:`dpfair_analysis.fairness.constraints.KINDS`: demographic parity, equalized odds, accuracy parity.
CONSTRAINTS = ("dp", "eo", "ap")

#: Paper 003's Table 2 data sets -> the registered data set (:data:`dpfair_analysis.experiments.pfld.DATASETS`).
PFLD_DATASETS = {"income": "income", "adult": "income", "compas": "compas", "german": "german", "bank": "bank"}
#: :data:`dpfair_analysis.experiments.pfld.ALL_METHODS`: ``dpfair pfld-table --methods``.
PFLD_METHODS = ("clf", "z", "a", "m", "pfld", "fld", "pfld-paper", "pfld-shared-batch")
#: :func:`dpfair_analysis.experiments.pfld.table_name` of Bank's many-group groupings (``--group-by``).
PFLD_GROUPED_TABLES = {"age3": "m-bank3", "age5": "m-bank5"}
#: :func:`dpfair_analysis.experiments.pfld.paper_methods` of each Table 2: the methods the paper prints (no Z on
#: M-Bank3 and M-Bank5, whose groups Zafar et al.'s covariance constraint cannot take).
PFLD_PAPER_METHODS = {"income": ("clf", "z", "a", "m", "pfld"), "compas": ("clf", "z", "a", "m", "pfld"),
                      "bank": ("clf", "z", "a", "m", "pfld"), "m-bank3": ("clf", "a", "m", "pfld"),
                      "m-bank5": ("clf", "a", "m", "pfld")}
#: :data:`dpfair_analysis.experiments.pfld_tuned.TABLE2_GRIDS`: what ``dpfair pfld-table --tune`` tunes.
PFLD_TUNED_METHODS = ("clf", "z", "a", "m", "pfld")
#: :data:`dpfair_analysis.training.fedavg.PARTITIONS`: ``dpfair compare --partition`` (DP-FedAvg's option, which
#: the registry of methods reads without importing the trainer's torch).
FEDAVG_PARTITIONS = ("iid", "group")
#: :data:`dpfair_analysis.training.lagrangian.METHODS`: ``dpfair train --method``.
LAGRANGIAN_METHODS = ("fld", "pfld")
