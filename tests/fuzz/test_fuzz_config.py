"""Fuzz node config loading: `.properties` and TOML files (`read_config_file`, `load_node_config`),
``--override`` items and topic configs (`validate_topic_configs`, what CreateTopics and
IncrementalAlterConfigs hand over from the wire).

Property: loading returns a config or raises `ConfigError`; never a bare KeyError, UnicodeDecodeError,
RecursionError or the like, so the CLI can always name the file and the key. A config that loads
answers its accessors and renders to properties that load back to the same values.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from _decoder_fuzz import FUZZ, TIMEOUT, any_bytes, mutated
from hypothesis import example, given
from hypothesis import strategies as st

from kraftlog.common.config import (
    NODE_CONFIG_DEFS,
    TOPIC_CONFIG_DEFS,
    ConfigError,
    NodeConfig,
    load_node_config,
    parse_properties,
    read_config_file,
    validate_topic_configs,
)

pytestmark = pytest.mark.timeout(TIMEOUT)

_DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "config"
_EXAMPLES = {p.name: p.read_bytes() for p in sorted(_DEPLOY.glob("*.toml"))}
_MINIMAL_PROPERTIES = (
    b"node.id=1\nprocess.roles=broker,controller\n"
    b"controller.quorum.voters=1@127.0.0.1:9093\n"
    b"listeners=BROKER://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
    b"controller.listener.names=CONTROLLER\nlog.dirs=/tmp/kraftlog-fuzz\n"
)

_node_keys = st.sampled_from(sorted(NODE_CONFIG_DEFS))
_text_values = st.text(max_size=20) | st.sampled_from(
    (
        "1",
        "-1",
        "0",
        "true",
        "false",
        "1@h:1",
        "1@[::1]:9093",
        "A://h:1",
        "CONTROLLER",
        "x:PLAINTEXT",
        "9223372036854775808",
        "1e400",
        "nan",
        "٣",
        "\\u00e9",
        ",",
        "a,b",
        " ",
    )
)


def _load_file(suffix: str, raw: bytes) -> NodeConfig | None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"node{suffix}"
        path.write_bytes(raw)
        try:
            read_config_file(path)
        except ConfigError:
            pass
        try:
            cfg = load_node_config(path)
        except ConfigError:
            return None
    _use(cfg)
    return cfg


def _use(cfg: NodeConfig) -> None:
    """What the node does with a loaded config must not fail either."""
    _ = (cfg.node_id, cfg.roles, cfg.log_dirs, cfg.quorum_voters, cfg.topic_defaults())
    if cfg.is_controller:
        _ = cfg.metadata_log_dir
    text = cfg.to_properties(include_defaults=True, mask_passwords=False)
    again = load_node_config(None, [f"{k}={v}" for k, v in parse_properties(text).items()])
    assert dict(again) == dict(cfg)


_suffixes = st.sampled_from((".toml", ".properties", ".conf"))


@FUZZ
@given(_suffixes, any_bytes | st.text(max_size=300).map(str.encode))
def test_config_file_random(suffix: str, raw: bytes) -> None:
    _load_file(suffix, raw)


@FUZZ
@given(st.sampled_from(sorted(_EXAMPLES)), _suffixes, st.data())
@example("broker-101.toml", ".toml", None)  # 'a = [[[[...]]]]': RecursionError escaped tomllib
def test_config_file_mutated(name: str, suffix: str, data: st.DataObject | None) -> None:
    raw = (
        b"a = " + b"[" * 2000 + b"]" * 2000 + b"\n"
        if data is None
        else data.draw(mutated(_EXAMPLES[name]) | mutated(st.just(_MINIMAL_PROPERTIES)))
    )
    _load_file(suffix, raw)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else "nan"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text) + '"'


_toml_scalars = st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | _text_values
_toml_values = _toml_scalars | st.lists(_toml_scalars, max_size=3)


@FUZZ
@given(st.dictionaries(_node_keys, _toml_values, max_size=10))
def test_toml_with_known_keys_and_any_value(settings: dict[str, object]) -> None:
    base = _MINIMAL_PROPERTIES.decode().splitlines()
    lines = [f'"{k}" = {_toml_value(v)}' for k, v in settings.items()]
    for line in base:  # the minimal node, unless the example sets the key itself
        key, _, value = line.partition("=")
        if key not in settings:
            lines.append(f'"{key}" = {_toml_value(value.split(",") if "," in value else value)}')
    _load_file(".toml", "\n".join(lines).encode())


@FUZZ
@given(st.dictionaries(_node_keys, _text_values, max_size=10), st.booleans())
def test_properties_with_known_keys_and_any_value(settings: dict[str, str], as_overrides: bool) -> None:
    items = parse_properties(_MINIMAL_PROPERTIES.decode()) | settings
    if as_overrides:
        try:
            cfg = load_node_config(None, [f"{k}={v}" for k, v in items.items()])
        except ConfigError:
            return
        _use(cfg)
    else:
        _load_file(".properties", "".join(f"{k}={v}\n".replace("\\", "\\\\") for k, v in items.items()).encode())


@FUZZ
@given(st.text(max_size=200))
def test_parse_properties_any_text(text: str) -> None:
    try:
        parse_properties(text)
    except ConfigError:
        pass


@FUZZ
@given(st.lists(st.text(max_size=30), max_size=5))
def test_overrides_any_text(items: list[str]) -> None:
    try:
        load_node_config(None, items)
    except ConfigError:
        pass


@FUZZ
@given(st.dictionaries(st.sampled_from(sorted(TOPIC_CONFIG_DEFS)) | st.text(max_size=10), _text_values, max_size=6))
def test_topic_configs_any_value(configs: dict[str, str]) -> None:
    try:
        validate_topic_configs(configs)
    except ConfigError:
        pass
