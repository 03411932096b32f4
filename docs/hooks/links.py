"""Links from a page to a file outside docs/ (`../bench/README.md`) become that file's path.

The pages are read on GitHub too, where such a link works; the site holds only docs/, so the link
becomes the path in the repository. A link to a file that does not exist still fails the build.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError  # type: ignore[import-not-found,unused-ignore]

# [text](../path) outside a code span, the target relative and without a scheme
LINK = re.compile(r"\[(?P<text>[^\]]+)\]\((?P<target>\.\./[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")


def outside(markdown: str, page_path: Path, docs_dir: Path) -> str:
    """`markdown` with each link that leaves `docs_dir` replaced by its text and repository path."""
    root = docs_dir.parent

    def replace(found: re.Match[str]) -> str:
        target = (page_path.parent / found["target"]).resolve()
        if docs_dir in target.parents:
            return found[0]
        if not target.exists():
            raise PluginError(f"{page_path.name}: the link {found['target']} names no file")
        return f"{found['text']} (`{target.relative_to(root)}` in the repository)"

    return LINK.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs: rewrite the page's links out of docs/ before MkDocs validates its links."""
    if page.file.abs_src_path is None:  # a generated page links only inside the site
        return markdown
    docs_dir = Path(config["docs_dir"]).resolve()
    return outside(markdown, Path(page.file.abs_src_path).resolve(), docs_dir)
