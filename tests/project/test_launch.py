"""The launcher without starting Flower: App directory, FLWR_HOME, ports, TLS files, flags.

The e2e side (a TLS + node-auth deployment, an unregistered node refused, runs beside another
SuperLink) is tests/e2e/test_e2e_deploy_secure.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_ssh_private_key
from flwr.cli.supernode.register import try_load_public_key

import fedcausal_flwr
from fedcausal_flwr.cli import launch, runconfig, simulation, supervisor, tls

PACKAGE = Path(fedcausal_flwr.__file__).resolve().parent


def test_no_process_matching_by_name_in_the_package():
    hits = [f"{p.relative_to(PACKAGE)}:{i}" for p in PACKAGE.rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"\b(pgrep|pkill|killall)\b", line)]
    assert not hits


def test_app_dir_from_argument_cwd_or_checkout_else_a_clear_error(tmp_path, monkeypatch):
    app = tmp_path / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text('[project]\nname="x"\n[tool.flwr.app]\npublisher="me"\n')
    assert launch.find_app_dir(app) == app.resolve()
    monkeypatch.chdir(app)
    assert launch.find_app_dir() == app.resolve()
    with pytest.raises(launch.AppDirError, match=r"\[tool.flwr.app\]"):
        launch.find_app_dir(tmp_path)  # no pyproject
    # an installed wheel: the package's parent is site-packages, no App there
    empty = tmp_path / "site-packages"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.setattr(runconfig, "APP_DIR", empty)
    with pytest.raises(launch.AppDirError, match="--app DIR"):
        launch.find_app_dir()
    assert launch.main(["simulate", "--run-config", f'outputs="{tmp_path}"']) == 2
    assert not (empty / ".flwr").exists()


def test_flwr_home_is_respected_and_private_only_when_unset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLWR_HOME", raising=False)
    assert launch.default_flwr_home() == (tmp_path / ".flwr").resolve()
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "mine"))
    assert launch.default_flwr_home() == (tmp_path / "mine").resolve()


def test_launcher_draws_free_ports_by_default(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(launch, "simulate", lambda n, cfg, **kw: seen.update(sim=kw))
    monkeypatch.setattr(launch, "deploy", lambda n, cfg, **kw: seen.update(dep=kw))
    launch.main(["simulate", "--run-config", f'outputs="{tmp_path}"'])
    launch.main(["deploy", "--run-config", f'outputs="{tmp_path}"'])
    assert seen["sim"]["port"] is None and seen["dep"]["port"] is None  # None: a free block
    assert seen["dep"]["insecure"] is False
    launch.main(["deploy", "--insecure", "--port", "23456", "--run-config",
                 f'outputs="{tmp_path}"'])
    assert seen["dep"]["insecure"] is True and seen["dep"]["port"] == 23456


def test_an_explicit_busy_port_is_refused():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(RuntimeError, match="in use"):
            supervisor._check_free(range(port, port + 1), "deploy")


def test_certificates_chain_to_the_ca_name_the_hosts_and_are_reused(tmp_path):
    paths = tls.make_certificates(tmp_path / "certs", ("127.0.0.1", "localhost", "link.lan"))
    ca = x509.load_pem_x509_certificate(paths["ca"].read_bytes())
    cert = x509.load_pem_x509_certificate(paths["cert"].read_bytes())
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in san.get_values_for_type(x509.IPAddress)} == {"127.0.0.1"}
    assert set(san.get_values_for_type(x509.DNSName)) == {"localhost", "link.lan"}
    assert paths["key"].stat().st_mode & 0o077 == 0 and paths["ca_key"].stat().st_mode & 0o077 == 0
    before = paths["cert"].read_bytes()
    assert tls.make_certificates(tmp_path / "certs")["cert"].read_bytes() == before


def test_node_keys_are_what_flower_reads(tmp_path):
    key, pub = tls.make_node_key(tmp_path / "keys" / "node0")
    assert pub.name == "node0.pub" and key.stat().st_mode & 0o077 == 0
    priv = load_ssh_private_key(key.read_bytes(), password=None)  # flower-supernode's reader
    assert isinstance(priv, ec.EllipticCurvePrivateKey) and priv.curve.name == "secp384r1"
    assert try_load_public_key(pub)  # flwr supernode register's reader
    assert tls.make_node_key(tmp_path / "keys" / "node0") == (key, pub)
    assert key.read_bytes() == tls.make_node_key(key)[0].read_bytes()


def test_secure_flags_by_default_insecure_only_when_asked(tmp_path):
    certs = tls.make_certificates(tmp_path)
    link = launch.superlink_args(9999, certs)
    assert "--insecure" not in link and "--enable-supernode-auth" in link
    assert link[link.index("--ssl-certfile") + 1] == str(certs["cert"])
    assert launch.superlink_args(9999, None)[0] == "--insecure"
    node = launch.supernode_args("127.0.0.1:9999", 10000, "partition-id=0", certs["ca"],
                                 tmp_path / "k")
    assert node[:4] == ["--root-certificates", str(certs["ca"]),
                        "--auth-supernode-private-key", str(tmp_path / "k")]
    assert launch.supernode_args("a:1", 2, "", None, None)[0] == "--insecure"
    toml = launch.connection_toml("loopback", "127.0.0.1:9999", certs["ca"])
    assert "root-certificates" in toml and "insecure" not in toml
    assert "insecure = true" in launch.connection_toml("loopback", "127.0.0.1:9999", None)


def test_an_authenticated_deployment_binds_partitions_where_the_app_declares_the_key():
    app, example = launch.APP_DIR, launch.APP_DIR / "examples" / "fdbnl"
    assert launch.BIND_KEY in launch.declared_keys(app)
    assert launch.deploy_run_config({"seed": 1}, app, secure=True) == {
        "seed": 1, "bind-partitions": True}
    assert launch.deploy_run_config({"seed": 1}, app, secure=False) == {"seed": 1}
    # the submitter's own value stays
    assert launch.deploy_run_config({"bind-partitions": False}, app, secure=True) == {
        "bind-partitions": False}
    # an App that does not declare it (flwr run would refuse the key) decides in its ServerApp
    assert launch.BIND_KEY not in launch.declared_keys(example)
    assert launch.deploy_run_config({}, example, secure=True) == {}


def test_knowledge_file_becomes_the_algorithms_run_config_keys(tmp_path, monkeypatch, capsys):
    path = tmp_path / "k.csv"
    path.write_text("exogenous,temp\nrequire,valve,flow,0\n")
    assert launch.knowledge_config(path, "fdbnl") == {"dbn.require": "valve->flow@0",
                                                      "dbn.exogenous": "temp"}
    assert launch.knowledge_config(path, "vfedcd")["vertical.exogenous"] == "temp"
    with pytest.raises(ValueError, match="ss-known-zero"):
        launch.knowledge_config(path, "fedgc")
    started = []
    monkeypatch.setattr(launch, "deploy", lambda *a, **k: started.append(a))
    path.write_text("maybe,a,b\n")
    assert launch.main(["deploy", "--knowledge", str(path)]) == 2 and not started
    assert "row 1: expected forbid" in capsys.readouterr().err


def no_superlink(*args, **kwargs) -> subprocess.Popen:
    """In place of :func:`simulation.start_local_superlink`: a process that ends at once."""
    return subprocess.Popen(["true"])


def test_simulate_names_ray_cpus_only_when_asked(monkeypatch, tmp_path):
    """``simulate(ray_cpus=n)`` adds Flower's ``init-args-num-cpus`` (n ClientApps at once with
    1 CPU each); by default the federation config is as before (Ray sees this machine's CPUs)."""
    seen = []
    monkeypatch.setattr(launch.subprocess, "run", lambda cmd, **kw: seen.append(cmd))
    monkeypatch.setattr(simulation, "_local_superlink_pids", lambda *a: set())
    monkeypatch.setattr(simulation, "start_local_superlink", no_superlink)
    port = launch.free_port_block(launch.SIMULATE_PORTS)
    for extra in ({}, {"ray_cpus": 4}):
        launch.simulate(7, {"algorithm": "fdbnl"}, flwr_home=tmp_path, port=port, **extra)
    fed = [cmd[cmd.index("--federation-config") + 1] for cmd in seen]
    assert fed == ["num-supernodes=7 client-resources-num-cpus=1",
                   "num-supernodes=7 client-resources-num-cpus=1 init-args-num-cpus=4"]


# ---- issue 25: any App, run-name, own CSVs in simulation, TLS files, signals, summary line

EXAMPLE = launch.APP_DIR / "examples" / "fdbnl"


def plain_app(root: Path) -> Path:
    """A Flower App that is not this package's: two declared keys, no outputs/run-name."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname="plain"\nversion="1.0.0"\n[tool.flwr.app]\npublisher="me"\n'
        '[tool.flwr.app.components]\nserverapp="server_app:app"\nclientapp="client_app:app"\n'
        '[tool.flwr.app.config]\ngreeting="hello"\nfail=false\n')
    return root


def test_undeclared_keys_are_refused_naming_each_and_the_apps_pyproject(
        tmp_path, monkeypatch, capsys):
    app = plain_app(tmp_path / "plain")
    started = []
    monkeypatch.setattr(launch, "simulate", lambda n, cfg, **kw: started.append(cfg))
    code = launch.main(["simulate", "--app", str(app), "--run-config",
                        'greting="hi" outputs="out" dbn.lambda-w=0.1'])
    err = capsys.readouterr().err
    assert code == 2 and not started
    for key in ("'greting' (did you mean 'greeting'?)", "'outputs'", "'dbn.lambda-w'",
                str(app.resolve() / "pyproject.toml")):
        assert key in err
    # declared keys pass, and nothing the App does not declare is added (no outputs/run-name)
    assert launch.main(["simulate", "--app", str(app), "--run-config", 'greeting="hi"']) == 0
    assert started == [{"greeting": "hi"}]
    assert "verdict is flwr run's exit code" in capsys.readouterr().out
    # --no-drops needs a result.json: refused before Flower starts for such an App
    assert launch.main(["simulate", "--app", str(app), "--no-drops"]) == 2 and len(started) == 1
    # this package's App keeps its own message for a key without its section
    assert launch.main(["simulate", "--run-config", "lambda-w=0.1"]) == 2
    assert "'lambda-w' is now 'dbn.lambda-w'" in capsys.readouterr().err


def test_a_declared_run_name_is_kept_and_the_printed_path_is_where_the_server_writes(
        tmp_path, monkeypatch, capsys):
    from fedcausal_flwr.server_app import output_dir

    monkeypatch.chdir(tmp_path)
    cfg = launch.app_run_config({}, EXAMPLE)  # declares run-name = "fdbnl", outputs = "outputs"
    assert cfg == {"outputs": "outputs", "run-name": "fdbnl"}
    assert launch.app_run_config({"run-name": "mine"}, EXAMPLE)["run-name"] == "mine"
    own = launch.app_run_config({"algorithm": "fedgc"}, launch.APP_DIR)  # declares run-name ""
    assert re.fullmatch(r"fedgc-\d{8}-\d{6}", own["run-name"])
    # the ServerApp gets outputs as an absolute path, so it writes where the launcher reads
    sent = launch.parse_run_config(launch.run_config_arg(cfg))
    assert sent["outputs"] == str(tmp_path / "outputs")
    assert launch.run_output(cfg) == output_dir(sent, "fdbnl") == tmp_path / "outputs" / "fdbnl"

    def fake_run(n, cfg, **kw):  # the ServerApp's write, from the run config it was sent
        out = output_dir(launch.parse_run_config(launch.run_config_arg(cfg)), "fdbnl")
        out.mkdir(parents=True)
        (out / "result.json").write_text(json.dumps(
            {"algorithm": "fdbnl", "status": "completed", "metrics": {"clients": n}}))

    monkeypatch.setattr(launch, "simulate", fake_run)
    assert launch.main(["simulate", "--app", str(EXAMPLE), "--nodes", "3"]) == 0
    out = capsys.readouterr().out
    assert f"saved {tmp_path / 'outputs' / 'fdbnl' / 'result.json'}" in out
    assert out.rstrip().splitlines()[-1] == "clients: 3 used of 3 started"


def test_simulated_nodes_read_their_own_node_config_from_the_launchers_environment(
        tmp_path, monkeypatch):
    from fedcausal_flwr.client_app import app
    from fedcausal_flwr.data import nodefiles
    from tests.helpers.faults import run_app

    files = sorted((EXAMPLE / "data").glob("site*.csv"))[:3]
    env = launch.simulated_node_env({i: {"data-path": str(f)} for i, f in enumerate(files)})
    monkeypatch.setenv(nodefiles.NODE_CONFIGS_ENV, env[nodefiles.NODE_CONFIGS_ENV])
    own = nodefiles.own_node_config({"partition-id": 1, "num-partitions": 3})
    assert own["data-path"] == str(files[1]) and own["partition-id"] == 1
    # the node config's own keys win; a partition without an entry gets nothing
    assert nodefiles.own_node_config({"partition-id": 1, "data-path": "/x"})["data-path"] == "/x"
    assert nodefiles.own_node_config({"partition-id": 7}) == {"partition-id": 7}
    # the App's ClientApp reads them (its run config names no data): the CSV headers' names
    res = run_app("fdbnl", app, 3, rc={"algorithm": "fdbnl", "dbn.data": "node",
                                                  "dbn.num-rounds": 2})
    assert res.status == "completed" and res.metrics["clients"] == 3
    header = set(files[0].read_text().splitlines()[0].split(","))
    assert set(res.to_networkx(tau=0.2).nodes) == header
    monkeypatch.setenv(nodefiles.NODE_CONFIGS_ENV, "[1, 2]")
    with pytest.raises(ValueError, match=nodefiles.NODE_CONFIGS_ENV):
        nodefiles.own_node_config({"partition-id": 0})
    assert launch.simulated_node_env(None) == {}


def test_simulate_with_node_data_hands_each_virtual_node_its_csv(tmp_path, monkeypatch):
    from fedcausal_flwr.data.nodefiles import NODE_CONFIGS_ENV

    seen = []
    monkeypatch.setattr(launch.subprocess, "run", lambda cmd, **kw: seen.append((cmd, kw["env"])))
    monkeypatch.setattr(simulation, "_local_superlink_pids", lambda *a: set())
    monkeypatch.setattr(simulation, "start_local_superlink", no_superlink)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for f in (a, b):
        f.write_text("x,y\n1,2\n")
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "home"))
    launch.main(["simulate", "--node-data", str(a), "--node-data", str(b), "--node-config",
                 "segment-column=\"s\"", "--node-config", "max-rows=10",
                 "--run-config", f'outputs="{tmp_path}"'])
    cmd, env = seen[0]
    assert json.loads(env[NODE_CONFIGS_ENV]) == {
        "0": {"data-path": str(a), "segment-column": "s"},
        "1": {"data-path": str(b), "max-rows": 10}}
    assert cmd[cmd.index("--federation-config") + 1].startswith("num-supernodes=2 ")
    with pytest.raises(SystemExit):  # counts that differ are refused
        launch.main(["simulate", "--node-data", str(a), "--node-config", "x=1",
                     "--node-config", "y=2"])


def test_a_deployment_prints_where_its_certificates_keys_and_logs_are(tmp_path):
    certs = tls.make_certificates(tmp_path / "certs")
    keys = {i: tls.make_node_key(tmp_path / "keys" / f"supernode{i}")[0] for i in range(2)}
    text = "\n".join(launch.security_lines(tmp_path, certs, keys))
    for path in (tmp_path, certs["ca"], certs["cert"], certs["key"], keys[0], keys[1]):
        assert str(path) in text
    assert "SuperNode 1 key" in text and "superlink.log" in text
    assert "insecure" in "\n".join(launch.security_lines(tmp_path, None, {}))


@pytest.mark.integration
def test_sigterm_stops_every_process_the_run_started_and_only_those(capsys):
    import subprocess
    import sys

    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(launch.Interrupted) as info, launch.stopping() as started:
            # a child that starts a grandchild and exits: the orphan is adopted (subreaper)
            subprocess.run(["sh", "-c", "sleep 60 & sleep 60 & exit 0"], check=True)
            tree = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"])
            time.sleep(0.5)
            pids = started.pids()
            assert tree.pid in pids and len(pids) >= 5 and mine.pid not in pids
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # not reached: the handler raises
        assert info.value.signum == signal.SIGTERM
        assert set(started.stopped) >= pids and not any(supervisor._alive(p) for p in pids)
        assert all(supervisor._stat(p) is None for p in pids)  # reaped: no zombie stays behind
        assert "sleep x4" in started.report() and mine.poll() is None  # the caller's: alive
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored
    finally:
        mine.kill()
        mine.wait()


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_main_exits_128_plus_the_signal_naming_what_it_stopped(monkeypatch, capsys, tmp_path,
                                                               sig):
    import subprocess

    def run(n, cfg, **kw):
        subprocess.Popen(["sleep", "60"])
        os.kill(os.getpid(), sig)
        time.sleep(5)

    monkeypatch.setattr(launch, "simulate", run)
    assert launch.main(["simulate", "--run-config", f'outputs="{tmp_path}"']) == 128 + sig
    assert re.search(rf"interrupted by {sig.name}: stopped 1 process it started "
                     r"\(sleep x1\)", capsys.readouterr().err)


def result_with_a_bad_csv(tmp_path: Path) -> Path:
    """An in-process run of this package's App on three own CSVs, the second with a cell that
    is no number; its result.json's folder."""
    from fedcausal_flwr.client_app import app
    from tests.helpers.faults import run_app

    files = sorted((EXAMPLE / "data").glob("site*.csv"))[:3]
    bad = tmp_path / "bad.csv"
    lines = files[1].read_text().splitlines()
    lines[2] = "oops," + lines[2].split(",", 1)[1]
    bad.write_text("\n".join(lines) + "\n")
    nodes = {i: {"data-path": str(f)} for i, f in enumerate([files[0], bad, files[2]])}
    res = run_app("fdbnl", app, 3, nodes, rc={"algorithm": "fdbnl", "dbn.data": "node",
                                                  "dbn.num-rounds": 2})
    return res.save(tmp_path / "run").parent


def test_the_summary_names_a_dropped_client_and_no_drops_makes_it_an_error(tmp_path, capsys):
    out = result_with_a_bad_csv(tmp_path)
    assert launch.report(out, started=3) == 0  # completed with two clients
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith("clients: 2 used of 3 started; dropped node ")
    assert "client 1" in last and "bad.csv: row 3" in last and "not a number" in last
    assert launch.report(out, started=3, no_drops=True) == 1
    assert "--no-drops" in capsys.readouterr().err
    assert launch.summary_line({"clients": 3, "dropped": []}, 3) == "clients: 3 used of 3 started"
    twice = launch.summary_line({"clients": 2, "dropped": ["client 1: late", "client 1: late"]},
                                3)
    assert twice == "clients: 2 used of 3 started; dropped client 1: late (2 times)"


def test_an_app_without_result_json_is_judged_by_flwr_runs_code_and_flowers_run_status(capsys):
    runs = [{"run-id": "1", "status": "finished:completed", "pending-at": "2026-01-01 10:00:00Z"},
            {"run-id": "2", "status": "finished:failed", "pending-at": "2026-01-02 09:00:00Z",
             "status-details": "Simulation failed with exception: boom"}]
    assert launch.latest_run(runs)["run-id"] == "2" and launch.latest_run([]) is None
    assert launch.exit_code_verdict(0, 2, launch.latest_run(runs)) == 1  # flwr run said 0
    out, err = capsys.readouterr()
    assert "finished:failed" in out and "boom" in err
    assert out.rstrip().splitlines()[-1].startswith("clients: ? used of 2 started")
    assert launch.exit_code_verdict(0, 2, runs[0]) == 0
    assert launch.exit_code_verdict(3, 2, runs[0]) == 3
    assert launch.exit_code_verdict(0, 2, None) == 0  # status unknown: the exit code alone
    assert "status unknown" in capsys.readouterr().out


def test_simulate_without_ray_names_the_simulation_extra(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else real(name, *a))
    assert launch.main(["simulate", "--nodes", "2"]) == 2
    assert "pip install 'fedcausal-flwr[simulation]'" in capsys.readouterr().err
    with pytest.raises(ImportError, match=r"fedcausal-flwr\[simulation\]"):
        launch.simulate(2, {})
