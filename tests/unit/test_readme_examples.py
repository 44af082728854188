"""README.md opens with the two commands, and the config examples of the manual (docs/configuration.md)
load with the real loader (documentation that cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

from kraftlog.common import config as common_config

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
CONFIGURATION = REPO / "docs" / "configuration.md"


def _blocks(lang: str, doc: Path = README) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)


def test_readme_opens_with_the_two_commands() -> None:
    quick = _blocks("sh")[0]
    assert [line.split("#")[0].strip() for line in quick.strip().splitlines()] == ["make run", "make test"]


def test_toml_and_properties_examples_load(tmp_path: Path) -> None:
    (toml_text,) = _blocks("toml", CONFIGURATION)
    (props_text,) = _blocks("properties", CONFIGURATION)
    toml_file = tmp_path / "node.toml"
    props_file = tmp_path / "node.properties"
    toml_file.write_text(toml_text)
    props_file.write_text(props_text)
    from_toml = common_config.load_node_config(toml_file)
    from_props = common_config.load_node_config(props_file, ["log.segment.bytes=1073741824"])
    assert from_toml.node_id == from_props.node_id == 1
    assert from_toml.roles == from_props.roles
    assert from_toml.quorum_voters == from_props.quorum_voters
    assert from_toml.log_dirs == from_props.log_dirs
