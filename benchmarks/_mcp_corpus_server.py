"""The multi-hop benchmark's tool: a real local MCP server (streamable HTTP) over a fact corpus.

One tool, ``search(query, k=1)``: the ``k`` best passages of the corpus (a JSON Lines file of
``{"id", "key", "text"}``, written by ``agentic_compare.py --task multihop``), answered after a
lognormal delay (median ``--median`` s, log-sd ``--sigma``: the defaults 0.3 s and 0.82 put the
99th percentile near 2 s) and failing (an MCP tool error) at rate ``--fail`` (default 1 %).
``GET /stats`` counts calls, failures, the delays served and the peak of calls in flight.
Started and stopped by ``agentic_compare.py``; the MCP endpoint is ``http://127.0.0.1:PORT/mcp``:

    python benchmarks/_mcp_corpus_server.py --corpus corpus.jsonl --port-file /tmp/port
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "agentic_ws"))
from _tool_service import Latency, add_latency_args
from functions.multihop_task import search_corpus


def build_server(corpus: list[dict], median: float, sigma: float, fail: float, seed: int):
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    server = MCPServer("fact-corpus")
    latency = Latency(median, sigma, fail, seed)
    stats = latency.stats

    @server.tool()
    async def search(query: str, k: int = 1) -> str:
        """Search the fact corpus; returns the k best passages, one per line."""
        if await latency.wait():
            raise ToolError("search service unavailable")  # an is_error result, not a crash
        return search_corpus(corpus, query, k)

    @server.custom_route("/stats", methods=["GET"])
    async def get_stats(request: Request) -> JSONResponse:
        return JSONResponse(stats)

    return server


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--port-file", type=Path, required=True)
    add_latency_args(ap)
    args = ap.parse_args()
    logging.getLogger("mcp").setLevel(logging.WARNING)  # not a line per request
    corpus = [json.loads(line) for line in args.corpus.read_text().splitlines() if line]
    server = build_server(corpus, args.median, args.sigma, args.fail, args.seed)
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                            access_log=False)
    web = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(web.serve())
        while not web.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        args.port_file.write_text(str(web.servers[0].sockets[0].getsockname()[1]))
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
