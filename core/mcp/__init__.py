"""`crewlet mcp`: the knowledge app as an MCP server over stdio.

The tools registered in `tools.TOOLS` — the knowledge app's (get_page, list_pages, search_knowledge,
write_page, save_page, comment_on_page, named as the spec names them), a person's answer_knowledge and an
agent's own memory (remember, recall_memory, forget, onboarding_status, mark_onboarded) — and every page as
a resource `crewlet://pages/<id>`.
Every rule is the store's: a tool calls `KnowledgeBase` / the searcher `core.knowledge` chooses, as the actor the server was
started as, and a refusal is the store's own one line, returned as an MCP tool error.

- `session.py`: who the server acts as, over which node; catching up with other processes' writes
  before each call; the one searcher (and so the one embedding model) per process.
- `tools/`: one module per tool (a group's module may export a few), registered in one list
  (`tools/__init__.py`); each declares its description and its one-line hint for the instructions.
- `resources.py`: pages as resources, listed by space.
- `server.py`: the MCP SDK's low-level server wired to the above, served over stdio; its instructions are
  composed from the offered tools' hints.

The MCP SDK is imported by `server.py` alone, so the rest reads (and tests) without it.
"""
