"""The static table of names (:mod:`dpfair_analysis.names`) equals every registry it mirrors, in order, and imports
nothing: the command line refuses an unknown name from it without importing torch (issue 47)."""

from __future__ import annotations

import subprocess
import sys

from dpfair_analysis import names


def test_methods_are_the_training_registry():
    from dpfair_analysis.training import methods

    assert names.METHODS == methods.names()


def test_mechanisms_are_the_audit_registries():
    from dpfair_analysis.verify.audits import MECHANISMS, trainers

    assert names.AUDIT_MECHANISMS == tuple(MECHANISMS)
    assert names.SAMPLED_AUDITS == tuple(trainers.sampled_audits())
    # SAMPLED is read when the module is first imported: a test's toy method registered then stays in it
    assert set(names.SAMPLED_AUDITS) <= set(trainers.SAMPLED)


def test_claims_papers_and_budgets_are_the_claims_registry():
    from dpfair_analysis.verify.claims import BUDGETS, CLAIMS, PAPERS

    assert names.CLAIMS == tuple(c.id for c in CLAIMS)
    assert names.CLAIM_PAPERS == tuple(PAPERS) and names.VERIFY_BUDGETS == tuple(BUDGETS)


def test_data_sets_and_constraints_are_their_registries():
    from dpfair_analysis.catalog import DATASETS
    from dpfair_analysis.experiments import pfld, pfld_tuned
    from dpfair_analysis.fairness.constraints import KINDS
    from dpfair_analysis.training import fedavg, lagrangian

    assert names.DATASETS == tuple(DATASETS)
    assert names.CONSTRAINTS == tuple(KINDS)
    assert names.PFLD_DATASETS == pfld.DATASETS and set(names.PFLD_DATASETS.values()) <= set(DATASETS)
    assert names.PFLD_METHODS == pfld.ALL_METHODS
    assert names.PFLD_TUNED_METHODS == tuple(pfld_tuned.TABLE2_GRIDS)
    from dpfair_analysis.data.bank import NAMES as BANK_TABLES

    assert names.PFLD_GROUPED_TABLES == {g: t for g, t in BANK_TABLES.items() if t != "bank"}
    assert names.PFLD_PAPER_METHODS == {t: pfld.paper_methods(t) for t in set(pfld.PAPER_TABLE2["dataset"])}
    assert names.LAGRANGIAN_METHODS == tuple(lagrangian.METHODS)
    assert names.FEDAVG_PARTITIONS == fedavg.PARTITIONS


def test_the_table_imports_nothing():
    code = ("import sys\nbefore = set(sys.modules)\nimport dpfair_analysis.names\n"
            "print(sorted(m for m in set(sys.modules) - before if not m.startswith('dpfair_analysis')))")
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", (result.stdout, result.stderr[-500:])


def test_kit_budgets_are_the_kits_budget_table():
    from dpfair_analysis.testing.auditing import BUDGETS

    # one table: the plugin's sensitivity searches read their examples from the same Budget entries
    assert names.KIT_BUDGETS == tuple(BUDGETS)
    assert all(budget.sensitivity_examples > 0 for budget in BUDGETS.values())
