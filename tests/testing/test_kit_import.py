"""The kit's core imports and audits without torch; its import is cheap (measured, printed, never asserted)."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BLOCK_TORCH = textwrap.dedent("""
    import importlib.abc, sys
    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("torch is not importable in this test")
    sys.meta_path.insert(0, NoTorch())
""")


def run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", BLOCK_TORCH + textwrap.dedent(code)], check=False, capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_core_imports_and_audits_without_torch():
    result = run("""
        import json, sys, time
        start = time.perf_counter()
        import dpfair_analysis.testing as kit
        import_seconds = time.perf_counter() - start
        kit.audit, kit.assert_sensitivity, kit.pairs  # the core modules (numpy, hypothesis), loaded on first use
        core_seconds = time.perf_counter() - start
        import numpy as np
        for name in kit.__all__:
            getattr(kit, name)  # every export loads without torch
        r = kit.audit(lambda d, rng: d[0] + rng.laplace(), 1.0, relation="queries", data=np.ones(2), trials=200,
                      budget=kit.Budget("t", 50, 100, 200, 1, 2))
        kit.assert_sensitivity(lambda d: float(np.clip(d, -1, 1).sum()), 2.0, relation="replace-one", norm=1,
                               data=np.array([-2.0, 0.0, 2.0]), examples=20)
        import dpfair_analysis.testing.plugin, dpfair_analysis.testing.zoo
        print(json.dumps({"import_seconds": import_seconds, "core_seconds": core_seconds,
                          "torch": "torch" in sys.modules,
                          "consistent": r.consistent}))
    """)
    print(f"import dpfair_analysis.testing: {result['import_seconds'] * 1000:.0f} ms; with audit, "
          f"assert_sensitivity and the strategies loaded: {result['core_seconds'] * 1000:.0f} ms")
    assert result["torch"] is False and result["consistent"] is True


def test_the_torch_adapter_says_it_needs_torch():
    result = run("""
        import json
        try:
            import dpfair_analysis.testing.torch
            print(json.dumps({"error": None}))
        except ImportError as error:
            print(json.dumps({"error": str(error)}))
    """)
    assert "torch" in result["error"]
