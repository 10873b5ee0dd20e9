"""The reference docs regenerate from the code: docs/build.py --check passes and every
algorithm page lists every run-config key of its settings class."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))
import build  # noqa: E402


@pytest.mark.integration
def test_docs_are_up_to_date():
    r = subprocess.run([sys.executable, str(ROOT / "docs" / "build.py"), "--check"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("algorithm", sorted(build.ALGORITHMS))
def test_every_run_config_key_is_on_its_page(algorithm):
    page = (ROOT / "docs" / "algorithms" / f"{algorithm}.md").read_text()
    settings = build.ALGORITHMS[algorithm].settings_class()
    missing = [k for k in settings.keys() if f"| `{settings.app_key(k)}` |" not in page]
    assert not missing, f"{algorithm}.md lacks {missing}"
    for phase in getattr(__import__("fedcausal_flwr.clients", fromlist=["x"]),
                         build.ALGORITHMS[algorithm].client).phases:
        assert f"`train.{phase}`" in page


@pytest.mark.integration
@pytest.mark.parametrize("algorithm", sorted(build.ALGORITHMS))
def test_the_wire_table_names_every_message_that_crosses_the_wire(algorithm):
    """A small in-process run: each message type the server sends (FedCF with its query) is
    named in the page's "What crosses the wire" section, and so is each array dtype."""
    from fedcausal_flwr.appconfig import glue
    from fedcausal_flwr.client_app import app
    from fedcausal_flwr.testing import InProcessGrid
    from tests.helpers.faults import SMALL

    rc, k = SMALL[algorithm]
    if algorithm == "fedcf":
        rc = {**rc, "statespace.ss-cf-delta": "1.0,0.0", "statespace.ss-target": "innovation"}
    grid = InProcessGrid(app, k, rc)
    assert glue(algorithm).strategy(algorithm, rc).start(grid=grid).status == "completed"
    page = (ROOT / "docs" / "algorithms" / f"{algorithm}.md").read_text()
    wire = page.split("## What crosses the wire")[1].split("\n## ")[0]
    kinds = {m.metadata.message_type for m in grid.sent} - {"query.info"}
    assert algorithm != "fedcf" or "train.ss_query" in kinds
    missing = [t for t in sorted(kinds) if f"`{t}`" not in wire
               and f"`_{t.split('_', 1)[-1]}`" not in wire]
    assert not missing, f"{algorithm}.md's wire table lacks {missing}"
    dtypes = {str(a.dtype) for m in grid.sent + grid.received
              for rec in m.content.array_records.values() for a in rec.values()}
    named = {"float64": ("float64", "float"), "uint8": ("uint8",), "uint64": ("uint64",),
             "int64": ("int64",)}
    assert all(any(n in wire for n in named.get(d, (d,))) for d in dtypes), (dtypes, wire)


@pytest.mark.parametrize("algorithm", sorted(build.ALGORITHMS))
def test_make_md_describes_every_key_of_make(algorithm):
    """docs/api/make.md lists each argument ``make(context)`` may return for ``algorithm``
    (its client's constructor, less what the node supplies), each described."""
    import inspect

    from flwr.app import Context, RecordDict

    page = (ROOT / "docs" / "api" / "make.md").read_text()
    section = page.split(f"## `{algorithm}` (")[1].split("\n## ")[0]
    cls = build.ALGORITHMS[algorithm].client_class()
    ctx = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={})
    node = {"self", "partition_id", "num_partitions", *cls.context_arguments(ctx)}
    assert "the node supplies `partition_id`, `num_partitions`" in section
    for name in inspect.signature(cls.__init__).parameters:
        if name not in node:
            assert f"| `{name}` |" in section, f"make.md: {algorithm} lacks {name}"
    assert "*(undocumented)*" not in section


def test_the_public_readers_and_plots_are_in_the_api_docs():
    data = (ROOT / "docs" / "api" / "data.md").read_text()
    for name in ("node_csv", "lagged", "node_data", "read_csv"):
        assert f"### `{name}`" in data
    assert "## `fedcausal_flwr.plots`" in (ROOT / "docs" / "api" / "plots.md").read_text()
