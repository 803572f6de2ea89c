"""``python -m rltune.server [--port N] [--host H] [--db URL] [--max-concurrent-jobs N]
[--ray-address HOST:PORT] [--url-allow-networks CIDRS] [--s3-workspace-buckets GRANTS]
[--max-json-bytes N] [--max-deployments N] [--max-deployments-per-workspace N]``.

Port 0 picks a free port; the chosen address is written to ``$RLTUNE_HOME/server/server.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys

from rltune.server.settings import DEFAULT_PORT, ServerSettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rltune.server")
    parser.add_argument("--host", default=None)
    parser.add_argument("--port", type=int, default=None, help=f"default {DEFAULT_PORT}")
    parser.add_argument("--db", default=None, help="SQLAlchemy URL (default: SQLite file)")
    parser.add_argument("--max-concurrent-jobs", type=int, default=None)
    parser.add_argument("--max-upload-bytes", type=int, default=None)
    parser.add_argument("--allow-unisolated", action="store_true", default=None,
                        help="serve several workspaces without a function sandbox (warns)")
    parser.add_argument("--ray-address", default=None,
                        help="run jobs' functions as Ray actors on this cluster (docs/ray.md)")
    parser.add_argument("--url-allow-networks", default=None,
                        help="CIDR networks a tenant's download_url / MLflow uri may reach "
                             "besides public addresses (default: none)")
    parser.add_argument("--s3-workspace-buckets", default=None,
                        help="workspace=bucket[/prefix],...: the s3:// datasets the server "
                             "reads for each workspace with its AWS_* keys (default: none)")
    parser.add_argument("--max-json-bytes", type=int, default=None)
    parser.add_argument("--max-deployments", type=int, default=None,
                        help="live deployments on the server (default 8)")
    parser.add_argument("--max-deployments-per-workspace", type=int, default=None,
                        help="live deployments per workspace (default 4)")
    args = parser.parse_args(argv)
    settings = ServerSettings.from_env(host=args.host, port=args.port, db=args.db,
                                       max_concurrent_jobs=args.max_concurrent_jobs,
                                       max_upload_bytes=args.max_upload_bytes,
                                       allow_unisolated=args.allow_unisolated,
                                       ray_address=args.ray_address,
                                       url_allow_networks=args.url_allow_networks,
                                       s3_workspace_buckets=args.s3_workspace_buckets,
                                       max_json_bytes=args.max_json_bytes,
                                       max_deployments=args.max_deployments,
                                       max_deployments_per_workspace=(
                                           args.max_deployments_per_workspace))
    import uvicorn

    from rltune.server.app import create_app, write_server_info

    # Bind first so port 0 becomes a real port we can publish before serving.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        print(f"error: cannot listen on {settings.host}:{settings.port}: {exc}", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(settings), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    async def serve() -> None:
        write_server_info(settings, port)
        await server.serve(sockets=[sock])

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    with contextlib.suppress(OSError):
        (settings.server_dir / "server.json").unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
