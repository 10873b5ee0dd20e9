"""A real Flower deployment on loopback: one SuperLink, one SuperNode per client, TLS and
SuperNode authentication unless insecure (:func:`deploy`)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedcausal_flwr.cli import tls
from fedcausal_flwr.cli.runconfig import (
    default_flwr_home,
    deploy_run_config,
    find_app_dir,
    flwr_env,
    outputs_env,
    run_config_arg,
    toml_value,
)
from fedcausal_flwr.cli.supervisor import (
    _check_free,
    _flwr,
    _kill,
    _wait_for_port,
    flower_runs,
    free_port_block,
    with_descendants,
)


def deploy_ports(num_supernodes: int) -> int:
    """Ports a deployment takes from ``port``: the SuperLink's, then one per SuperNode."""
    return 1 + num_supernodes



@dataclass
class Deployment:
    """What :func:`deploy` started, handed to its ``on_start`` hook.

    ``supernodes[i]`` is partition i's latest SuperNode process (its own process group);
    ``start_supernode(i)`` starts another SuperNode for partition i (e.g. after stopping the
    first; with node authentication under a new, registered key, so it gets a new node id:
    another operator claiming the partition), which ``deploy`` stops at the end like the
    others. ``start_supernode(i, same_key=True)`` restarts partition i's node under the key
    ``deploy`` first started it with (the SuperLink gives it that key's node id again; only
    once the process holding that key has left: stopped by SIGTERM, or silent for Flower's
    heartbeat patience, 60 s). Restarts of partition i take its port: stop the previous one
    first.
    ``start_supernode(i, register=False)`` starts one whose key the SuperLink does not know (a
    secure SuperLink refuses it: the SuperNode exits with code 305). ``certs`` are the TLS
    files (``None`` when insecure).
    """

    port: int
    workdir: Path
    supernodes: dict[int, subprocess.Popen]
    start_supernode: Callable[..., subprocess.Popen]
    secure: bool = True
    certs: dict[str, Path] | None = None


def superlink_args(port: int, certs: Mapping[str, Path] | None) -> list[str]:
    """``flower-superlink`` flags: TLS + SuperNode authentication, or ``--insecure``."""
    sec = (["--insecure"] if certs is None else
           ["--ssl-ca-certfile", str(certs["ca"]), "--ssl-certfile", str(certs["cert"]),
            "--ssl-keyfile", str(certs["key"]), "--enable-supernode-auth"])
    return [*sec, "--port", str(port), "--disable-runtime-dependency-installation"]


def supernode_args(superlink: str, port: int, node_config: str, ca: Path | None,
                   key: Path | None) -> list[str]:
    """``flower-supernode`` flags: the CA and auth key, or ``--insecure`` when ``ca`` is None."""
    sec = (["--insecure"] if ca is None else
           ["--root-certificates", str(ca)]
           + (["--auth-supernode-private-key", str(key)] if key is not None else []))
    return [*sec, "--superlink", superlink, "--port", str(port), "--node-config", node_config]


def node_config_arg(i: int, num_supernodes: int, extra: Mapping[str, Any]) -> str:
    """The ``--node-config`` of SuperNode ``i``: its partition, then ``extra`` in TOML syntax."""
    cfg = {"partition-id": i, "num-partitions": num_supernodes, **dict(extra)}
    return " ".join(f"{k}={toml_value(v)}" for k, v in cfg.items())


def connection_toml(name: str, address: str, ca: Path | None) -> str:
    """A ``$FLWR_HOME/config.toml`` whose default connection ``name`` is the SuperLink."""
    sec = "insecure = true" if ca is None else f"root-certificates = {toml_value(str(ca))}"
    return (f'[superlink]\ndefault = "{name}"\n\n'
            f'[superlink.{name}]\naddress = "{address}"\n{sec}\n')


def security_lines(workdir: Path, certs: Mapping[str, Path] | None,
                   keys: Mapping[int, Path]) -> list[str]:
    """Where a deployment's TLS files, SuperNode keys and logs are (printed before the run)."""
    out = [f"deployment files in {workdir} (kept and reused; logs: superlink.log, "
           "supernode<i>.log)"]
    if certs is None:
        return [*out, "insecure: no TLS, no SuperNode authentication"]
    out += [f"  CA certificate: {certs['ca']} (its key: {certs['ca_key']})",
            f"  SuperLink certificate: {certs['cert']} (its key: {certs['key']})"]
    return out + [f"  SuperNode {i} key: {key} (public, registered: {key}.pub)"
                  for i, key in sorted(keys.items())]


def deploy(num_supernodes: int, run_config: Mapping[str, Any], *,
           app_dir: Path | str | None = None, workdir: Path | None = None,
           port: int | None = None, timeout: float = 3600, insecure: bool = False,
           on_start: Callable[[Deployment], None] | None = None,
           node_configs: Mapping[int, Mapping[str, Any]] | None = None,
           runs: list[dict[str, Any]] | None = None) -> subprocess.CompletedProcess:
    """A real deployment on loopback: one SuperLink, one SuperNode per client, ``flwr run``.

    SuperLink on ``port``, SuperNodes on ``port + 1 + i`` with ``partition-id = i``
    (:func:`deploy_ports` in all, which must be free; ``None``: a free block). Logs, per-process
    ``FLWR_HOME`` folders, ``certs/`` and ``keys/`` go to ``workdir`` (default
    ``<FLWR_HOME or ./.flwr>/deployment``; certificates and keys are kept and reused; where
    they are is printed before the run: :func:`security_lines`). Unless
    ``insecure``, the SuperLink serves TLS with a certificate from a local CA and admits only
    SuperNodes whose public key was registered (``flwr supernode register``) before they
    start; the run config then gets ``bind-partitions=true`` unless it sets the key
    (:func:`deploy_run_config`). Everything started here (and only that: by PID) is stopped
    before returning.
    ``on_start``, if given, gets the :class:`Deployment` just before ``flwr run`` starts
    (fault tests stop and restart SuperNodes from a thread it starts). ``node_configs``: extra
    ``--node-config`` entries per SuperNode index (e.g. ``{0: {"data-path": "/d/site0.csv"}}``,
    each node's own data), after ``partition-id`` and ``num-partitions``. ``runs``: as
    :func:`simulate`'s.
    """
    app_dir = find_app_dir(app_dir)
    port = free_port_block(deploy_ports(num_supernodes)) if not port else port
    workdir = Path(workdir or default_flwr_home() / "deployment").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    bindir = Path(sys.executable).parent
    procs: list[subprocess.Popen] = []
    certs = None if insecure else tls.make_certificates(workdir / "certs")
    ca = None if certs is None else certs["ca"]
    cli_home = workdir / "cli"
    cli_env = {**flwr_env(cli_home), **outputs_env(run_config)}

    def spawn(name: str, cmd: list[str]) -> None:
        log = open(workdir / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        env = {**flwr_env(workdir / name), **outputs_env(run_config)}  # the ServerApp's root
        procs.append(subprocess.Popen(cmd, env=env, stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True))

    def registered_key(name: str) -> Path:
        key, pub = tls.make_node_key(workdir / "keys" / name)
        r = subprocess.run([_flwr(), "supernode", "register", str(pub), "loopback"],
                           env=cli_env, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"flwr supernode register {pub} failed ({r.returncode}): "
                               f"{r.stdout}{r.stderr}")
        return key

    supernodes: dict[int, subprocess.Popen] = {}
    keys: dict[int, Path] = {}  # partition -> the registered key it was first started with

    def node_key(i: int, name: str, register: bool, same_key: bool) -> Path | None:
        if certs is None:
            return None
        if same_key:
            return keys[i]
        if not register:
            return tls.make_node_key(workdir / "keys" / f"{name}-unregistered")[0]
        key = registered_key(name)
        keys.setdefault(i, key)
        return key

    def supernode(i: int, register: bool = True, same_key: bool = False) -> subprocess.Popen:
        name = f"supernode{i}" + (f"-{len(procs)}" if i in supernodes else "")  # a restart
        key = node_key(i, name, register, same_key)
        spawn(name, [str(bindir / "flower-supernode"),
                     *supernode_args(f"127.0.0.1:{port}", port + 1 + i,
                                     node_config_arg(i, num_supernodes,
                                                     (node_configs or {}).get(i, {})),
                                     ca, key)])
        supernodes[i] = procs[-1]
        return procs[-1]

    _check_free(range(port, port + deploy_ports(num_supernodes)), "deploy")
    try:
        spawn("superlink", [str(bindir / "flower-superlink"), *superlink_args(port, certs)])
        _wait_for_port(port, procs[0])
        (cli_home / "config.toml").write_text(
            connection_toml("loopback", f"127.0.0.1:{port}", ca))
        for i in range(num_supernodes):
            supernode(i)
        print("\n".join(security_lines(workdir, certs, keys)), flush=True)
        cmd = [_flwr(), "run", str(app_dir), "loopback", "--stream", "--run-config",
               run_config_arg(deploy_run_config(run_config, app_dir, certs is not None))]
        if on_start is not None:
            on_start(Deployment(port, workdir, supernodes, supernode, certs is not None, certs))
        done = subprocess.run(cmd, env=cli_env, timeout=timeout, check=True)
        if runs is not None:
            runs.extend(flower_runs("loopback", cli_env))
        return done
    finally:
        _kill(with_descendants({p.pid for p in procs}))
        for p in procs:
            p.wait(timeout=10)
        if hint := clientapp_start_hint(workdir):
            print(hint, file=sys.stderr, flush=True)


CLAIM_FAILED = "task-token authentication failed"
"""What a SuperNode logs when the ClientApp process it started came too late to claim its
task (Flower 1.42), and starts another."""


def clientapp_start_hint(workdir: Path) -> str | None:
    """What the SuperNode logs in ``workdir`` say of ClientApps that did not start in time,
    and what to do; None when they say nothing of it."""
    slow = sorted(p.stem for p in Path(workdir).glob("supernode*.log")
                  if CLAIM_FAILED in p.read_text(errors="replace").lower())
    if not slow:
        return None
    return (f"note: {', '.join(slow)} logged 'Runtime task-token authentication failed': "
            f"{CLIENTAPP_SLOW}")


CLIENTAPP_SLOW = (
    "a SuperNode starts a flwr-clientapp process per message, which must claim its task "
    "within Flower's window; on a busy machine its start-up (Python and the App's imports) "
    "takes longer, the SuperNode starts another, and the node never answers. Run with less "
    "load on the machine (or fewer SuperNodes on it), or try the App in a simulation first "
    "(python -m fedcausal_flwr.cli.launch simulate), where one process serves every message.")
"""Why SuperNodes that connect may never answer, and what to do (the ServerApp says it too:
:data:`fedcausal_flwr.federation.roster.SILENT_NODES`)."""
