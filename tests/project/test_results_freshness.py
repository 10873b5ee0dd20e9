"""The code check of the results tables (``simulations/tables.py``, ``harness.code_record``).

A results JSON records the hash of every module it ran; a table says whether that code has
changed since. The hash ignores docstrings and comments and sees any change of what runs; the
marks in ``simulations/RESULTS.md`` and ``results/*.md`` must say what the records give (run
``python simulations/tables.py`` after a code change: it marks, it does not rerun).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SIM = Path(__file__).resolve().parents[2] / "simulations"
sys.path.insert(0, str(SIM))
import harness  # noqa: E402

CODE = '''"""Doc."""

def f(x):
    """Doc of f."""
    # a comment
    return x + 1
'''


def test_module_hash_ignores_docstrings_and_comments_not_code(tmp_path):
    a, b, c = (tmp_path / f"{n}.py" for n in "abc")
    a.write_text(CODE)
    b.write_text(CODE.replace("Doc of f.", "Another doc.").replace("# a comment", "# other"))
    c.write_text(CODE.replace("x + 1", "x + 2"))
    assert harness.module_hash(a) == harness.module_hash(b) != harness.module_hash(c)


def test_changed_modules_names_what_changed(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "CHECKOUT", tmp_path)
    (tmp_path / "m.py").write_text(CODE)
    (tmp_path / "n.py").write_text(CODE)
    meta = {"code": {"modules": {"m.py": harness.module_hash(tmp_path / "m.py"),
                                 "n.py": harness.module_hash(tmp_path / "n.py"),
                                 "gone.py": "0"}}}
    assert harness.changed_modules(meta) == ["gone.py"]
    (tmp_path / "n.py").write_text(CODE.replace("x + 1", "x - 1"))
    assert harness.changed_modules(meta) == ["n.py", "gone.py"]
    assert harness.changed_modules({"finished": "2026-01-01"}) is None  # no record: unknown


def test_a_result_records_the_modules_it_ran():
    rec = harness.code_record()
    assert "simulations/harness.py" in rec["modules"]
    assert rec["modules"]["simulations/harness.py"] == harness.module_hash(SIM / "harness.py")


def test_code_check_line_says_current_stale_or_unverified(tmp_path, monkeypatch):
    import tables

    monkeypatch.setattr(harness, "CHECKOUT", tmp_path)
    (tmp_path / "m.py").write_text(CODE)
    good = {"meta": {"finished": "2026-12-01 10:00:00",
                     "code": {"modules": {"m.py": harness.module_hash(tmp_path / "m.py")}}}}
    bad = {"meta": {"finished": "2026-12-01 10:00:00", "code": {"modules": {"m.py": "x"}}}}
    old = {"meta": {"finished": "2026-11-01 10:00:00"}}
    paths = []
    for name, payload in (("good", good), ("bad", bad), ("old", old)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(payload))
    assert "current" in tables.code_check(paths[:1]) and "STALE" not in \
        tables.code_check(paths[:1])
    line = tables.code_check(paths)
    assert "**STALE**" in line and "m.py" in line and "unverified" in line
    assert tables.code_check([tmp_path / "runs.jsonl"]).count("unverified") == 1


def test_the_marks_say_what_the_records_give():
    """Every marked table of RESULTS.md and results/*.md carries the code check its result
    files give today."""
    import tables

    known, wrong = tables.all_tables(), []
    for path in tables.markdown_files():
        for name, line in tables.checks_in(path.read_text()).items():
            if line != tables.rendered(known[name])[1]:
                wrong.append(f"{path.name}: {name}")
    assert not wrong, ("code checks out of date (run python simulations/tables.py): "
                       + ", ".join(wrong))
