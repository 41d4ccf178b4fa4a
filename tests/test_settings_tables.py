"""Every table of company.toml refuses a key it does not know, as the top level does: a typo that loads is a
setting silently not set (`admn = true` quietly removes an admin). The refusal is one line naming the file,
the table's key, the keys that are valid and, when one is close, the one that was meant."""
from __future__ import annotations

from pathlib import Path

import pytest
import tomli_w
from conftest import config_with
from mcp_client import crewlet

from core import config as config_mod
from core.config import SECTIONS, ConfigError
from core.settings import only_known

OPENAI = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "dimensions": 8}
LLM = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
CONFLUENCE = {"url": "https://example.atlassian.net/wiki", "token_env": "CONFLUENCE_API_TOKEN"}


def _with_actor(extra: dict) -> dict:
    return {"actors": {**config_mod.example_config()["actors"], "alex": {"kind": "person", "admin": True, **extra}}}


@pytest.mark.parametrize("changes, key, meant", [
    ({"knowledge": {"backend": "native", "scopes": ["ENG"]}}, "knowledge.scopes", "scope"),
    ({"spaces": {"PROD": {"name": "Product", "leed": "sam"}}}, "spaces.PROD.leed", "lead"),
    (_with_actor({"admn": True}), "actors.alex.admn", "admin"),
    (_with_actor({"credentials": {"plane_tokn_env": "X"}}), "actors.alex.credentials.plane_tokn_env", "plane_token_env"),
    ({"providers": {"embedings": {"provider": "local"}}}, "providers.embedings", "embeddings"),
    ({"providers": {"llm": dict(LLM, modle="x")}}, "providers.llm.modle", "model"),
    ({"log": {"backnd": "file"}}, "log.backnd", "backend"),
    ({"limits": {"page_body_byte": 2048}}, "limits.page_body_byte", "page_body_bytes"),
    ({"company": {"nmae": "Acme"}}, "company.nmae", "name"),
    ({"knowlege": {}}, "knowlege", "knowledge"),
    ({"knowledge": {"backend": "confluence"}, "integrations": {"confluence": dict(CONFLUENCE, tokn_env="X")}},
     "integrations.confluence.tokn_env", "token_env"),
])
def test_a_typo_in_any_table_is_refused_with_the_valid_keys(tmp_path, changes, key, meant):
    f = tmp_path / "company.toml"
    data = config_with(**changes)
    with pytest.raises(ConfigError) as exc:
        config_mod.parse(data, f)
    assert exc.value.key == key
    assert f"did you mean '{meant}'" in exc.value.problem
    assert meant in exc.value.fix.split("use one of: ")[-1].split(", ") or meant in exc.value.fix
    assert str(exc.value).startswith(f"{f}: {key}: ") and "\n" not in str(exc.value)


def test_a_key_far_from_every_valid_one_names_them_without_a_guess(tmp_path):
    data = config_with(spaces={"PROD": {"name": "Product", "colour": "red"}})
    with pytest.raises(ConfigError) as exc:
        config_mod.parse(data, tmp_path / "company.toml")
    assert exc.value.problem == "unknown setting"
    assert exc.value.fix == "remove it, or use one of: name, purpose, lead"


def test_every_table_the_file_may_hold_is_checked(tmp_path):
    """Each section a feature registers is reachable from the top level, and a [providers] that holds only
    sections knows exactly them."""
    tops = {s.table.split(".")[0] for s in SECTIONS}
    data = config_with(**{top: {"no_such_key": 1} for top in tops})
    for top in sorted(tops):
        with pytest.raises(ConfigError) as exc:
            config_mod.parse(config_with(**{top: {"no_such_key": 1}}), tmp_path / "c.toml")
        assert exc.value.key == f"{top}.no_such_key", top
    assert data    # the loop above saw every top-level section


def test_the_kit_lists_allowed_keys_as_the_section_shows_them(tmp_path):
    with pytest.raises(ConfigError) as exc:
        only_known(tmp_path / "c.toml", "integrations", {"jira": {}}, ("confluence", "plane"),
                   problem="unknown integration", what="declare one of",
                   shown=["[integrations.confluence]", "[integrations.plane]"])
    assert exc.value.fix == "remove it, or declare one of: [integrations.confluence], [integrations.plane]"


def test_the_cli_refuses_a_typo_that_would_remove_an_admin(tmp_path):
    """`[actors.alex] admn = true` loaded with exit 0 and left alex without admin; now every command
    refuses the file in one line naming the file, the key and the valid keys."""
    root = tmp_path / "h"
    assert crewlet(root, "init").returncode == 0
    f: Path = root / "company.toml"
    data = config_mod.example_config()
    data["actors"]["alex"] = {"kind": "person", "admn": True}
    f.write_text(tomli_w.dumps(data), encoding="utf-8")
    res = crewlet(root, "spaces")
    assert res.returncode == 1, (res.stdout, res.stderr)
    line = res.stderr.strip()
    assert "\n" not in line, line
    assert str(f) in line and "actors.alex.admn" in line and "did you mean 'admin'" in line
    assert "kind, admin, space, knowledge, credentials" in line


def test_each_section_fills_a_company_field_whose_default_is_the_absent_table(tmp_path):
    """A section registered without its Company field, or with a default that is not what an absent table
    parses to, fails here: a Company made in code (tests, tools) and one loaded from a file agree."""
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(config_mod.Company)}
    for section in SECTIONS:
        assert section.field in fields, section
        f = fields[section.field]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        assert section.parse(tmp_path / "c.toml", None) == default, section
