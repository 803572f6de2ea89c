"""An MCP server (stdio) with one tool, ``search``, over the bundled corpus corpus/corpus.jsonl
(not under data/, which a registered workspace archive leaves out).

Run it alone with ``python mcp_server.py``; the rollout starts it as a subprocess and talks
to it with the MCP client. Ranking: the number of query words a passage shares with the query.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as _Server
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server

CORPUS = [json.loads(line) for line in
          (Path(__file__).parent / "corpus" / "corpus.jsonl").read_text().splitlines() if line]
server = _Server("corpus-search")


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


@server.tool()
def search(query: str, k: int = 2) -> str:
    """Search the corpus; returns the k best passages, one per line."""
    q = _words(query)
    ranked = sorted(CORPUS, key=lambda d: (-len(q & _words(d["text"])), d["id"]))
    hits = [d for d in ranked[: max(1, min(k, 5))] if q & _words(d["text"])]
    return "\n".join(f"[{d['id']}] {d['text']}" for d in hits) or "no results"


if __name__ == "__main__":
    server.run()
