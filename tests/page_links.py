"""The links of a static page (the leaderboard's, a view's), as a browser follows them from a file or
from a static web server: each href and src, the #fragment stripped, resolved relative to the page."""
from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit


def links(markup: str) -> list[str]:
    """Every href and src of the markup, as the browser reads the attribute (entities decoded)."""
    return [html.unescape(value) for value in re.findall(r'\s(?:href|src)="([^"]*)"', markup)]


def target(page: Path, link: str) -> Path:
    """The file a relative link of `page` opens (its fragment and query left out)."""
    parts = urlsplit(link)
    assert not parts.scheme and not parts.netloc and not link.startswith("/"), f"not a relative link: {link}"
    return (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()


def assert_links_resolve(page: Path, markup: str) -> list[str]:
    """Every link of `markup` (the page's, or its DOM as the browser left it) opens a file that exists,
    inside the page's folder; the links, for the caller's own checks."""
    found = links(markup)
    for link in found:
        path = target(page, link)
        assert path.is_relative_to(page.parent.resolve()) and path.is_file(), f"{page}: {link} -> {path}"
    return found
