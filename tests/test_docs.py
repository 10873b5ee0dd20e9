"""The reference docs regenerate from the code: docs/build.py --check passes and every
algorithm page lists every run-config key of its settings class."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
import build  # noqa: E402


def test_docs_are_up_to_date():
    r = subprocess.run([sys.executable, str(ROOT / "docs" / "build.py"), "--check"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("algorithm", sorted(build.ALGORITHMS))
def test_every_run_config_key_is_on_its_page(algorithm):
    import fedcausal_flwr.strategies as strategies
    page = (ROOT / "docs" / "algorithms" / f"{algorithm}.md").read_text()
    settings = getattr(strategies, build.ALGORITHMS[algorithm][1])
    missing = [k for k in settings.keys() if f"| `{k}` |" not in page]
    assert not missing, f"{algorithm}.md lacks {missing}"
    for phase in getattr(__import__("fedcausal_flwr.clients", fromlist=["x"]),
                         build.ALGORITHMS[algorithm][2]).phases:
        assert f"`train.{phase}`" in page
