"""MkDocs hook: the HTML report's screenshot and PDF stay at docs/report.png and
docs/report.pdf (the README shows them from there) and are served beside the pages.

The pages link them as ``../report.png`` so that they show on GitHub too; the site serves
them at its root, beside the pages, so those links are rewritten to ``report.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

SHARED = ("report.png", "report.pdf")


def on_files(files: Files, *, config: Any) -> Files:
    here = Path(__file__).parent
    for name in SHARED:
        files.append(File.generated(config, name, abs_src_path=str(here / name)))
    return files


def on_page_markdown(markdown: str, **_: Any) -> str:
    for name in SHARED:
        markdown = markdown.replace(f"](../{name})", f"]({name})")
    return markdown
