"""MkDocs hook: the HTML report's screenshot and PDF stay at docs/report.png and
docs/report.pdf (the README shows them from there) and are served beside the pages."""

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
