"""The chaos run on a secured cluster (issue 17): one `ChaosSecurity` per run, taken from the target,
and every connection of deploy/chaos built from it; ``kraftlog chaos run --security`` refused where
the cluster already has a security of its own. No processes, no sockets: the channel factory is
replaced and the source is read as an AST."""

from __future__ import annotations

import ast
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from kraftlog.cli.__main__ import main
from kraftlog.cli._chaos import SECURITY_MODES as CLI_SECURITY_MODES
from kraftlog.deploy._cluster import SECURITY_MODES as CLUSTER_SECURITY_MODES
from kraftlog.deploy._cluster import LocalCluster, NodeSpec
from kraftlog.deploy.chaos._security import PLAINTEXT, SECURITY_MODES, ChaosSecurity
from kraftlog.deploy.chaos._targets import LocalTarget, SystemdTarget, load_inventory, load_inventory_security

ROOT = Path(__file__).resolve().parents[3]
CHAOS = ROOT / "deploy" / "chaos"


def _mtls_kwargs(tmp_path: Path) -> dict[str, Any]:
    from kraftlog.deploy._certs import make_ca, make_certificate

    ca = make_ca(tmp_path, "chaos test CA")
    issued = make_certificate(ca, tmp_path, "admin", client=True)
    return {
        "security_protocol": "SSL",
        "ssl_cafile": str(ca.certificate_path),
        "ssl_certfile": str(issued.certificate_path),
        "ssl_keyfile": str(issued.key_path),
    }


# ---------------------------------------------------------------------------------------- the value


def test_the_cli_offers_what_the_own_cluster_can_be() -> None:
    assert CLI_SECURITY_MODES == SECURITY_MODES
    assert set(SECURITY_MODES) <= set(CLUSTER_SECURITY_MODES)


def test_plaintext_gives_no_arguments_and_no_tls() -> None:
    plain = ChaosSecurity.of({})
    assert plain == PLAINTEXT and plain.mode == "plaintext" and not plain.secured
    assert plain.client_kwargs() == {} and plain.kafka_kwargs() == {} and plain.tls is None
    assert ChaosSecurity.of({"security_protocol": "plaintext"}) == PLAINTEXT


def test_the_mode_follows_what_is_given() -> None:
    tls = ChaosSecurity.of({"security_protocol": "SSL", "ssl_cafile": "/ca.crt"})
    assert tls.mode == "tls" and tls.client_kwargs() == {"security_protocol": "SSL", "ssl_cafile": "/ca.crt"}
    mtls = ChaosSecurity.of(
        {"security_protocol": "ssl", "ssl_cafile": "/ca.crt", "ssl_certfile": "/a.crt", "ssl_keyfile": "/a.key"}
    )
    assert mtls.mode == "mtls" and mtls.client_kwargs()["security_protocol"] == "SSL"
    assert mtls.kafka_kwargs() == mtls.client_kwargs()  # the Kafka listener takes the same unless told
    named = ChaosSecurity.of({"security_protocol": "SSL", "ssl_cafile": "/ca.crt"}, mode="scram", kafka={"x": 1})
    assert named.mode == "scram" and named.kafka_kwargs() == {"x": 1}


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"security_protocol": "SASL_SSL"}, "expected PLAINTEXT or SSL"),
        ({"security_protocol": "SSL", "sasl_mechanism": "SCRAM-SHA-512"}, "sasl_mechanism"),
        ({"ssl_cafile": "/ca.crt"}, "ssl_cafile given with security_protocol PLAINTEXT"),
        ({"security_protocol": "SSL", "ssl_certfile": "/a.crt"}, "ssl_certfile and ssl_keyfile go together"),
        ({"security_protocol": "SSL", "ssl_check_hostname": "no"}, "ssl_check_hostname must be true or false"),
    ],
)
def test_a_bad_shape_is_refused_naming_the_key(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        ChaosSecurity.of(kwargs, what="here")


def test_raw_channels_carry_the_client_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kwargs = _mtls_kwargs(tmp_path)
    security = ChaosSecurity.of(kwargs)
    tls = security.tls
    assert tls is not None and tls is security.tls  # read once
    assert tls.truststore_location == kwargs["ssl_cafile"]
    assert tls.keystore_certificate_chain == Path(kwargs["ssl_certfile"]).read_text()
    assert tls.keystore_key == Path(kwargs["ssl_keyfile"]).read_text()
    assert PLAINTEXT.tls is None  # (the channels themselves are opened by the integration tests)


# ---------------------------------------------------------------------------------------- targets


class _Cluster:
    """What `LocalTarget` asks of a `LocalCluster` to know its security."""

    def __init__(self, security: str, client: dict[str, Any], kafka: dict[str, Any] | None = None) -> None:
        self.security = security
        self.base_dir = Path("/nowhere")
        self._client = client
        if kafka is not None:
            self.kafka_client_security = lambda: kafka

    def client_security(self) -> dict[str, Any]:
        return self._client


def test_a_local_target_connects_as_its_cluster_says(tmp_path: Path) -> None:
    kwargs = _mtls_kwargs(tmp_path)
    target = LocalTarget(_Cluster("mtls", kwargs))
    assert target.security.mode == "mtls" and target.security.client_kwargs() == kwargs
    assert target.security.kafka_kwargs() == kwargs
    sasl = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "ssl_cafile": kwargs["ssl_cafile"]}
    other = LocalTarget(_Cluster("scram", kwargs, sasl))
    assert other.security.mode == "scram" and other.security.kafka_kwargs() == sasl
    assert other.security.client_kwargs() == kwargs
    assert LocalTarget(_Cluster("plaintext", {})).security == PLAINTEXT


INVENTORY = '[[node]]\nid = 1\nrole = "controller"\nhost = "c1"\nport = 9093\n'


def test_an_inventory_names_its_client_certificate(tmp_path: Path) -> None:
    path = tmp_path / "inv.toml"
    path.write_text(
        INVENTORY + '[client]\nsecurity_protocol = "SSL"\nssl_cafile = "/etc/kl/ca.crt"\n'
        'ssl_certfile = "/etc/kl/chaos.crt"\nssl_keyfile = "/etc/kl/chaos.key"\n'
    )
    security = load_inventory_security(path)  # the files are not read here (a dry run needs none)
    assert security.mode == "mtls"
    assert security.client_kwargs()["ssl_certfile"] == "/etc/kl/chaos.crt"
    target = SystemdTarget(load_inventory(path), runner=lambda argv: None, security=security)
    assert target.security is security
    plain = tmp_path / "plain.toml"
    plain.write_text(INVENTORY)
    assert load_inventory_security(plain) == PLAINTEXT
    assert SystemdTarget(load_inventory(plain), runner=lambda argv: None).security == PLAINTEXT


def test_an_inventory_names_no_stray_security(tmp_path: Path) -> None:
    path = tmp_path / "inv.toml"
    path.write_text(INVENTORY + '[client]\nsecurity_protocol = "SSL"\nssl_keystore_location = "/k.pem"\n')
    with pytest.raises(ValueError, match=r"\[client\].*ssl_keystore_location"):
        load_inventory_security(path)
    typo = tmp_path / "typo.toml"
    typo.write_text(INVENTORY + '[clinet]\nsecurity_protocol = "SSL"\n')
    with pytest.raises(ValueError, match="clinet"):
        load_inventory(typo)


# ---------------------------------------------------------------------------------------- the command


@pytest.fixture
def no_signal_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``chaos run`` installs SIGINT/SIGTERM handlers; keep pytest's."""
    monkeypatch.setattr(signal, "signal", lambda *args: None)


def _saved_cluster(base: Path, security: str) -> Path:
    """A cluster's state file only: nothing formatted, nothing running."""
    cluster = LocalCluster(base, controllers=1, security=security, cluster_id="x", password="p")
    base.mkdir(parents=True)
    cluster.nodes = {1: NodeSpec(1, ["controller", "broker"], 9093, 9091, str(base / "node1"))}
    cluster.save()
    assert json.loads((base / "cluster.json").read_text())["security"] == security
    return base


@pytest.mark.usefixtures("no_signal_handlers")
def test_security_must_match_a_dir_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _saved_cluster(tmp_path / "c", "mtls")
    assert main(["chaos", "run", "--dir", str(d), "--security", "plaintext", "--duration", "5s"]) == 2
    err = capsys.readouterr().err
    assert "--security plaintext" in err and "is mtls" in err and "drop --security" in err
    # the same value passes this check and reaches the next one (its nodes are not running)
    assert main(["chaos", "run", "--dir", str(d), "--security", "mtls", "--duration", "5s"]) == 2
    err = capsys.readouterr().err
    assert "--security" not in err and "not running" in err


@pytest.mark.usefixtures("no_signal_handlers")
def test_security_must_match_an_inventory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "inv.toml"
    path.write_text(
        INVENTORY + '[[node]]\nid = 101\nrole = "broker"\nhost = "b1"\nport = 9091\n'
        '[client]\nsecurity_protocol = "SSL"\nssl_cafile = "/nowhere/ca.crt"\n'
    )
    base = ["chaos", "run", "--inventory", str(path), "--dry-run", "--seed", "3", "--duration", "10s"]
    assert main([*base, "--security", "mtls"]) == 2
    assert "--security mtls" in capsys.readouterr().err
    assert main([*base, "--security", "tls"]) == 0  # a dry run opens no connection, reads no file
    assert main(base) == 0
    bad = tmp_path / "bad.toml"
    bad.write_text(INVENTORY + '[client]\nsecurity_protocol = "SASL_SSL"\n')
    assert main(["chaos", "run", "--inventory", str(bad), "--dry-run", "--duration", "5s"]) == 2
    assert "SASL_SSL" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------- the wiring

CLIENTS = {"Producer", "Consumer", "Admin", "GroupAdmin", "TransactionAdmin"}
KAFKA_CLIENTS = {"KafkaProducer", "KafkaConsumer", "KafkaAdminClient"}
CHANNELS = {"insecure_channel", "secure_channel", "open_channel", "open_aio_channel"}


def _sources() -> dict[str, ast.Module]:
    files = [*sorted(CHAOS.glob("*.py")), ROOT / "cli" / "_chaos.py"]
    return {str(f.relative_to(ROOT)): ast.parse(f.read_text(encoding="utf-8")) for f in files}


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _spreads(call: ast.Call, method: str) -> bool:
    """``call`` has ``**<something>.<method>()``."""
    return any(k.arg is None and isinstance(k.value, ast.Call) and _name(k.value.func) == method for k in call.keywords)


def test_every_client_and_channel_of_the_chaos_code_goes_through_client_security() -> None:
    sources = _sources()
    clients = 0
    wrong: list[str] = []
    for path, tree in sources.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _name(node.func)
            where = f"{path}:{node.lineno} {name}"
            if name in CLIENTS:
                clients += 1
                if not _spreads(node, "client_kwargs"):
                    wrong.append(where)
            elif name in KAFKA_CLIENTS:
                clients += 1
                if not _spreads(node, "kafka_kwargs"):
                    wrong.append(where)
            elif name in CHANNELS and path != "deploy/chaos/_security.py":
                wrong.append(where)
    assert clients >= 12  # the runners' admins, both workloads' clients, group, eos, read back, kafka-python
    assert not wrong, f"connections that do not use the run's ChaosSecurity: {wrong}"


def test_every_caller_hands_the_security_on() -> None:
    """Whatever in deploy/chaos takes ``security`` (the workloads, the probes, the read back, the
    targets) is given it by every caller there, so no default plaintext is ever used by mistake."""
    sources = _sources()
    takes: set[str] = set()
    for tree in sources.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__" and _has_security(item):
                        takes.add(node.name)
            elif isinstance(node, ast.FunctionDef) and node.name != "__init__" and _has_security(node):
                takes.add(node.name)
    assert {"HealthProbe", "Workload", "GroupWorkload", "EosWorkload", "read_back", "AdminWorkload"} <= takes
    missing = [
        f"{path}:{node.lineno} {_name(node.func)}"
        for path, tree in sources.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and _name(node.func) in takes
        and not any(k.arg == "security" for k in node.keywords)
    ]
    assert not missing, f"calls that leave security at its plaintext default: {missing}"


def _has_security(func: ast.FunctionDef) -> bool:
    return any(a.arg == "security" for a in [*func.args.args, *func.args.kwonlyargs])
