"""Issues 20 and 35's security rows stay true (``simulations/results/reliability.md``, table
``security``, made by ``simulations/bench/security.py``).

The script's probes cover every row of both issues (issue 20's, then issue 35's, whose
"before" says so); the committed ``security.json`` holds one row per probe and the table shows
it; a fresh run of each cheap probe says what the committed row says (rerun the script when a
defence changes); every probe is handled except the known gaps named here; and a probe does
see a defence taken away, without repeating what leaked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.sims import SIM, script

security = script("security")

#: issue 20's rows -> the probes that repeat them
ISSUE_ROWS = {
    "a run-config path (/etc/passwd) on nodes without opt-in": ["run-config-path"],
    "a node's own CSV with a bad cell": ["bad-cell"],
    "/dev/zero as data path": ["dev-zero"],
    "an oversize and a too wide CSV": ["oversize-file", "wide-file"],
    "absurd sizes and a negative seed": [
        "size:dbn.lags", "size:iv.iv-n", "size:dbn.samples-per-client", "size:statespace.ss-t",
        "size:dbn.num-rounds", "size:seed"],
    "an unknown run-config key in process": ["unknown-key-app", "unknown-key-library"],
    "a run-name out of outputs": ["run-name"],
    "VFedCD consent from the run config for own-data parties": ["vfedcd-consent"],
    "late discovery and a late reply": ["late-discovery", "late-round"],
    "a VFedCD reply without its metrics record": ["vfedcd-no-metrics"],
    "the result.json checkpoint cost": ["checkpoint-cost"],
    "impersonation of a bound partition": ["impersonation"],
}
#: issue 35's rows (found at 3c8cd83) -> the probes that repeat them, after issue 20's
ISSUE_35_ROWS = {
    "dbn.variables=union, a node listing 10**5 variable names": ["node-names-count"],
    "names of 100k characters": ["node-name-length"],
    "a PSI party reordering at its hop; random or repeated points; 10**7 IDs": [
        "psi-reorder", "psi-points", "psi-set-size"],
    "a require chain of ~1,000 edges": ["knowledge-chain"],
    "a knowledge file with tier level nan; one name at two levels": ["knowledge-tiers"],
    "nan in dbn.lambda-path/dbn.tau-path; a 10**5-value tau-path": ["number-lists"],
    "--knowledge /dev/zero or a 200 MB file": ["knowledge-file"],
    "outputs naming an absolute folder elsewhere; an unwritable outputs": [
        "outputs-elsewhere", "outputs-unwritable"],
    "inf timeouts and dbn.lambda-w=inf": ["inf-keys"],
}
#: probes that report "not handled" today, and why (the table says so too); none now
KNOWN_GAPS: set[str] = set()
CHEAP = [name for name, p in security.PROBES.items() if p.cheap]


@pytest.fixture(scope="module")
def committed() -> dict:
    """The committed security.json."""
    return json.loads((SIM / "results" / "security.json").read_text())


def secrets() -> list[str]:
    """What no probe's words may repeat: the bad cell's token and /etc/passwd's lines."""
    return [security.SECRET, *security.file_lines(security.PASSWD)]


def test_the_probes_cover_every_row_of_the_issues():
    rows = [*ISSUE_ROWS.values(), *ISSUE_35_ROWS.values()]
    assert [n for names in rows for n in names] == list(security.PROBES)
    issue_35 = {n for names in ISSUE_35_ROWS.values() for n in names}
    for name, p in security.PROBES.items():  # the before column says whose finding it was
        assert p.before.startswith(security.ISSUE_35) == (name in issue_35), name
    assert KNOWN_GAPS <= set(security.PROBES)
    assert "checkpoint-cost" not in CHEAP and len(CHEAP) == len(security.PROBES) - 1


def test_the_committed_json_has_every_probe_and_the_table_shows_it(committed):
    rows = committed["rows"]
    assert [r["name"] for r in rows] == list(security.PROBES)  # a full run, this script's
    for r in rows:
        p = security.PROBES[r["name"]]
        assert (r["probe"], r["before"]) == (p.what, p.before), r["name"]
    summ = committed["summary"]
    assert summ["probes"] == len(rows)
    assert summ["handled"] == sum(r["handled"] for r in rows)
    assert summ["not_handled"] == {r["name"]: r["now"] for r in rows if not r["handled"]}
    md = (SIM / "results" / "reliability.md").read_text()
    block = re.search(r"<!-- table:security -->\n(.*?)<!-- /table -->", md, re.DOTALL)
    assert block is not None, "reliability.md has no security table"
    shown = re.sub(r"\*Code check:[^\n]*\n", "", block.group(1))  # tables.py's freshness line
    assert shown.rstrip("\n") == security.table_security().rstrip("\n")
    assert "<!-- table:reliability -->" in md  # the fault table is kept


def test_every_probe_is_handled_but_the_known_gaps(committed):
    gaps = {r["name"] for r in committed["rows"] if not r["handled"]}
    assert gaps == KNOWN_GAPS
    for r in committed["rows"]:
        text = r["now"] + r["detail"]
        assert not any(s in text for s in secrets()), r["name"]  # nothing leaked, redacted


@pytest.mark.integration
@pytest.mark.parametrize("name", CHEAP)
def test_a_fresh_probe_says_what_the_committed_row_says(committed, name):
    row = security.run_probe(security.PROBES[name])
    old = next(r for r in committed["rows"] if r["name"] == name)
    assert (row["now"], row["handled"]) == (old["now"], old["handled"]), row["detail"]
    assert row["handled"] == (name not in KNOWN_GAPS), row["now"]
    assert not any(s in row["now"] + row["detail"] for s in secrets())


# ---- the probes see a defence taken away ---------------------------------------------------
def test_without_the_nodes_opt_in_check_the_path_probe_fails(monkeypatch):
    from fedcausal_flwr.data import nodefiles

    monkeypatch.setattr(nodefiles, "allow_run_config_paths", lambda *a, **k: None)
    row = security.run_probe(security.PROBES["run-config-path"])
    assert not row["handled"] and row["now"].startswith("NOT HANDLED"), row["now"]
    assert "did not refuse naming dbn.data-path" in row["now"]


@pytest.mark.integration
def test_a_leaking_cell_error_fails_the_probe_and_is_redacted(monkeypatch):
    from fedcausal_flwr.data import csvdata

    monkeypatch.setattr(csvdata, "logged", lambda message, detail: f"{message}: {detail}")
    row = security.run_probe(security.PROBES["bad-cell"])
    assert not row["handled"], row["now"]
    assert "the cell's text is in" in row["now"] and "result.json" in row["now"]
    assert security.SECRET not in row["now"] + row["detail"]
    assert "<redacted>" in row["detail"]


def test_a_run_name_that_escapes_fails_its_probe(monkeypatch):
    from fedcausal_flwr import appconfig, results

    monkeypatch.setattr(appconfig, "check_run_name", str)
    monkeypatch.setattr(results, "inside", lambda directory, root: Path(directory))
    row = security.run_probe(security.PROBES["run-name"])
    assert not row["handled"], row["now"]


def test_a_psi_hop_left_unproved_fails_its_probe(monkeypatch):
    from fedcausal_flwr.secure import psi

    monkeypatch.setattr(psi, "hop_proof_ok", lambda *a: True)
    row = security.run_probe(security.PROBES["psi-reorder"])
    assert not row["handled"], row["now"]
    assert "did not stop naming the party, its hop" in row["now"]
