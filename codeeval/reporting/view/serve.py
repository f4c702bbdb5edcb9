"""`codeeval view --serve`: the site on 127.0.0.1 for a quick look (any static server does as well)."""

from __future__ import annotations

import functools
import http.server
from pathlib import Path

from codeeval.reporting.view.links import ENTRY


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass


def forever(site: Path, port: int = 0) -> None:
    """Serve the folder `site` until Ctrl-C; port 0 takes a free one. Loopback only: a run's
    samples are model output and the team's data, not for the network at large."""
    handler = functools.partial(_Quiet, directory=str(site))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"serving {site} at http://127.0.0.1:{server.server_address[1]}/{ENTRY} (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
