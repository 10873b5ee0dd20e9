"""Fingerprints of honest runs, to show a refactoring changed no result bit.

Each case is one in-process App run (``server_app.run`` on an :class:`InProcessGrid`, the App's
run config from ``pyproject.toml`` plus the case's overrides). Its fingerprint is the sha256 of
``result.json`` without timings and of every message both ways: type, node, each array's
name, dtype, shape and bytes, each config entry. Same code, same environment: same digests.

    python simulations/bench/fingerprint.py --out before.json          # on the old commit
    python simulations/bench/fingerprint.py --out after.json           # on the new one
    python simulations/bench/fingerprint.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# name -> (run-config overrides of the App's defaults, clients)
CASES: dict[str, tuple[dict[str, Any], int]] = {
    "fdbnl": ({"algorithm": "fdbnl"}, 5),
    "pfdbnl": ({"algorithm": "pfdbnl", "dbn.heterogeneous": True}, 5),
    "fedgc": ({"algorithm": "fedgc"}, 2),
    "fedcf": ({"algorithm": "fedcf"}, 2),
    "fediv": ({"algorithm": "fediv", "iv.iv-rounds": 10}, 4),
    # the default's 2048-bit Paillier takes an hour here: the mock backend, same protocol
    "vfedcd": ({"algorithm": "vfedcd", "vertical.he-backend": "mock", "vertical.num-epochs": 5,
                "vertical.insecure-test-keys": True, "vertical.vfedcd-accept-backends": "mock"},
               3),
    "vfedcd-paillier": ({"algorithm": "vfedcd", "vertical.he-backend": "paillier-packed",
                         "vertical.key-bits": 256, "vertical.insecure-test-keys": True,
                         "vertical.vfedcd-min-key-bits": 256, "vertical.num-epochs": 2,
                         "vertical.n": 200}, 3),
    "fdbnl-replicas": ({"algorithm": "fdbnl", "dbn.replicas": 4, "dbn.num-rounds": 20}, 4),
    "fdbnl-holdout": ({"algorithm": "fdbnl", "dbn.replicas": 2, "dbn.num-rounds": 10,
                       "dbn.lambda-select": "holdout"}, 4),
    "pfdbnl-replicas": ({"algorithm": "pfdbnl", "dbn.replicas": 4, "dbn.num-rounds": 20}, 4),
    "fediv-replicas": ({"algorithm": "fediv", "iv.iv-replicas": 4, "iv.iv-rounds": 5,
                        "iv.iv-n": 4000}, 4),
    "vfedcd-replicas": ({"algorithm": "vfedcd", "vertical.he-backend": "mock",
                         "vertical.replicas": 4, "vertical.num-epochs": 3,
                         "vertical.insecure-test-keys": True,
                         "vertical.vfedcd-accept-backends": "mock"}, 3),
    "fedpc": ({"algorithm": "fedpc"}, 3),
    "fedtrees": ({"algorithm": "fedtrees", "trees.trees": 20}, 3),
}
# Paillier encryption draws fresh randomness per ciphertext (as it must): their messages differ
# run to run, so only their result and message types are compared
RANDOM_WIRE = {"vfedcd-paillier"}
UNTIMED = ("seconds", "wall_s", "time", "elapsed", "started", "finished", "timestamp",
           "heartbeat", "incarnation")  # clocks, and a node's random incarnation number


def app_config() -> dict[str, Any]:
    """The App's run config as ``flwr run`` sends it: pyproject's tables flattened."""
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def untimed(x: Any) -> Any:
    """``x`` without the entries that measure time (their values differ run to run)."""
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items() if not any(t in k for t in UNTIMED)}
    if isinstance(x, list):
        return [untimed(v) for v in x]
    return x


def message_digest(m: Any, config: bool = True) -> str:
    """sha256 of one message's type, node and content (arrays by name, dtype, shape, bytes;
    with ``config``, its config records too)."""
    h = hashlib.sha256(f"{m.metadata.message_type}|{m.metadata.dst_node_id}".encode())
    if m.has_error():
        h.update(f"error|{m.error.code}|{m.error.reason}".encode())
        return h.hexdigest()
    for rname, record in sorted(m.content.array_records.items()):
        for name, arr in record.items():
            h.update(f"{rname}.{name}|{arr.dtype}|{tuple(arr.shape)}|".encode())
            h.update(arr.data)
    if not config:
        return h.hexdigest()
    for rname, record in sorted(m.content.config_records.items()):
        for key, value in sorted(record.items()):
            if any(t in key for t in UNTIMED):
                continue
            v = value if isinstance(value, bytes) else repr(value).encode()
            h.update(f"{rname}.{key}|".encode() + v)
    return h.hexdigest()


def fingerprint(case: str) -> dict[str, Any]:
    """One case's run: the digest of its result.json without timings and of each message."""
    from fedcausal_flwr import registry, server_app
    from fedcausal_flwr.appconfig import OUTPUTS_ROOT_ENV
    from fedcausal_flwr.client_app import app as client_app
    from fedcausal_flwr.testing import InProcessGrid

    overrides, k = CASES[case]
    os.environ.setdefault(OUTPUTS_ROOT_ENV, tempfile.gettempdir())  # the operator's root
    with tempfile.TemporaryDirectory() as tmp:
        rc = {**app_config(), **overrides, "outputs": tmp, "run-name": case}
        grid = InProcessGrid(client_app, k, rc)
        t = time.perf_counter()
        server_app.run(grid, rc)
        wall = time.perf_counter() - t
        result = json.loads((Path(tmp) / case / "result.json").read_text())
    result["config"]["run_config"].pop("outputs", None)
    section = registry.get(str(rc["algorithm"])).section  # another family's keys (a new
    result["config"]["run_config"] = {  # family's section) do not change this run
        k: v for k, v in result["config"]["run_config"].items()
        if "." not in k or k.split(".", 1)[0] == section}
    result.pop("process", None)  # the ServerApp's pid and heartbeat
    result = untimed(result)
    text = json.dumps(result, sort_keys=True)
    return {"status": result.get("status"), "wall_s": round(wall, 1),
            "result": hashlib.sha256(text.encode()).hexdigest(),
            "sent": [message_digest(m) for m in grid.sent],
            "received": [message_digest(m) for m in grid.received],
            "sent_arrays": [message_digest(m, config=False) for m in grid.sent],
            "types": [m.metadata.message_type for m in grid.sent]}


def compare(a: dict[str, Any], b: dict[str, Any], arrays_only: bool = False) -> list[str]:
    """What differs between two fingerprint files, per case (``arrays_only``: the messages
    sent down by their arrays alone, not their config)."""
    out = []
    for case in sorted(set(a) | set(b)):
        if case not in a or case not in b:
            out.append(f"{case}: only in {'the second' if case in b else 'the first'}")
            continue
        keys = ("status", "result", "types") + (
            () if case in RANDOM_WIRE else ("sent_arrays", "received") if arrays_only
            else ("sent", "received"))
        for key in keys:
            if a[case].get(key) != b[case].get(key):
                x, y = a[case].get(key), b[case].get(key)
                where = ""
                if isinstance(x, list):
                    first = next((i for i, (u, v) in enumerate(zip(x, y, strict=False))
                                  if u != v), min(len(x), len(y)))
                    where = f" (first at message {first} of {len(x)} / {len(y)})"
                out.append(f"{case}: {key} differs{where}")
    return out


def main() -> None:
    """Fingerprint the cases, or compare two fingerprint files."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--compare", nargs=2, type=Path)
    p.add_argument("--arrays-only", action="store_true",
                   help="compare the messages sent by their arrays, not their config")
    args = p.parse_args()
    if args.compare:
        a, b = (json.loads(f.read_text()) for f in args.compare)
        diffs = compare(a, b, args.arrays_only)
        for line in diffs:
            print(line)
        cases = sorted(set(a) & set(b))
        n = sum(len(a[c]["sent"]) + len(a[c]["received"]) for c in cases)
        print(f"{len(cases)} cases, {n} messages: "
              f"{'identical' if not diffs else f'{len(diffs)} differences'}")
        sys.exit(1 if diffs else 0)
    from fedcausal_flwr.threads import limit_blas_threads

    limit_blas_threads()
    out = {}
    for case in args.cases.split(","):
        out[case] = fingerprint(case)
        print(f"{case}: {out[case]['status']}, {len(out[case]['sent'])} messages sent, "
              f"{out[case]['wall_s']} s", flush=True)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
