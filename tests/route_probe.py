"""The private server's app (codeeval/prefect_compat.py, gated patches applied) served by uvicorn,
reporting which of its routers FastAPI built while it served: a test points real CLI runs at it.

    python tests/route_probe.py   # prints the port, serves until its stdin closes, then prints one
                                  # JSON line: the (method, path) routes of each router that was built
"""
from __future__ import annotations

import json
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

os.environ.update(PREFECT_UI_ENABLED="0", PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")


def built_routers(app) -> list[list[list]]:
    """The routes of each included router whose routes FastAPI has built (on a request that
    walked past it), in matching order."""
    from fastapi.routing import _IncludedRouter

    found = []

    def walk(routes) -> None:
        for route in routes:
            if isinstance(route, _IncludedRouter):
                if route._effective_candidates_version is not None:
                    found.append(sorted([method, r.path] for r in route.original_router.routes
                                        for method in sorted(getattr(r, "methods", None) or {"WEBSOCKET"})))
            elif hasattr(getattr(route, "app", None), "routes"):
                walk(route.app.routes)
            elif hasattr(route, "routes"):
                walk(route.routes)

    walk(app.router.routes)
    return found


def main() -> None:
    import uvicorn

    from codeeval import prefect_compat

    patches, note = prefect_compat.gate()
    app = prefect_compat.api_app(patches)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # a request queues in the kernel until the app is up
    print(sock.getsockname()[1], note or "", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on"))

    def stop_at_end_of_input() -> None:  # not a signal: uvicorn raises a signal again once it has stopped
        sys.stdin.read()
        server.should_exit = True

    threading.Thread(target=stop_at_end_of_input, daemon=True).start()
    server.run(sockets=[sock])
    print(json.dumps(built_routers(app)), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
