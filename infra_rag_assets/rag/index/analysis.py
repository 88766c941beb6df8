"""Text analysis shared by lexical indexing and querying.

Why a Python analyzer instead of tantivy's ``en_stem``: index-time and query-time analysis
must be *the same function*, otherwise a stemming or splitting mismatch silently turns hits
into misses. Here every term is produced in Python, written to tantivy as a space-joined
string into fields that use tantivy's built-in ``whitespace`` tokenizer (it only splits on
ASCII whitespace: no lowercasing, stemming or length filter), and queries are built as exact
term queries from the very same functions. No emitted term contains whitespace, so the
tokenizer is an identity on our output and both sides agree by construction.
``ANALYZER_VERSION`` is written into the index manifest; bump it whenever the output of any
function here changes so stale indexes are rejected instead of silently mismatching.

Two analyzers:

* ``identifier_terms`` keeps technical tokens whole (``kube-apiserver``, ``maxsurge``,
  ``spec.template.metadata``) *and* adds their parts, so both ``maxSurge`` and ``max surge``
  match. Not stemmed: identifiers are exact.
* ``prose_terms`` is classic English full-text analysis: split on non-alphanumerics, drop stop
  words, Porter2 (Snowball English) stemming, implemented below without dependencies.
"""

from __future__ import annotations

import re
from functools import lru_cache

ANALYZER_VERSION = "1"
MAX_TERM_CHARS = 80  # longer "words" are base64 blobs, hashes or URLs: the parts still index

STOP_WORDS = frozenset(
    """a an and are as at be been but by can could did do does doing for from had has have
    how i if in into is it its me my no not of on or our she should so such than that the
    their them then there these they this those to too was we were what when where which
    while who whom why will with would you your""".split()
)

# A chunk is alphanumeric runs joined by connector punctuation; leading "--" or "/" is dropped.
_CHUNK = re.compile(r"[^\W_]+(?:[-_./:=]+[^\W_]+)*")
# Split a chunk into parts on connectors, but keep dotted numbers (1.28, 10.0.0.1) together.
_PART_SPLIT = re.compile(r"[-_/:=]+|(?<!\d)\.+|\.+(?!\d)")
# camelCase pieces: HTTPServer2 -> HTTP, Server2; IPv6 -> IP, v6; maxSurge -> max, Surge.
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z]{2})|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")
_VERSION = re.compile(r"v(\d+(?:\.\d+)+)")
_WORD = re.compile(r"[^\W_]+")


def identifier_terms(text: str) -> list[str]:
    """Identifier-aware terms: each chunk's whole lowercase form first, then its parts."""
    terms: list[str] = []
    for match in _CHUNK.finditer(text):
        terms.extend(_chunk_terms(match.group()))
    return terms


@lru_cache(maxsize=262144)
def _chunk_terms(chunk: str) -> tuple[str, ...]:
    """Terms of one chunk; cached because identifiers repeat heavily across a corpus."""
    whole = chunk.lower()
    if whole in STOP_WORDS:
        return ()
    out = [whole]
    for part in _PART_SPLIT.split(chunk):
        out.append(part.lower())
        version = _VERSION.fullmatch(part)
        if version:
            out.append(version.group(1))
        if _is_mixed_case(part):
            out.extend(piece.lower() for piece in _CAMEL.findall(part))
    parts = (t for t in out[1:] if len(t) > 1 and t not in STOP_WORDS)
    return tuple(t for t in _unique([whole, *parts]) if len(t) <= MAX_TERM_CHARS)


def _is_mixed_case(part: str) -> bool:
    """camelCase splitting only makes sense for ASCII words mixing upper and lower case."""
    return part.isascii() and part.lower() != part and part.upper() != part


def prose_terms(text: str) -> list[str]:
    """Lowercased, stop-word-free, Porter2-stemmed words of ordinary prose."""
    words = (w.lower() for w in _WORD.findall(text))
    return [stem(w) for w in words if w not in STOP_WORDS and len(w) <= MAX_TERM_CHARS]


ANALYZERS = {"prose": prose_terms, "ident": identifier_terms}


def analyze_for_index(text: str, kind: str) -> str:
    """Terms joined by spaces, for a tantivy field using the ``whitespace`` tokenizer."""
    return " ".join(ANALYZERS[kind](text))


def analyze_query(text: str, kind: str) -> list[str]:
    """The same terms as ``analyze_for_index`` produces, de-duplicated, for term queries."""
    return _unique(ANALYZERS[kind](text))


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))


# --- Porter2 (Snowball English) stemmer -------------------------------------------------
# Reference: https://snowballstem.org/algorithms/english/stemmer.html

_VOWELS = frozenset("aeiouy")
_DOUBLES = ("bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt")
_LI_ENDINGS = frozenset("cdeghkmnrt")
_EXCEPTIONS = {
    "skis": "ski", "skies": "sky", "dying": "die", "lying": "lie", "tying": "tie",
    "idly": "idl", "gently": "gentl", "ugly": "ugli", "early": "earli", "only": "onli",
    "singly": "singl", "sky": "sky", "news": "news", "howe": "howe", "atlas": "atlas",
    "cosmos": "cosmos", "bias": "bias", "andes": "andes",
}  # fmt: skip
_EXCEPTIONS_1A = frozenset("inning outing canning herring earring proceed exceed succeed".split())
_STEP2 = (
    ("ization", "ize"), ("ational", "ate"), ("fulness", "ful"), ("ousness", "ous"),
    ("iveness", "ive"), ("tional", "tion"), ("biliti", "ble"), ("lessli", "less"),
    ("entli", "ent"), ("ation", "ate"), ("alism", "al"), ("aliti", "al"), ("ousli", "ous"),
    ("iviti", "ive"), ("fulli", "ful"), ("enci", "ence"), ("anci", "ance"), ("abli", "able"),
    ("izer", "ize"), ("ator", "ate"), ("alli", "al"), ("bli", "ble"), ("ogi", "og"), ("li", ""),
)  # fmt: skip
_STEP3 = (
    ("ational", "ate"), ("tional", "tion"), ("alize", "al"), ("icate", "ic"),
    ("iciti", "ic"), ("ative", ""), ("ical", "ic"), ("ness", ""), ("ful", ""),
)  # fmt: skip
_STEP4 = tuple("ement ance ence able ible ment ant ent ism ate iti ous ive ize ion al er ic".split())


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Porter2 stem of a lowercase word (``running``, ``runs`` -> ``run``)."""
    if len(word) <= 2 or not word.isascii() or not word.isalpha():
        return word
    if word in _EXCEPTIONS:
        return _EXCEPTIONS[word]
    w = _mark_ys(word)
    r1, r2 = _regions(w)
    w = _step1a(w)
    if w in _EXCEPTIONS_1A:
        return w
    w = _step1c(_step1b(w, r1))
    w = _step4(_step3(_step2(w, r1), r1, r2), r2)
    return _step5(w, r1, r2).replace("Y", "y")


def _is_vowel(w: str, i: int) -> bool:
    return w[i] in _VOWELS


def _mark_ys(w: str) -> str:
    chars = list(w)
    for i, c in enumerate(chars):
        if c == "y" and (i == 0 or chars[i - 1] in _VOWELS):
            chars[i] = "Y"
    return "".join(chars)


def _after_vc(w: str, start: int) -> int:
    """Index just after the first vowel-consonant pair at or after ``start``."""
    for i in range(start + 1, len(w)):
        if not _is_vowel(w, i) and _is_vowel(w, i - 1):
            return i + 1
    return len(w)


def _regions(w: str) -> tuple[int, int]:
    prefix = next((p for p in ("gener", "commun", "arsen") if w.startswith(p)), None)
    r1 = len(prefix) if prefix else _after_vc(w, 0)
    return r1, _after_vc(w, r1)


def _has_vowel(s: str) -> bool:
    return any(c in _VOWELS for c in s)


def _short_syllable_end(w: str) -> bool:
    if len(w) == 2:
        return _is_vowel(w, 0) and not _is_vowel(w, 1)
    return len(w) > 2 and not _is_vowel(w, -3) and _is_vowel(w, -2) and w[-1] not in _VOWELS | {"w", "x", "Y"}


def _step1a(w: str) -> str:
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith(("ied", "ies")):
        return w[:-2] if len(w) > 4 else w[:-1]
    if w.endswith(("us", "ss")):
        return w
    if w.endswith("s") and _has_vowel(w[:-2]):
        return w[:-1]
    return w


def _step1b(w: str, r1: int) -> str:
    for suffix in ("eedly", "eed"):
        if w.endswith(suffix):
            return w[: -len(suffix)] + "ee" if len(w) - len(suffix) >= r1 else w
    for suffix in ("ingly", "edly", "ing", "ed"):
        if w.endswith(suffix):
            stem_ = w[: -len(suffix)]
            return _fix_1b(stem_, r1) if _has_vowel(stem_) else w
    return w


def _fix_1b(w: str, r1: int) -> str:
    if w.endswith(("at", "bl", "iz")):
        return w + "e"
    if w.endswith(_DOUBLES):
        return w[:-1]
    if r1 >= len(w) and _short_syllable_end(w):
        return w + "e"
    return w


def _step1c(w: str) -> str:
    if len(w) > 2 and w[-1] in "yY" and not _is_vowel(w, -2):
        return w[:-1] + "i"
    return w


def _step2(w: str, r1: int) -> str:
    for suffix, repl in _STEP2:
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            if len(base) < r1:
                return w
            if suffix == "ogi" and not base.endswith("l"):
                return w
            if suffix == "li" and (not base or base[-1] not in _LI_ENDINGS):
                return w
            return base + repl
    return w


def _step3(w: str, r1: int, r2: int) -> str:
    for suffix, repl in _STEP3:
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            if len(base) < r1 or (suffix == "ative" and len(base) < r2):
                return w
            return base + repl
    return w


def _step4(w: str, r2: int) -> str:
    for suffix in _STEP4:
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            if len(base) < r2 or (suffix == "ion" and not base.endswith(("s", "t"))):
                return w
            return base
    return w


def _step5(w: str, r1: int, r2: int) -> str:
    if w.endswith("e"):
        base = w[:-1]
        if len(base) >= r2 or (len(base) >= r1 and not _short_syllable_end(base)):
            return base
    elif w.endswith("ll") and len(w) - 1 >= r2:
        return w[:-1]
    return w
