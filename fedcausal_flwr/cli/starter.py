"""Starter Apps: one per algorithm, written from the package's own examples.

``python -m fedcausal_flwr new fdbnl my-app`` (:func:`main`) copies ``examples/fdbnl``
(shipped in the wheel as ``fedcausal_flwr/_examples``; read from the checkout's ``examples/``
in a source tree) into ``my-app`` and names the project after the folder, since ``flwr new``
needs the network. The examples are the one source of every template.

An example's ClientApp reads the CSV its node config names (``data-path``); a node given none
makes the example's own data for its ``partition-id`` instead
(:func:`fedcausal_flwr.data.node_context`), so the App
runs unchanged in a simulation and from a FAB, which carries code and config, not CSV files.

An example's pyproject declares every key of its algorithm's settings class in the family's
section (:func:`completed_pyproject`, generated from the class, so neither the examples nor a
starter drift from it; a test checks the examples are current, :func:`refresh_examples`
rewrites them), and its ServerApp builds the settings with ``from_run_config``: prior
knowledge, replicas and penalty selection work in a starter App as in the package's own.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tomllib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # fedcausal_flwr/
SKIP = {"outputs", ".flwr", "__pycache__", ".venv", ".ruff_cache", ".pytest_cache"}
"""Folder names never copied from an example (results, Flower homes, caches)."""
NAME_RULE = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,31}")
"""Flower's rule for an App (and its folder) name: ``flwr build`` refuses other names."""


def templates_dir() -> Path:
    """The examples folder: the wheel's ``fedcausal_flwr/_examples``, else the checkout's
    ``examples/``."""
    for folder in (PACKAGE / "_examples", PACKAGE.parent / "examples"):
        if (folder / "fdbnl" / "pyproject.toml").is_file():
            return folder
    raise FileNotFoundError(f"no examples beside {PACKAGE}: a broken install?")


def algorithms() -> list[str]:
    """The algorithms with a starter App (every registered one)."""
    from fedcausal_flwr.registry import ALGORITHMS

    return list(ALGORITHMS)


def template(algorithm: str) -> Path:
    """The example folder that is ``algorithm``'s template (a ValueError lists them)."""
    key = str(algorithm).strip().lower()
    if key not in algorithms():
        raise ValueError(f"no starter App for {algorithm!r}; one of {', '.join(algorithms())}")
    return templates_dir() / key


def app_name(target: Path) -> str:
    """The App's project name: ``target``'s folder name, which must follow Flower's rule (a
    letter, then letters, digits and hyphens, 32 at most), else ``flwr build`` refuses it."""
    name = Path(target).resolve().name
    if not NAME_RULE.fullmatch(name):
        raise ValueError(f"folder name {name!r} is no Flower App name: start with a letter, "
                         "then letters, digits and hyphens only, 32 characters at most "
                         f"(e.g. {re.sub('[^A-Za-z0-9-]', '-', name).strip('-') or 'my-app'!r})")
    return name


def template_files(folder: Path) -> list[Path]:
    """An example's files, relative to it, without results, Flower homes and caches."""
    return sorted(p.relative_to(folder) for p in folder.rglob("*")
                  if p.is_file() and not SKIP & set(p.relative_to(folder).parts)
                  and p.suffix != ".pyc")


def renamed_pyproject(text: str, name: str) -> str:
    """``text`` (an example's pyproject.toml) with ``[project] name = name``."""
    out, count = re.subn(r'(?m)^name = "[^"]*"$', f'name = "{name}"', text, count=1)
    if count != 1 or tomllib.loads(out)["project"]["name"] != name:
        raise ValueError("template pyproject.toml has no [project] name line to set")
    return out


EXAMPLE_ALGORITHMS = {"plant": "fdbnl"}
"""Examples named otherwise than the algorithm whose settings their section declares."""


def example_algorithm(folder: Path) -> str | None:
    """The algorithm whose settings ``folder`` (an example) declares: its name, or
    :data:`EXAMPLE_ALGORITHMS`'s (None: none registered)."""
    name = Path(folder).name
    name = EXAMPLE_ALGORITHMS.get(name, name)
    return name if name in algorithms() else None


def completed_pyproject(text: str, algorithm: str) -> str:
    """``text`` (an App's pyproject.toml) whose ``[tool.flwr.app.config.<section>]`` declares
    every key of ``algorithm``'s settings class in that section: the keys already there keep
    their values and comments, the others are appended at the class's defaults (the table is
    added when missing). Shared keys (``min-nodes`` ...) are not added."""
    from fedcausal_flwr import registry
    from fedcausal_flwr.cli.runconfig import toml_value

    alg = registry.get(algorithm)
    prefix = alg.section + "."
    defaults = {k[len(prefix):]: v for k, v in alg.settings_class()().app_config().items()
                if k.startswith(prefix)}
    table = (tomllib.loads(text).get("tool", {}).get("flwr", {}).get("app", {})
             .get("config", {}).get(alg.section, {}))
    missing = [f"{k} = {toml_value(v)}" for k, v in defaults.items() if k not in table]
    if not missing:
        return text
    lines = text.splitlines()
    header = re.compile(rf"^\[tool\.flwr\.app\.config\.{re.escape(alg.section)}\]")
    start = next((i for i, line in enumerate(lines) if header.match(line)), None)
    added = [f"# the other keys of {alg.settings_class().__name__}, at its defaults "
             f"(docs/algorithms/{algorithm}.md)", *missing]
    if start is None:
        lines += ["", f"[tool.flwr.app.config.{alg.section}]", *added[1:]]
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")),
                   len(lines))
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        lines[end:end] = added
    out = "\n".join(lines) + "\n"
    tomllib.loads(out)  # still TOML
    return out


def refresh_examples(folder: Path | None = None) -> list[Path]:
    """Rewrite each example's pyproject.toml with :func:`completed_pyproject`; the files
    changed (a test asks for none)."""
    changed = []
    for example in sorted(Path(folder or templates_dir()).iterdir()):
        path, alg = example / "pyproject.toml", example_algorithm(example)
        if alg is None or not path.is_file():
            continue
        text = path.read_text()
        if (new := completed_pyproject(text, alg)) != text:
            path.write_text(new)
            changed.append(path)
    return changed


def write_app(algorithm: str, target: Path | str, *, force: bool = False) -> list[Path]:
    """Write ``algorithm``'s starter App into ``target``; returns the files written.

    ``target`` must be empty or absent unless ``force`` (files are then overwritten, others
    kept). The project takes the folder's name; the README's ``examples/<algorithm>`` paths
    become the folder's.
    """
    source = template(algorithm)
    target = Path(target)
    name = app_name(target)
    if target.exists() and not target.is_dir():
        raise ValueError(f"{target} is a file, not a folder")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise ValueError(f"{target} is not empty: pick a new folder, or pass --force to "
                         "overwrite the starter's files in it")
    written = []
    for rel in template_files(source):
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if rel.name == "pyproject.toml" and len(rel.parts) == 1:
            dest.write_text(completed_pyproject(
                renamed_pyproject((source / rel).read_text(), name), source.name))
        elif rel.name == "README.md" and len(rel.parts) == 1:
            dest.write_text((source / rel).read_text()
                            .replace(f"examples/{source.name}", str(target)))
        else:
            shutil.copyfile(source / rel, dest)
        written.append(dest)
    return written


NEW_HELP = """``python -m fedcausal_flwr new <algorithm> DIR``: write a starter Flower App.

``flwr new`` downloads its templates from the network; this writes one of the package's own
examples into ``DIR``, named after it. ``new --list`` lists the algorithms. Exits 2 on a usage
error (unknown algorithm, a non-empty ``DIR`` without ``--force``, a folder name Flower
refuses).
"""


def parser() -> argparse.ArgumentParser:
    """The command line: ``new [--list] [--force] <algorithm> DIR``."""
    ap = argparse.ArgumentParser(prog="python -m fedcausal_flwr", description=NEW_HELP,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    new = sub.add_parser("new", help="write a starter Flower App for one algorithm")
    names = algorithms()
    new.add_argument("algorithm", nargs="?",
                     help=", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1
                     else "".join(names))
    new.add_argument("dir", nargs="?", type=Path, help="the App's folder (its name names it)")
    new.add_argument("--list", action="store_true", help="list the algorithms and exit")
    new.add_argument("--force", action="store_true",
                     help="write into a non-empty DIR (the starter's files are overwritten)")
    return ap


def next_steps(algorithm: str, target: Path) -> str:
    """What to run once the App is written."""
    return (f"Wrote the {algorithm} starter App to {target}. Next:\n"
            f"  python -m fedcausal_flwr.cli.launch simulate --app {target} --nodes 2"
            "   # each node makes the example's data\n"
            f"  flwr build --app {target}                                  # its FAB\n"
            f"  {target}/README.md: the setting, your own CSVs (node config data-path)")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    ap = parser()
    args = ap.parse_args(argv)
    if args.list:
        for name in algorithms():
            print(name)
        return 0
    if args.algorithm is None or args.dir is None:
        ap.error(f"new needs an algorithm and a DIR; algorithms: {', '.join(algorithms())}")
    try:
        write_app(args.algorithm, args.dir, force=args.force)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(next_steps(args.algorithm.strip().lower(), args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
