"""The launcher without starting Flower: App directory, FLWR_HOME, ports, TLS files, flags.

The e2e side (a TLS + node-auth deployment, an unregistered node refused, runs beside another
SuperLink) is tests/e2e/test_e2e_deploy_secure.py.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_ssh_private_key
from flwr.cli.supernode.register import try_load_public_key

import fedcausal_flwr
from fedcausal_flwr import launch, tls

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
    monkeypatch.setattr(launch, "APP_DIR", empty)
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
            launch._check_free(range(port, port + 1), "deploy")


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


def test_simulate_names_ray_cpus_only_when_asked(monkeypatch, tmp_path):
    """``simulate(ray_cpus=n)`` adds Flower's ``init-args-num-cpus`` (n ClientApps at once with
    1 CPU each); by default the federation config is as before (Ray sees this machine's CPUs)."""
    seen = []
    monkeypatch.setattr(launch.subprocess, "run", lambda cmd, **kw: seen.append(cmd))
    monkeypatch.setattr(launch, "_local_superlink_pids", lambda *a: set())
    port = launch.free_port_block(launch.SIMULATE_PORTS)
    for extra in ({}, {"ray_cpus": 4}):
        launch.simulate(7, {"algorithm": "fdbnl"}, flwr_home=tmp_path, port=port, **extra)
    fed = [cmd[cmd.index("--federation-config") + 1] for cmd in seen]
    assert fed == ["num-supernodes=7 client-resources-num-cpus=1",
                   "num-supernodes=7 client-resources-num-cpus=1 init-args-num-cpus=4"]
