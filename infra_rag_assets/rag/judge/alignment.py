"""The support judge's network: MiniLM's encoder over (claim, passage) jointly, read out by how
well each claim token is matched in the passage (``AlignmentScorer``), and a per-token
unsupported logit for span labels (``TokenHead``).

A pooled read of the claim tokens' contextual states and shortfall features beside mean and
worst were tried as a richer head (2026-12-07, all TRAIN pairs): RAGTruth QA sentence AUROC
0.779 DEV / 0.771 REPORT against 0.792 / 0.794 for this head, so this head stays
(docs/answers.md, "Recipe experiments").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


class AlignmentScorer(torch.nn.Module):
    """MiniLM's encoder over (claim, passage) jointly, scored by how well each claim token is
    matched: for every claim token its best cosine to any passage token, then the mean and the
    minimum over the claim (one changed number or name is one unmatched token), and a linear
    logit on those two.

    Not ``AutoModelForSequenceClassification``: its head reads the [CLS] state, which in
    all-MiniLM-L6-v2 (trained with mean pooling) is nearly the same for every input, so a few
    thousand pairs left the loss at ln 2. A mean-pooled head learned slowly too (support AUROC
    0.65 after 900 pairs, this head 0.94: tuning notes in eval/results/support_judge.json).
    """

    def __init__(self, encoder: Any, skip: int, sep_id: int, task_tokens: Sequence[int]) -> None:
        super().__init__()
        self.encoder = encoder
        self.skip = skip  # [CLS] + the task prefix: not claim tokens
        self.sep_id = sep_id  # [SEP] ends both segments: not a token to match
        self.register_buffer("task_tokens", torch.tensor(list(task_tokens)), persistent=False)
        self.head = TaskHead(len(task_tokens), 2)
        self.token_head = TokenHead()

    def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any, tokens: bool = False) -> Any:
        """The pair logit; with ``tokens`` also (per-token unsupported logits, claim-token mask)."""
        hidden = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        real = attention_mask.bool() & (input_ids != self.sep_id)
        claim, passage = real & (token_type_ids == 0), real & (token_type_ids == 1)
        claim[:, : self.skip] = False
        unit = torch.nn.functional.normalize(hidden, dim=-1)
        sim = (unit @ unit.transpose(1, 2)).masked_fill(~passage.unsqueeze(1), -1.0)
        best = sim.max(-1).values  # each token's best passage match
        count = claim.sum(1).clamp(min=1)
        mean = (best * claim).sum(1) / count
        worst = best.masked_fill(~claim, 1.0).min(1).values
        task = (input_ids[:, 1:2] == self.task_tokens).float().argmax(-1)  # the prefix's first token
        logit = self.head(torch.stack([mean, worst], -1), task)
        return (logit, self.token_head(best), claim) if tokens else logit


class TokenHead(torch.nn.Module):
    """Per claim token, the logit that it is unsupported, from its best passage match (a token
    no passage token resembles is what a span label marks). Starts at: unsupported below a
    cosine of ~0.7; trained by the token loss where the data has span labels."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(-10.0))
        self.bias = torch.nn.Parameter(torch.tensor(7.0))

    def forward(self, best: Any) -> Any:
        return best * self.scale + self.bias


class TaskHead(torch.nn.Module):
    """One linear logit per task over the alignment features, starting as their plain sum
    (already a useful score: AUROC ~0.92 untrained) rather than from noise."""

    def __init__(self, tasks: int, features: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(tasks, features))
        self.bias = torch.nn.Parameter(torch.zeros(tasks))

    def forward(self, features: Any, task: Any) -> Any:
        return (features * self.weight[task]).sum(-1) + self.bias[task]
