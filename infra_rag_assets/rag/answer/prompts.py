"""Named, versioned, hashed prompts for answer generation.

Why a registry instead of string literals at the call site: an evaluation run must be able to
say *which* prompt produced an answer. Every :class:`Prompt` has a stable id
(``name@version``) and a short content hash, both recorded on each answer, so a silent wording
edit shows up as a new hash even when someone forgets to bump the version.

Rules for editing: never change the text of a registered version in place; add
``name@<version+1>`` instead, so old evaluation results stay attributable.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

# The one sentence the answerer emits when the passages do not answer the question. Callers
# detect abstention by looking for it, so it must stay byte-identical across prompt versions.
ABSTENTION = "The indexed documentation does not cover this question."

_QUESTION_SLOT = "{question}"


@dataclass(frozen=True)
class Prompt:
    """A system prompt plus a user-turn instruction template holding a ``{question}`` slot."""

    name: str
    version: int
    system: str
    instructions: str

    @property
    def id(self) -> str:
        """``name@version``: the form recorded on answers and accepted by :func:`get_prompt`."""
        return f"{self.name}@{self.version}"

    @property
    def hash(self) -> str:
        """First 12 hex digits of sha256 over id, system and instructions (NUL-separated)."""
        text = "\x00".join((self.id, self.system, self.instructions))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    def render(self, question: str) -> str:
        """Instructions with the question filled in.

        ``str.replace`` rather than ``str.format``: questions about templating (Helm, Go
        templates, PromQL label matchers) are full of braces that ``format`` would choke on.
        """
        return self.instructions.replace(_QUESTION_SLOT, question.strip())


_ANSWER_WITH_CITATIONS_1 = Prompt(
    name="answer-with-citations",
    version=1,
    system=(
        "You answer engineers' questions about infrastructure software such as Kubernetes, "
        "Prometheus and Argo CD. You answer strictly from the documentation passages supplied "
        "in the user's message, which were retrieved from an index of the official docs. "
        "You never rely on outside knowledge, because an answer that cannot be traced to a "
        "passage cannot be checked by the reader."
    ),
    instructions=(
        "Answer the question below using only the documents above.\n"
        "- Use only facts stated in the documents. Do not add versions, flags, defaults or "
        "commands that the documents do not state.\n"
        "- Cite the passage that supports each claim.\n"
        "- Be concise: give the direct answer first, then only the detail needed to act on "
        "it. Keep field names, flags and commands exactly as the documents write them.\n"
        "- If the documents do not contain the answer, reply with exactly this sentence and "
        f"nothing else: {ABSTENTION}\n"
        "\n"
        f"Question: {_QUESTION_SLOT}"
    ),
)

PROMPTS: dict[str, Prompt] = {p.id: p for p in (_ANSWER_WITH_CITATIONS_1,)}


def get_prompt(name: str) -> Prompt:
    """Look a prompt up by ``name@version``, or by bare ``name`` for its latest version."""
    if name in PROMPTS:
        return PROMPTS[name]
    versions = [p for p in PROMPTS.values() if p.name == name]
    if not versions:
        known = ", ".join(sorted(PROMPTS))
        raise KeyError(f"unknown prompt {name!r}; known: {known}")
    return max(versions, key=lambda p: p.version)
