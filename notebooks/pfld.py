# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Differentially private and fair deep learning: a Lagrangian dual approach (Tran, Fioretto & Van Hentenryck, AAAI'21) — reproduction
#
# Paper 003 (README, References). Every number is computed here by `dpfair_analysis.experiments.pfld`, which calls the baselines (`training/baselines.py`: CLF, Z, A, M) and the F-LD / PF-LD trainer (`training/lagrangian.py`) with the paper's settings: ε = 1, δ = 1e-5, C_p = 10, C_d = 5, a ReLU MLP with two hidden layers (64, 64); what the paper leaves open (10 epochs, batch 256, learning rates, λ_max = 2) is the core's default.
#
# **PF-LD variant.** `pfld` is the toolkit's *corrected* PF-LD: the paper's sensitivities (Thms 1, 2) are refuted (`privacy/sensitivity.py`), so it releases noisy sums with public denominators and accounts with dp_accounting's PLD under replace-one — its ε is an established guarantee. The paper's Table 2 column ("DF-LP") is the paper's own version, whose ε is not a valid guarantee.
#
# **Baselines.** CLF: the same MLP, accuracy only. A: fairlearn's `ExponentiatedGradient` over logistic regression (dp → DemographicParity, eo → EqualizedOdds, ap → ErrorRateParity), non-private. M: k-ary randomized response on the group (ε-local DP), then A on the noisy groups with the bound corrected for the flip rates. Z: Zafar et al.'s covariance-constrained logistic regression (SLSQP), non-private.
#
# `DPFAIR_PROFILE=quick` subsamples 300 rows, 2 folds, 2 epochs, DP only, short sweeps; `smoke` (the tests) the same without Income's reductions baselines and with one ε of Figure 1 on Income; `full` is 5-fold CV on all rows. Bank (the 11,162-row Kaggle file the paper uses, `dpfair data fetch bank --from PATH`) carries Table 2's Bank, M-Bank³ and M-Bank⁵ rows and, as printed, the sweeps of Figures 1-5; where its file is not installed the sweeps fall back to COMPAS (said below). Runs are cached by configuration.

# %%
import pandas as pd
from IPython.display import display

from dpfair_analysis import data as datasets
from dpfair_analysis import plotting
from dpfair_analysis.experiments import pfld as paper
from dpfair_analysis.verify import reproduction
from dpfair_analysis.experiments import pfld_tuned
from dpfair_analysis.experiments import tuning
from dpfair_analysis.experiments.cache import RunCache, RunRecords, default_cache_dir
from dpfair_analysis.experiments.notebook import notebook_environment
from dpfair_analysis.plotting import save_figure, save_table

ENV = notebook_environment('pfld')  # DPFAIR_PROFILE, DPFAIR_FIGS, DPFAIR_THREADS
PROFILE, FIGS, QUICK = ENV.settings, ENV.figs, ENV.quick
CACHE = RunCache(default_cache_dir())
CONSTRAINTS = ('dp',) if QUICK else ('dp', 'eo', 'ap')
# F-LD (non-private Lagrangian) separates the cost of privacy from that of the method; the paper-exact
# PF-LD (its epsilon is NOT a guarantee) is what the paper's own column ran
METHODS = paper.TABLE_METHODS + ('fld',)
PAPER_EXACT_METHODS = METHODS + (() if QUICK else ('pfld-paper',))
BANK = paper.DATASETS['bank']
HAVE_BANK = datasets.DATASETS[BANK].available_offline()
SWEEP_DATA = 'bank' if HAVE_BANK else 'compas'
pd.set_option('display.width', 200)
ENV.profile

# %% [markdown]
# ## Table 2 — Income (Adult, 45,222 rows, 50 features, groups by sex)
# Paper (mean (sd) of 5 folds), e.g. demographic parity: CLF 0.848 / 0.181, Z 0.827 / 0.039, A 0.789 / 0.044, M 0.792 / 0.063, PF-LD 0.799 / 0.019 (accuracy / violation).

# %%
# smoke: Income without the reductions baselines (Z, A), which COMPAS's table below runs
INCOME_METHODS = tuple(m for m in METHODS if m not in ('z', 'a')) if ENV.smoke else METHODS
income = paper.table2('income', constraints=CONSTRAINTS, methods=INCOME_METHODS, profile=PROFILE, cache=CACHE,
                      progress=True)
print(paper.format_table(income))

# %%
fig, side = paper.table2_figure(income, 'income')
save_figure(fig, FIGS / 'table2_income.png', data=side)
side

# %% [markdown]
# ## Table 2 — COMPAS (ProPublica, 6,172 rows, 10 features, groups by sex)
# Paper, demographic parity: CLF 0.683 / 0.121, Z 0.634 / 0.023, A 0.643 / 0.048, M 0.664 / 0.092, PF-LD 0.667 / 0.098.

# %%
compas = paper.table2('compas', constraints=CONSTRAINTS, methods=PAPER_EXACT_METHODS, profile=PROFILE,
                      cache=CACHE, progress=True)
print(paper.format_table(compas))

# %%
fig, side = paper.table2_figure(compas, 'compas')
save_figure(fig, FIGS / 'table2_compas.png', data=side)
side

# %% [markdown]
# ## Table 2 — Bank, M-Bank³, M-Bank⁵ (Kaggle Bank marketing, 11,162 rows, groups by age)
# Bank: 25-60 against the rest (2 groups); M-Bank³: 25-40 / 41-60 / the rest; M-Bank⁵: 25-33 / 34-40 / 41-48 / 49-60 / the rest. Paper, demographic parity on Bank: CLF 0.800 / 0.299, Z 0.780 / 0.030, A 0.772 / 0.030, M 0.784 / 0.131, PF-LD 0.793 / 0.126. Z handles two groups only (NA in the paper for M-Bank). M's flip-rate correction is derived for two groups; on M-Bank³ and M-Bank⁵ M runs with the uncorrected bound (column `m_correction`).

# %%
bank_tables = []
if HAVE_BANK:
    for group_by in ('age', 'age3', 'age5'):
        methods = PAPER_EXACT_METHODS if group_by == 'age' else tuple(m for m in METHODS if m != 'z')
        rows = paper.table2('bank', group_by=group_by, constraints=CONSTRAINTS, methods=methods, profile=PROFILE,
                            cache=CACHE, progress=True)
        print(paper.format_table(rows))
        name = paper.table_name('bank', group_by)
        fig, side = paper.table2_figure(rows, name)
        save_figure(fig, FIGS / f'table2_{name}.png', data=side)
        bank_tables.append(rows)
else:
    print('Bank is not installed here (dpfair data fetch bank --from PATH): its Table 2 rows are skipped')

# %% [markdown]
# ### Claim: PF-LD beats M on accuracy or on violation (paper: 27/30 cells, all data sets)
# Per cell, compared on the fold means; `better_either` is the paper's criterion.

# %%
verdict = paper.pfld_vs_m(pd.concat([income, compas, *bank_tables]))
print(f"PF-LD better than M on accuracy or violation in {int(verdict['better_either'].sum())}/{len(verdict)} "
      f"cells; on both in {int((verdict['better_accuracy'] & verdict['better_violation']).sum())}")
verdict

# %%
pd.concat([income, compas, *bank_tables]).query("method == 'pfld'")[['dataset', 'constraint', 'fold', 'epsilon', 'sigma_p', 'lambda_max_reached', 'privacy']]

# %% [markdown]
# ## Table 2 under the reproduction protocol (issue 36)
# The paper prints ε, δ, C_p = 10 and C_d = 5 and says it "has not performed a systematic model tuning"; everything else above is the toolkit's default. Before a cell is called "not reproduced", every method gets the same budget of **16 configurations** (`experiments.pfld_tuned.TABLE2_GRIDS`), chosen on **validation rows carved from each training fold** (20%, stratified by group × label) — never the test fold — and the choice is **refitted on the whole training fold and tested on the test fold**:
# * PF-LD: lr ∈ {0.05, 0.2} × epochs ∈ {10, 5} × C_p ∈ {10, 1} × C_d ∈ {5, 1} × λ_max ∈ {2, 0.5}, the half fraction that holds the printed configuration (every pair of changes and every four changes: each pair of hyperparameters is seen at all four combinations); every configuration is calibrated to ε = 1, so the chosen one's ε is 1.
# * CLF: lr ∈ {0.05, 0.01, 0.1, 0.2} × epochs ∈ {10, 5, 20, 40}; A and M: the reductions' bound γ, 16 values from 0.001 to 0.5; Z: the covariance threshold, 16 fractions from 0.001 to 1.
# * Selection: validation accuracy − validation violation for every fair method (CLF: validation accuracy). **Not private**: the validation rows are private training rows, read without noise (`tuning.SELECTION_PRIVACY`); the ε stated is the chosen run's own.
# * Verdict per cell: accuracy at most max(paper's sd, 0.02) below the printed one **and** violation at most that margin above it; *reproduces at the printed settings* (the printed configuration, the table above), else *after tuning*, else *does not reproduce within the budget*.

# %%
# quick: COMPAS only, three methods (the smoke run of the protocol)
TUNED_TABLES = [('compas', None, ('clf', 'm', 'pfld'))] if QUICK else [('income', None, paper.TABLE_METHODS),
                                                                     ('compas', None, paper.TABLE_METHODS)]
if HAVE_BANK and not QUICK:
    TUNED_TABLES += [('bank', 'age', paper.TABLE_METHODS), ('bank', 'age3', ('clf', 'a', 'm', 'pfld')),
                     ('bank', 'age5', ('clf', 'a', 'm', 'pfld'))]
tuned_tables, tuned_summaries = {}, []
for dataset, group_by, methods in TUNED_TABLES:
    # the full profile's runs are committed (notebooks/record_runs.py --study pfld-tuned): served, not trained again
    records = None if QUICK else RunRecords(FIGS / f'tuned_runs_{paper.table_name(dataset, group_by)}.json')
    tuned = pfld_tuned.tuned_table2(dataset, group_by=group_by, constraints=CONSTRAINTS, methods=methods, profile=PROFILE,
                               cache=CACHE, records=records)
    summary = reproduction.tuned_side_by_side(tuned)
    tuned_tables[tuned.dataset] = tuned
    tuned_summaries.append(summary)
    save_table(summary, FIGS / f'tuned_table2_{tuned.dataset}.csv')
    save_table(tuned.runs, FIGS / f'tuned_table2_runs_{tuned.dataset}.csv')
    save_table(tuned.chosen, FIGS / f'tuned_table2_chosen_{tuned.dataset}.csv')
    print(f'{tuned.dataset}:')
    print(reproduction.format_tuned_table(summary))
tuned_summary = pd.concat(tuned_summaries, ignore_index=True)
save_table(tuned_summary, FIGS / 'table2_verdicts.csv')
print(reproduction.verdict_counts(tuned_summary['verdict']))

# %% [markdown]
# PF-LD's rows, beside the paper and today's defaults, with the configuration most folds chose:

# %%
tuned_summary.query("method == 'pfld'")[['dataset', 'constraint', 'paper_accuracy', 'paper_violation', 'default_accuracy', 'default_violation', 'tuned_accuracy', 'tuned_accuracy_sd', 'tuned_violation', 'tuned_violation_sd', 'verdict', 'chosen_most_often', 'folds_choosing_it']].round(3)

# %% [markdown]
# Verdict counts per method (every cell the paper prints):

# %%
tuned_summary.groupby('method', sort=False)['verdict'].value_counts().unstack(fill_value=0)

# %% [markdown]
# ### "PF-LD beats M in 27/30 cells" at the printed and at the tuned configurations

# %%
beats_printed = paper.pfld_vs_m(pd.concat([t.defaults.assign(dataset=name) for name, t in tuned_tables.items()]))
beats_tuned = paper.pfld_vs_m(pd.concat([t.chosen for t in tuned_tables.values()]))
beats = beats_printed.merge(beats_tuned, on=['dataset', 'constraint'], suffixes=('_printed', '_tuned'))
wins = {which: int(beats[f'better_either_{which}'].sum()) for which in ('printed', 'tuned')}
claim_holds = {which: wins[which] >= 0.9 * len(beats) for which in wins}  # the paper: 90% (27 of 30)
beats_verdict = reproduction.three_valued(claim_holds['printed'], claim_holds['tuned'])
print(f"PF-LD better than M on accuracy or violation: {wins['printed']}/{len(beats)} cells at the printed "
      f"configuration, {wins['tuned']}/{len(beats)} tuned (paper: 90%) -> {beats_verdict}")
save_table(beats.assign(verdict=beats_verdict), FIGS / 'pfld_vs_m.csv')
beats

# %% [markdown]
# ## Figure 1 — violation and accuracy against ε, PF-LD and M
# Paper: the violation falls as ε grows (for PF-LD; "not obvious for M"), accuracy slightly decreases.

# %%
EPS = (0.5, 2.0) if QUICK else (0.1, 0.5, 1.0, 2.0, 5.0)
fig1 = paper.epsilon_sweep(SWEEP_DATA, epsilons=EPS, profile=PROFILE, cache=CACHE, progress=True)
fig = plotting.plot_sweep(fig1, hue='method', log_x=True, title=f'Figure 1 on {SWEEP_DATA} (demographic parity)')
save_figure(fig, FIGS / 'fig1_epsilon.png', data=fig1)
paper.sweep_summary(fig1, ['method', 'requested_epsilon'])

# %% [markdown]
# ### Figure 1 on Income (full profile: 20 runs on 36k rows)

# %%
fig1_income = paper.epsilon_sweep('income', epsilons=EPS[-1:] if ENV.smoke else EPS, profile=PROFILE, cache=CACHE,
                                  progress=True)
fig = plotting.plot_sweep(fig1_income, hue='method', log_x=True, title='Figure 1 on income (demographic parity)')
save_figure(fig, FIGS / 'fig1_epsilon_income.png', data=fig1_income)
display(paper.sweep_summary(fig1_income, ['method', 'requested_epsilon']))

# %% [markdown]
# ## Figures 2 and 3 — the primal clipping bound C_p
# Paper: the best trade-off at C_p ∈ [10, 20]; small C_p clips most group gradients (Fig. 3, right column), large C_p adds noise. Fig. 3's share of per-sample h-gradient norms above C_p is measured on the final model (1,000 training rows) and, during training, over the batches (`step_frac_clipped`).

# %%
CLIPS = (0.1, 10.0) if QUICK else (0.1, 1.0, 10.0, 20.0, 50.0)
EPS2 = (1.0,) if QUICK else (0.5, 1.0, 2.0)
fig2 = paper.clip_sweep(SWEEP_DATA, clips=CLIPS, epsilons=EPS2, profile=PROFILE, cache=CACHE, progress=True)
fig = plotting.plot_sweep(fig2, hue='clip_primal', palette='viridis',
                          title=f'Figure 2 on {SWEEP_DATA}: effect of C_p (demographic parity)')
save_figure(fig, FIGS / 'fig2_clip_primal.png', data=fig2)
paper.sweep_summary(fig2, ['clip_primal', 'requested_epsilon'])

# %%
fig3 = paper.fraction_above_table(fig2, epsilon=1.0)
fig = plotting.plot_fraction_above(fig3, title=f'Figure 3 on {SWEEP_DATA} (ε = 1)')
save_figure(fig, FIGS / 'fig3_fraction_above_clip.png', data=fig3)
fig2.filter(regex='clip_primal|requested_epsilon|median_h_grad|step_frac').groupby(['clip_primal', 'requested_epsilon']).mean()

# %% [markdown]
# ## Figure 4 — the dual clipping bound C_d, and Theorem 6's bias-variance bound against C_p
# For dp and eo, h is a probability (|h| ≤ 1): C_d ≥ 1 never clips, it only scales the dual noise. The sweep therefore uses accuracy parity (h = the loss, unbounded). With h = the loss, a large C_d makes the dual's signs noise: where they come out negative the Lagrangian *maximises* the population loss, which is unbounded, and the run diverges; such runs are kept as rows (`diverged_at_step`), counted in the summary's `diverged` column and left out of its means. Below it, Theorem 6 as printed (noise σ_p Δ_p with Eq. 7's Δ_p) against C_p on one batch of real per-sample gradients, beside a Monte Carlo of the error with the same noise.

# %%
CD = (0.1, 5.0) if QUICK else (0.1, 1.0, 5.0, 100.0)
fig4 = paper.dual_clip_sweep(SWEEP_DATA, clips=CD, epsilons=EPS2, profile=PROFILE, cache=CACHE,
                             progress=True)
fig = plotting.plot_sweep(fig4, hue='clip_dual', palette='magma',
                          title=f'Figure 4 on {SWEEP_DATA}: effect of C_d (accuracy parity)')
save_figure(fig, FIGS / 'fig4_clip_dual.png', data=fig4)
paper.sweep_summary(fig4, ['clip_dual', 'requested_epsilon'])

# %%
bv = paper.bias_variance_curve(SWEEP_DATA, profile=PROFILE, cache=CACHE)
fig = plotting.plot_theorem6_bound(bv)
save_figure(fig, FIGS / 'fig4_theorem6_bound.png', data=bv)
bv

# %% [markdown]
# ## Figure 5 — missing sensitive values
# A fraction of training rows does not report its group (they enter the population terms only). Paper: fewer missing values → smaller violations.

# %%
MISSING = (0.6, 0.0) if QUICK else (0.6, 0.4, 0.2, 0.0)
fig5 = paper.missing_sweep(SWEEP_DATA, missing_rates=MISSING, epsilons=EPS2, profile=PROFILE, cache=CACHE,
                           progress=True)
fig = plotting.plot_sweep(fig5, hue='missing_rate', palette='crest',
                          title=f'Figure 5 on {SWEEP_DATA}: missing group labels (demographic parity)')
save_figure(fig, FIGS / 'fig5_missing.png', data=fig5)
paper.sweep_summary(fig5, ['missing_rate', 'requested_epsilon'])

# %% [markdown]
# ## Figures 1-5 under the reproduction protocol
# The sweeps above start from the printed configuration. Here every seed's sweep starts from the configuration chosen on **its own** validation rows (20% of the seed's training split, the same 16-configuration budget as Table 2, at ε = 1; PF-LD and, for Figure 1, M), the swept parameter overriding it: Figures 1, 2, 3 and 5 from the choice under demographic parity, Figure 4 under accuracy parity. Each statement of §8.2-8.5 is tested on both (`verify.reproduction.figure_claims`: the test of each is in its docstring) and gets a three-valued verdict.

# %%
GRIDS = pfld_tuned.table2_grids(PROFILE)
sweep_choice = {kind: pfld_tuned.sweep_tuning(SWEEP_DATA, kind=kind, methods=('pfld', 'm') if kind == 'dp' else ('pfld',),
                                         profile=PROFILE, cache=CACHE) for kind in ('dp', 'ap')}
bases = {kind: pfld_tuned.tuned_bases(choice, GRIDS) for kind, choice in sweep_choice.items()}
save_table(pd.concat(sweep_choice.values(), ignore_index=True), FIGS / 'figures_tuning_runs.csv')
pd.DataFrame([{'constraint': kind, 'method': method, 'seed': seed, 'chosen': tuning.describe_configuration(config)}
              for kind, chosen in bases.items() for (method, seed), config in chosen.items()])

# %%
tuned_sweeps = {
    'fig1': paper.epsilon_sweep(SWEEP_DATA, epsilons=EPS, profile=PROFILE, cache=CACHE, bases=bases['dp']),
    'fig2': paper.clip_sweep(SWEEP_DATA, clips=CLIPS, epsilons=EPS2, profile=PROFILE, cache=CACHE, bases=bases['dp']),
    'fig4': paper.dual_clip_sweep(SWEEP_DATA, clips=CD, epsilons=EPS2, profile=PROFILE, cache=CACHE,
                                  bases=bases['ap']),
    'fig5': paper.missing_sweep(SWEEP_DATA, missing_rates=MISSING, epsilons=EPS2, profile=PROFILE, cache=CACHE,
                                bases=bases['dp'])}
for name, hue, palette in (('fig1', 'method', None), ('fig2', 'clip_primal', 'viridis'), ('fig4', 'clip_dual', 'magma'),
                           ('fig5', 'missing_rate', 'crest')):
    fig = plotting.plot_sweep(tuned_sweeps[name], hue=hue, palette=palette, log_x=name == 'fig1',
                              title=f'{name} on {SWEEP_DATA}, from the tuned configurations')
    save_figure(fig, FIGS / f'{name}_tuned.png', data=tuned_sweeps[name])
figure_verdicts = reproduction.figure_verdicts(reproduction.figure_claims({'fig1': fig1, 'fig2': fig2, 'fig4': fig4, 'fig5': fig5}),
                                        reproduction.figure_claims(tuned_sweeps))
save_table(figure_verdicts, FIGS / 'figure_claims.csv')
figure_verdicts[['figure', 'claim', 'holds_printed', 'holds_tuned', 'verdict', 'detail_printed', 'detail_tuned']]

# %%
print(CACHE.summary())

# %% [markdown]
# ## Findings (full profile, measured 2026-11-26; the shipped PF-LD: its public part on its own batch, ε = 1, δ = 1e-5)
# * **Baselines reproduce.** CLF on Income 0.849 / 0.192 (paper 0.848 / 0.181), on COMPAS 0.670 / 0.125 (0.683 / 0.121), on Bank 0.829 / 0.340 (0.800 / 0.299). Z, A and M are within 0.05 of the paper's accuracy in 37 of 39 cells (the two others: A under eo on M-Bank⁵ 0.695 vs 0.785 and on M-Bank³ 0.715 vs 0.783); M on Bank dp 0.793 / 0.079 (paper 0.784 / 0.131).
# * **PF-LD beats M in most cells (paper: 27/30) — fails: 6 of 15 cells, never on both.** The 6 are violation-only wins (COMPAS eo; Bank eo; M-Bank³ dp, eo; M-Bank⁵ dp, eo), each with 0.07–0.29 *lower* accuracy. On Income M is better on both in all three constraints (dp: PF-LD 0.793 / 0.040 vs M 0.831 / 0.023).
# * **PF-LD on Bank does not learn.** Its accuracy is 0.53–0.66 on every Bank row (majority rate 0.526; paper 0.79–0.83), with σ_p = 4.8 from the PLD calibration at ε = 1 (8,930 training rows, q = 0.029, 349 steps). The paper-exact variant (its ε not a guarantee) calibrates σ_p = 3.6 and is no better (Bank dp 0.579). Non-private F-LD reaches 0.810 / 0.058 on Bank dp, so the gap is the noise the guarantee needs, not the Lagrangian method. The paper's Bank numbers are not reachable at the printed settings (C_p = 10, b = 256, 10 epochs assumed: the paper gives none).
# * **Fig. 1 on Bank — violation falls as ε grows: fails for PF-LD.** 0.018, 0.122, 0.214, 0.094, 0.048 at ε = 0.1 … 5 with accuracy 0.52–0.66 (near-constant classifiers, whose violation is small). M's violation does fall (0.328 → 0.011 at ε = 2, 0.045 at 5) at 0.79–0.82 accuracy. On Income (second figure) PF-LD's violation is not monotone either.
# * **Fig. 2/3 on Bank — C_p ∈ [10, 20] best: not supported.** The best accuracy is at C_p = 0.1 and 1 with ε = 2 (0.733 and 0.703); C_p = 10 gives 0.596 / 0.661 / 0.573 at ε = 0.5 / 1 / 2.
# * **Fig. 4 on Bank (C_d, accuracy parity).** C_d = 1 is the best trade-off at ε = 2 (0.710 / 0.087); C_d = 100 diverges in 3 of 6 runs (ε = 0.5 one seed, ε = 2 both): noisy dual signs make the Lagrangian maximise the loss.
# * **Fig. 5 on Bank — fewer missing values, smaller violation: fails.** At ε = 0.5, 60 / 40 / 20 / 0% missing give violation 0.007 / 0.031 / 0.087 / 0.122 (the opposite order) while accuracy rises 0.530 → 0.596; at ε = 1 and 2 there is no order.
