"""OCR for PDF pages without a text layer (scans): Tesseract through PyMuPDF's OCR text page.

Why here and not as a pre-pass: only pages that have images and no text are OCR'd, and the
OCR text page feeds the same ``get_text("dict")`` layout code as digital text, so rows,
headings and page spans work alike. MuPDF links Tesseract in; it needs only the language
files (``eng.traineddata``), found through ``TESSDATA_PREFIX`` or the installed
``tesseract`` binary (Debian: ``apt-get install tesseract-ocr tesseract-ocr-eng``).
``INFRA_RAG_OCR=0`` turns it off. Whether OCR is available is part of the PDF parser's
version, so a parse made without OCR is never reused by a build that has it.
"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .... import settings

LANGUAGE = "eng"
DPI = 300  # Tesseract's accuracy drops quickly below ~200 dpi on body-size text
# OCR stops after this many seconds per document, inside the 20 s parse budget (parse/budget.py)
# that would otherwise kill the whole parse: measured 1.5 s for a sparse page, 5-8 s for a dense
# A4 page at 300 dpi on the shared 2-core host (load ~11, 2026-12-04). Later scans are noted.
OCR_BUDGET_S = 12.0
INSTALL_HINT = "to OCR scanned pages: apt-get install tesseract-ocr tesseract-ocr-eng"


@dataclass(frozen=True)
class OcrEngine:
    """Where Tesseract's language files are ('' when OCR cannot run) and, if so, why not."""

    tessdata: str
    why_not: str = ""

    @property
    def available(self) -> bool:
        return bool(self.tessdata)


def ocr_engine() -> OcrEngine:
    """The OCR this process can run now (cached per setting, so a test's env change applies)."""
    return _engine(settings.ocr(), settings.tessdata_prefix())


@functools.lru_cache(maxsize=8)
def _engine(enabled: bool, prefix: str) -> OcrEngine:
    if not enabled:
        return OcrEngine("", f"OCR is off (INFRA_RAG_OCR=0); unset it {INSTALL_HINT.split(': ')[0]}")
    folder = prefix or _installed_tessdata()
    if not folder:
        return OcrEngine("", f"Tesseract not found; {INSTALL_HINT}")
    if not (Path(folder) / f"{LANGUAGE}.traineddata").is_file():
        return OcrEngine("", f"no {LANGUAGE}.traineddata in {folder} (TESSDATA_PREFIX); {INSTALL_HINT}")
    return OcrEngine(folder)


def _installed_tessdata() -> str:
    try:
        done = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    match = re.search(r'List of available languages in "(.+?)/?"', done.stdout + done.stderr)
    return match.group(1) if match else ""


def ocr_textpage(page, flags: int, engine: OcrEngine):
    """An OCR'd text page of ``page`` (full page, at ``DPI``) for ``page.get_text(textpage=...)``."""
    return page.get_textpage_ocr(flags=flags, language=LANGUAGE, dpi=DPI, full=True, tessdata=engine.tessdata)


def version_suffix() -> str:
    """'+ocr' when scanned pages can be read here: part of the PDF parser's version."""
    return "+ocr" if ocr_engine().available else ""
