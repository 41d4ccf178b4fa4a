"""Publishing by assistant, the spec's native path: an MCP client asked to publish a directory calls
write_page per file — parents first, and a title that exists is read with get_page and saved with
save_page against the revision it read. Here for examples/company, through a real client session, and
the result set against what `crewlet import` publishes from the same files."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from mcp_client import ROOT, call, connect, crewlet, crewlet_json

from core import config as config_mod

pytestmark = pytest.mark.anyio

EXAMPLES = ROOT / "examples" / "company"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def empty_home(root: Path) -> Path:
    """The example company's spaces and actors, and no page yet."""
    assert crewlet(root, "init", "--operator", "alex").returncode == 0
    config_mod.write(root / "company.toml", config_mod.example_config())
    return root


def read_doc(path: Path) -> dict:
    """What an assistant reads off a file: the space is its directory, the title its frontmatter `title:`
    or its first `# ` heading (which then leaves the body), `parent:` the page to file it under."""
    text = path.read_text(encoding="utf-8")
    meta: dict = {}
    if text.startswith("---\n"):
        end = text.index("\n---\n", 4)
        meta = yaml.safe_load(text[4:end]) or {}
        text = text[end + 5:]
    lines = text.split("\n")
    title = meta.get("title")
    if title is None:
        at = next(i for i, line in enumerate(lines) if line.startswith("# "))
        title = lines[at][2:].strip()
        del lines[at]
        while at < len(lines) and not lines[at].strip():
            del lines[at]
    body = "\n".join(lines).lstrip("\n")
    return {"container": path.parent.name, "title": str(title), "body": body, "parent": meta.get("parent")}


async def publish(client, directory: Path) -> dict[str, str]:
    """What the assistant does: parents first, write_page per file, save_page over a title that exists."""
    docs = [read_doc(p) for p in sorted(directory.glob("*/*.md"))]
    docs.sort(key=lambda d: d["parent"] is not None)      # a page's parent is published before it
    outcome = {}
    for d in docs:
        parent = f"{d['container']}/{d['parent']}" if d["parent"] else None
        result = await client.call_tool("write_page", {"container": d["container"], "title": d["title"],
                                                       "body": d["body"], **({"parent": parent} if parent else {})})
        if not result.is_error:
            outcome[f"{d['container']}/{d['title']}"] = "created"
            continue
        assert result.structured_content["error"] == "title_taken", result.content[0].text
        _, page = await call(client, "get_page", ref=f"{d['container']}/{d['title']}")
        _, saved = await call(client, "save_page", ref=page["id"], body=d["body"], base_revision=page["revision"],
                              message="published from the docs directory")
        outcome[f"{d['container']}/{d['title']}"] = "saved" if saved["revision"] > page["revision"] else "unchanged"
    return outcome


def pages_of(home: Path) -> dict[str, tuple[str, str | None]]:
    """Every page: address → (body, parent's title)."""
    out = {}
    for space in ("ENG", "HOME", "LEAD", "PROD"):
        stack = [p["id"] for p in crewlet_json(home, "pages", space)["pages"]]
        while stack:
            page = crewlet_json(home, "page", "show", stack.pop())
            parent = page["ancestors"][-1]["title"] if page["ancestors"] else None
            out[f"{page['container']}/{page['title']}"] = (page["body"].strip(), parent)
            stack += [c["id"] for c in page["children"]]
    return out


async def test_an_assistant_publishes_examples_company_with_write_page_then_updates_it(tmp_path):
    home = empty_home(tmp_path / "published")
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    async with connect(home, "alex") as client:        # a person publishing: the org root is theirs to fill
        first = await publish(client, docs)
    assert set(first.values()) == {"created"} and len(first) == 10

    # the same pages `crewlet import` publishes from the same files
    imported = empty_home(tmp_path / "imported")
    assert crewlet(imported, "import", str(docs)).returncode == 0
    assert pages_of(home) == pages_of(imported)

    # edit one file and publish again: that page is saved over the revision read, the rest are unchanged
    runbook = docs / "ENG" / "Deploy Runbook.md"
    runbook.write_text(runbook.read_text(encoding="utf-8") + "\nAsk in #deploys when in doubt.\n", encoding="utf-8")
    async with connect(home, "alex") as client:
        second = await publish(client, docs)
    assert second.pop("ENG/Deploy Runbook") == "saved"
    assert set(second.values()) == {"unchanged"}
    shown = crewlet_json(home, "page", "show", "ENG/Deploy Runbook")
    assert shown["revision"] == 2 and shown["body"].endswith("Ask in #deploys when in doubt.\n")
    assert crewlet_json(home, "page", "history", "ENG/Deploy Runbook")[0]["message"] == "published from the docs directory"
