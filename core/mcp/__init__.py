"""`crewlet mcp`: the knowledge app as an MCP server over stdio.

The knowledge app's six tools (get_page, list_pages, search_knowledge, write_page, save_page,
comment_on_page), named as the spec names them, and every page as a resource `crewlet://pages/<id>`.
Every rule is the store's: a tool calls `KnowledgeBase` / the searcher `core.knowledge` chooses, as the actor the server was
started as, and a refusal is the store's own one line, returned as an MCP tool error.

- `session.py`: who the server acts as, over which node; catching up with other processes' writes
  before each call; the one searcher (and so the one embedding model) per process.
- `tools/`: one module per tool, registered in one list (`tools/__init__.py`).
- `resources.py`: pages as resources, listed by space.
- `server.py`: the MCP SDK's low-level server wired to the above, served over stdio.

The MCP SDK is imported by `server.py` alone, so the rest reads (and tests) without it.
"""
