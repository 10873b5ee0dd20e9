#!/usr/bin/env bash
# Refresh constraints.txt on purpose: install the package with [all,dev] into a fresh venv from
# pyproject.toml's ranges alone (the CPU torch first), and pin what pip resolved. Then run
# `bash scripts/test.sh` (which installs those pins) before committing the new file.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"${PYTHON:-python3}" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip
"$tmp/venv/bin/python" -m pip install -q "torch==2.13.0"
"$tmp/venv/bin/python" -m pip install -q -e ".[all,dev]"
{
    echo "# Every distribution the suite ran on: scripts/setup.sh installs these versions."
    echo "# Made by scripts/constraints.sh on $(date -u +%Y-%m-%d) (pip's resolution of pyproject.toml)."
    "$tmp/venv/bin/python" -m pip freeze --exclude-editable | grep -v '^#' | sed 's/+cpu$//'
} > constraints.txt
echo "constraints.txt: $(grep -vc '^#' constraints.txt) pins"
