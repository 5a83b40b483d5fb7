"""The package a user installs beside their own torch: lower bounds in pyproject.toml, exact pins only in
constraints.txt, and the testing kit with its pytest plugin working from the built wheel in an environment
that has no torch, pandas, matplotlib, seaborn or fairlearn."""

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
#: What the kit needs (numpy, scipy, scikit-learn's learned statistic, hypothesis, pytest), with their own
#: requirements: the user's environment of the slow test below.
KIT_DISTRIBUTIONS = ("numpy", "scipy", "scikit-learn", "hypothesis", "pytest")
#: torch releases a user may already have: the package's requirement must keep each of them.
USER_TORCH = ("2.2.2", "2.5.1", "2.7.0", "2.13.0")

USER_TESTS = '''
import numpy as np
import pytest


@pytest.mark.dp(epsilon=1.0, relation="queries", data=np.zeros(3))
def test_laplace_sum_with_its_sensitivity(dp):
    dp.assert_private(lambda d, rng: float(np.sum(d) + rng.laplace(scale=3.0)))  # 3 entries move by <= 1


@pytest.mark.dp(epsilon=1.0, relation="queries", data=np.zeros(3))
def test_laplace_sum_with_one_entrys_sensitivity(dp):
    dp.assert_private(lambda d, rng: float(np.sum(d) + rng.laplace(scale=1.0)))  # true epsilon 3


def test_no_heavy_library_is_here():
    import importlib.util

    assert [m for m in ("torch", "pandas", "matplotlib", "seaborn", "fairlearn") if importlib.util.find_spec(m)] == []
'''


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_dependencies_are_lower_bounds_and_torch_is_pinned_only_by_the_constraints_file():
    """``pip install dpfair_analysis`` keeps a user's torch: no exact pin among the dependencies (every one a
    lower bound), each of :data:`USER_TORCH` satisfies torch's, and the exact pin the toolkit's own machines need
    (the local CPU wheel) is in constraints.txt, which ``make setup`` passes."""
    requirements = [Requirement(text) for text in _pyproject()["project"]["dependencies"]]
    for requirement in requirements:
        assert all(spec.operator == ">=" for spec in requirement.specifier), requirement
    torch = next(r for r in requirements if r.name == "torch")
    assert all(torch.specifier.contains(Version(version)) for version in USER_TORCH), torch
    pins = [Requirement(line) for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert [str(p.specifier) for p in pins if p.name == "torch"] == ["==2.13.0"]
    assert "constraints.txt" in (ROOT / "Makefile").read_text()


def _link_distributions(names: tuple[str, ...], into: Path) -> list[str]:
    """Symbolic links in ``into`` to the installed files of ``names`` and of everything they require (markers
    evaluated without extras): a site directory holding those distributions and nothing else."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        distribution = importlib.metadata.distribution(name)
        todo += [r.name for r in map(Requirement, distribution.requires or [])
                 if r.marker is None or r.marker.evaluate({"extra": ""})]
        for top in {Path(str(f)).parts[0] for f in distribution.files or []}:
            source, target = Path(distribution.locate_file(top)), into / top
            if top != ".." and not top.endswith(".pth") and source.exists() and not target.exists():
                target.symlink_to(source)
    return sorted(seen)


@pytest.mark.slow
def test_the_wheel_installs_beside_a_torch_free_environment_and_its_plugin_audits(tmp_path):
    """Build the wheel from the source files, install it (no dependencies) into a fresh venv whose only other
    packages are the kit's (:data:`KIT_DISTRIBUTIONS`, linked from this environment): a user's project without
    torch. pytest loads the plugin from the wheel's entry point; a correct ``@pytest.mark.dp`` test passes, an
    under-noised one is refuted (status 1 in the plugin's summary), and no heavy library is importable."""
    source = tmp_path / "source"
    shutil.copytree(ROOT / "dpfair_analysis", source / "dpfair_analysis", ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / part, source / part)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(source)], check=True, timeout=600)
    wheel = next(wheels.glob("dpfair_analysis-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        metadata = Parser().parsestr(archive.read(next(n for n in archive.namelist()
                                                       if n.endswith(".dist-info/METADATA"))).decode())
    torch = next(Requirement(r) for r in metadata.get_all("Requires-Dist") if Requirement(r).name == "torch")
    assert all(torch.specifier.contains(Version(v)) for v in USER_TORCH), torch
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=300)
    python = env / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    links = tmp_path / "links"
    links.mkdir()
    linked = _link_distributions(KIT_DISTRIBUTIONS, links)
    assert "torch" not in linked and "pandas" not in linked
    (site / "kit_environment.pth").write_text(f"{links}\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "-q", str(wheel)], check=True, timeout=300)
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_mine.py").write_text(USER_TESTS)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST"))}
    out = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--dp-budget", "quick"],
                         cwd=project, check=False, capture_output=True, text=True, timeout=600, env=environ)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "2 passed" in out.stdout and "1 failed" in out.stdout, out.stdout[-3000:]
    assert "test_laplace_sum_with_one_entrys_sensitivity" in out.stdout.split("short test summary")[1]
    assert "status: 1 consistent (0), 1 refuted (1)" in out.stdout, out.stdout[-3000:]
