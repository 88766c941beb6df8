"""Claim edits for the judge's pairs: light rewordings that keep a claim supported, and the
near-miss changes that break it (a number, a negation or antonym, an identifier, a sibling
component), plus the lexical checks the support calibrator reads beside the model's logit."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from functools import lru_cache

from ...answer.extractive import sentence_spans
from ...index.analysis import prose_terms

# fmt: off
COMPONENT_GROUPS = (
    ("kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"),
    ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"),
    ("Prometheus", "Alertmanager", "Pushgateway"),
    ("application-controller", "repo-server", "argocd-server", "applicationset-controller", "dex-server"),
    ("ConfigMap", "Secret"), ("PersistentVolume", "PersistentVolumeClaim", "StorageClass"),
    ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"), ("Role", "ClusterRole"),
    ("RoleBinding", "ClusterRoleBinding"), ("liveness", "readiness", "startup"),
    ("counter", "gauge", "histogram", "summary"), ("Pod", "Node", "Namespace"),
)
# fmt: on
MUTATIONS = ("number", "negation", "identifier", "component")
LEXICAL_FEATURES = ("numbers_absent", "identifiers_absent", "negation_mismatch", "terms_absent", "polarity_mismatch")
_COMPONENT = {n: re.compile(rf"(?<![\w-]){re.escape(n)}(?=s?(?![\w-]))") for g in COMPONENT_GROUPS for n in g}
# fmt: off
_MODALS = ("must", "should", "is", "are", "will", "does", "do")  # "X" <-> "X not"
_ANTONYMS = (  # swapped both ways, as "negation" mutations
    ("never", "always"), ("enabled", "disabled"), ("enable", "disable"), ("required", "optional"),
    ("can", "cannot"), ("up", "down"), ("maximum", "minimum"), ("before", "after"), ("increase", "decrease"),
    ("more", "less"), ("higher", "lower"), ("true", "false"), ("allow", "deny"), ("include", "exclude"),
)
# fmt: on
_NEGATIONS = tuple(
    (re.compile(p), r) for w in _MODALS for p, r in ((rf"\b{w} not\b", w), (rf"\b{w}\b(?! not)", f"{w} not"))
) + tuple((re.compile(rf"\b{a}\b(?! not)"), b) for x, y in _ANTONYMS for a, b in ((x, y), (y, x)))
NEGATION_CUES = re.compile(r"\b(?:not|never|cannot|no|none|disabled|without)\b|n't\b", re.IGNORECASE)
NUMBER = re.compile(r"(?<![\w.\-/])\d+(?:\.\d+)*(?=(?:%|ms|s|m|h|d|[KMG]i?B?)?(?![\w\-/]))")
# Numbers that label the answer's sources or its own steps ("Passage 2 says", "(passage 3)", "Step 4:",
# "steps 7 and 8", "[2]") state nothing about the subject, so a passage need not hold them.
_LABEL_NUMBER = re.compile(
    r"\b(?:passages?|documents?|docs?|sources?|excerpts?|references?|steps?)\s*#?\s*\d+"
    r"(?:\s*(?:,|and|or|&|-|to)\s*\d+)*\b|\[\d+\]",
    re.IGNORECASE,
)
LEXICAL_RULES = "2"  # bump when a check below changes: judges are addressed by it (2: label numbers)
IDENTIFIER = re.compile(r"`[^`\s]{2,60}`|(?<![\w.`-])[a-z]+[A-Z][A-Za-z0-9]*(?![\w`-])")
_LEADS = ("In short, ", "Put simply, ", "Note that ")
_CLAUSE = re.compile(r"^(If|When|Unless|Once|After|Before) ([^,]{3,120}), (.+?)([.!?])$")
_CONJUNCT = re.compile(r"\b([A-Za-z][\w-]{2,}) (and|or) ([A-Za-z][\w-]{2,})\b")
_PAREN = re.compile(r"\s*\([^()]{1,80}\)")
_WORD = re.compile(r"[A-Za-z]{2,}")
_POLARITY_TOKEN = re.compile(r"[a-z0-9][a-z0-9'-]*|[,;:.!?()]")
_NEGATORS = frozenset("not no never cannot neither nor without none nothing nobody".split())
_SCOPE_ENDS = frozenset(",;:.!?()") | {"but", "and", "or", "while", "whereas", "although"}
_SCOPE = 1  # a negator negates the next content word of its clause: "does not (be) recommend(ed)"
_NOT_ONLY = frozenset(("only", "just", "merely"))  # "not only X but Y" states X
_ADVERBS = frozenset("even also always still yet ever quite really necessarily all".split())  # skipped by a scope
_POLARITY_COVERAGE = 0.5
# Words with which an answer points at its source ("The guide says ...", "Based on the passages,
# ...", "According to the documentation"): they state nothing about the world, so a passage
# that lacks them lacks no claim (stemmed, as ``prose_terms`` writes them).
_ATTRIBUTION = frozenset(
    prose_terms(
        "according based documentation document docs doc guide guides page pages passage passages text article "
        "source sources context section manual tutorial reference references says say said states stated explains "
        "explained mentions mentioned describes described notes noted provided given information"
    )
)
_NOT_CONTENT = (
    frozenset(
        "a an the is are was were be been being do does did has have had will would can could should must may might "
        "to of in on at by for with from as that this these those it its there their they which who".split()
    )
    | _NEGATORS
)


def coverage(claim: str, passage: str, ignore: frozenset[str] = frozenset()) -> float:
    """Share of the claim's stemmed content terms (less ``ignore``) found in the passage (1.0 for no terms)."""
    terms = _terms(claim) - ignore
    return len(terms & _terms(passage)) / len(terms) if terms else 1.0


@lru_cache(maxsize=512)
def _terms(text: str) -> frozenset[str]:
    """Stemmed terms of a text; cached: every sentence of an answer is checked against one passage union."""
    return frozenset(prose_terms(text))


def lexical_features(claim: str, passage: str, names: Sequence[str] = LEXICAL_FEATURES) -> list[float]:
    """What the mutations change, checked cheaply (shares in [0, 1]), for the ``names`` asked
    (of ``LEXICAL_FEATURES``, in their order; only those are computed: this runs on every judged
    sentence): claim numbers (less those labelling a source or a step) and identifiers absent
    from the passage, a negation in the claim but not in the passage sentence most like it (or
    the reverse), claim terms absent, and what a negation negates there (``polarity_mismatch``).
    Words pointing at the source ("the guide says") are not claim terms."""
    best = None

    def most_like() -> str:
        nonlocal best
        if best is None:
            spans = sentence_spans(passage)
            best = max((passage[s:e] for s, e in spans), key=lambda t: coverage(claim, t), default=passage)
        return best

    def value(name: str) -> float:
        if name == "numbers_absent":
            nums, numbers = NUMBER.findall(_LABEL_NUMBER.sub(" ", claim)), set(NUMBER.findall(passage))
            return sum(n not in numbers for n in nums) / len(nums) if nums else 0.0
        if name == "identifiers_absent":
            idents, low = [i.strip("`").lower() for i in IDENTIFIER.findall(claim)], passage.lower()
            return sum(i not in low for i in idents) / len(idents) if idents else 0.0
        if name == "negation_mismatch":
            return float(bool(NEGATION_CUES.search(claim)) != bool(NEGATION_CUES.search(most_like())))
        if name == "terms_absent":
            return 1.0 - coverage(claim, passage, _ATTRIBUTION)
        if name == "polarity_mismatch":
            return polarity_mismatch(claim, most_like())
        raise ValueError(f"unknown lexical feature {name!r}")

    return [value(name) for name in names]


def _negated_words(text: str) -> tuple[set[str], set[str]]:
    """(content words, those of them a negator negates somewhere in ``text``): a negator reaches
    its clause's next content word, past adverbs ("not even allowed"); "not only" negates nothing."""
    words, negated, reach = set(), set(), 0
    for token in _POLARITY_TOKEN.findall(text.lower().replace("\u2019", "'").replace("n't", " not")):
        if token in _SCOPE_ENDS:
            reach = 0
        elif token in _NEGATORS:
            reach = _SCOPE
        elif reach and token in _NOT_ONLY:
            reach = 0
        elif token not in _NOT_CONTENT:
            words.add(token)
            if reach:
                negated.add(token)
                reach -= not (token in _ADVERBS or token.endswith("ly"))
    return words, negated


def polarity_mismatch(claim: str, sentence: str) -> float:
    """1.0 when the claim says the opposite of ``sentence`` (the passage sentence most like it, when
    it holds at least half the claim's terms): a word both share is negated in one and not the
    other ("does recommend" / "does not recommend"), or the claim holds a word where the sentence
    holds its antonym with the same negation ("optional" / "required"). Where the old
    ``negation_mismatch`` only compares whether a negation appears anywhere, this one compares
    what it negates."""
    if coverage(claim, sentence) < _POLARITY_COVERAGE:
        return 0.0  # another statement, not a restatement: nothing to compare polarity with
    claim_words, claim_negated = _negated_words(claim)
    sentence_words, sentence_negated = _negated_words(sentence)
    if (claim_negated ^ sentence_negated) & claim_words & sentence_words:
        return 1.0
    swapped = (
        (a in claim_negated) == (b in sentence_negated)
        for x, y in _ANTONYMS
        for a, b in ((x, y), (y, x))
        if a in claim_words and b in sentence_words and a not in sentence_words and b not in claim_words
    )
    return float(any(swapped))


def mutate(kind: str, claim: str, rng: random.Random, identifiers: Sequence[str] = ()) -> str | None:
    """The claim with one fact changed by ``kind`` (see ``MUTATIONS``), or None when it has none."""
    if kind == "number":
        edits = [(m, [_other_number(m.group(), rng)]) for m in NUMBER.finditer(claim)]
    elif kind == "negation":
        edits = [(m, [m.expand(r)]) for p, r in _NEGATIONS if (m := p.search(claim))]
    elif kind == "identifier":  # another of the same shape: backticked for backticked
        edits = [
            (m, [i for i in identifiers if i.startswith("`") == m.group().startswith("`") and i not in claim])
            for m in IDENTIFIER.finditer(claim)
        ]
    elif kind == "component":
        edits = [
            (m, [o for o in g if o != n]) for g in COMPONENT_GROUPS for n in g for m in _COMPONENT[n].finditer(claim)
        ]
    else:
        raise ValueError(f"unknown mutation {kind!r}")
    edits = [(m, options) for m, options in edits if options]
    if not edits:
        return None
    m, options = rng.choice(edits)
    return claim[: m.start()] + rng.choice(options) + claim[m.end() :]


def _other_number(value: str, rng: random.Random) -> str:
    parts = value.split(".")
    i = rng.randrange(len(parts))
    n = int(parts[i])
    parts[i] = str(rng.choice(sorted({n + 1, n + 2, n * 2, n * 10, max(0, n - 1)} - {n})))
    return ".".join(parts)


def paraphrase(claim: str, rng: random.Random) -> str:
    """A meaning-preserving rewording: clause moved, conjuncts swapped, parenthetical dropped,
    else a lead-in. Crude without a model, but it breaks verbatim matching."""
    options = []
    if m := _CLAUSE.match(claim):
        options.append(f"{m[3][0].upper()}{m[3][1:]} {m[1].lower()} {m[2]}{m[4]}")
    if (m := _CONJUNCT.search(claim)) and not {m[1].lower(), m[3].lower()} & {"the", "then", "that", "this"}:
        options.append(claim[: m.start()] + f"{m[3]} {m[2]} {m[1]}" + claim[m.end() :])
    if (dropped := _PAREN.sub("", claim, 1)) != claim and len(_WORD.findall(dropped)) >= 6:
        options.append(dropped)
    if options:
        return rng.choice(options)
    first = claim.split(" ", 1)[0]
    lowered = claim[0].lower() + claim[1:] if first.istitle() and first.isalpha() else claim
    return rng.choice(_LEADS) + lowered


def claim_text(text: str, min_words: int = 6) -> str | None:
    """A sentence as a claim (whitespace collapsed) when it reads like one, else None."""
    claim = " ".join(text.split())
    ok = 30 <= len(claim) <= 300 and "|" not in claim and claim.rstrip("\"')`*")[-1:] in (".", "!", "?")
    return claim if ok and len(_WORD.findall(claim)) >= min_words and claim[0].isupper() else None


def window(text: str, start: int, end: int, limit: int) -> tuple[int, int]:
    """A span of at most ``limit`` characters around ``[start, end)``, cut at whitespace."""
    if len(text) <= limit:
        return 0, len(text)
    lo = max(0, min(start - max(0, limit - (end - start)) // 2, len(text) - limit))
    hi = min(len(text), max(end, lo + limit))
    while 0 < lo < start and not text[lo - 1].isspace():
        lo += 1
    while end < hi < len(text) and not text[hi].isspace():
        hi -= 1
    return lo, hi
