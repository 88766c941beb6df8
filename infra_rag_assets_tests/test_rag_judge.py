"""The support judge (rag/judge): pair rules, calibration maths, and a tiny train → load → score.

The corpus here is a handful of hand-written pages, so every rule can be checked by reading;
the end-to-end test trains the real bundled MiniLM (one encoder layer, 48 pairs, one epoch)
for speed, which proves the plumbing (atomic layout, calibrators, batching), not quality:
quality is eval/train_judge.py's job.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from infra_rag_assets.rag.judge import support_judge
from infra_rag_assets.rag.judge.pairs.judge_pairs import (
    MUTATIONS,
    RELEVANCE,
    SUPPORT,
    build_judge_pairs,
    lexical_features,
    load_train_rows,
    mutate,
    page_split,
    paraphrase,
    polarity_mismatch,
    split_for_calibration,
    window,
)
from infra_rag_assets.rag.judge.support_judge import (
    JUDGE_JSON,
    JudgeRecipe,
    SupportJudge,
    judge_key,
    train_support_judge,
)
from infra_rag_assets.rag.probabilities import auroc, expected_calibration_error, fit_platt, reliability

TOPICS = [
    ("deployment", "Deployment", "replicas", "maxSurge"),
    ("statefulset", "StatefulSet", "ordinals", "podManagementPolicy"),
    ("daemonset", "DaemonSet", "nodes", "updateStrategy"),
    ("job", "Job", "completions", "backoffLimit"),
    ("cronjob", "CronJob", "schedules", "startingDeadlineSeconds"),
    ("replicaset", "ReplicaSet", "selectors", "minReadySeconds"),
    ("service", "Service", "endpoints", "sessionAffinity"),
    ("configmap", "ConfigMap", "keys", "binaryData"),
]


def _chunks() -> list[dict]:
    rows = []
    for n, (slug, kind, noun, field) in enumerate(TOPICS):
        doc = f"kubernetes:concepts_{slug}"
        texts = [
            f"A {kind} manages {noun} for your workload in the cluster. "
            f"The kubelet must not restart a {kind} more than {n + 3} times per hour. "
            f"You can set `{field}` to change how the {kind} rolls out {noun} safely.",
            f"The controller is enabled by default and checks {noun} every {10 + n} seconds. "
            f"If the `{field}` value is missing, the {kind} uses a default of {n + 1} for {noun}. "
            f"Each {kind} object is stored in etcd and never edited by hand in production.",
        ]
        rows += [{"chunk_id": f"{slug}-{i}", "doc_id": doc, "text": t} for i, t in enumerate(texts)]
    return rows


def _train_rows() -> list[dict]:
    return [
        {
            "question": f"How often does the {kind} controller check {noun}?",
            "answer": f"The controller checks {noun} every {10 + n} seconds by default.",
            "source_page": f"concepts_{slug}",
        }
        for n, (slug, kind, noun, _) in enumerate(TOPICS)
    ]


@pytest.mark.unit
def test_mutations_change_one_fact_and_paraphrase_keeps_the_words():
    rng = random.Random(0)
    claim = "The kubelet must not restart a Deployment more than 3 times per hour."
    changed = mutate("number", claim, rng)
    assert changed is not None and "3 times" not in changed and changed.endswith("times per hour.")
    assert mutate("negation", "Pods must restart quickly.", rng) == "Pods must not restart quickly."
    flipped = {mutate("negation", claim, random.Random(seed)) for seed in range(20)}
    assert flipped == {claim.replace("must not", "must"), claim.replace("more", "less")}  # one cue at a time
    swapped = mutate("component", claim, rng)
    assert swapped != claim and ("kubelet" not in swapped or "Deployment" not in swapped)
    ident = mutate("identifier", "Set `maxSurge` to 2 for faster rollouts.", rng, ["`backoffLimit`", "camelCase"])
    assert ident == "Set `backoffLimit` to 2 for faster rollouts."  # same shape: backticked for backticked
    assert all(mutate(kind, "Nothing here changes at all in this plain sentence.", rng) is None for kind in MUTATIONS)
    assert paraphrase("If the value is missing, the Job uses a default.", rng) == (
        "The Job uses a default if the value is missing."
    )
    assert paraphrase("Pods keep logs (for a while) on the node they ran on.", rng) == (
        "Pods keep logs on the node they ran on."
    )
    lead = paraphrase("Pods are shown.", rng)
    assert lead.endswith("pods are shown.") and lead != "Pods are shown."


@pytest.mark.unit
def test_window_holds_the_sentence_and_cuts_at_whitespace():
    text = " ".join(f"word{i}" for i in range(200))
    s = text.index("word100")
    e = s + len("word100 word101")
    lo, hi = window(text, s, e, 120)
    assert lo <= s and e <= hi and hi - lo <= 120
    assert (lo == 0 or text[lo - 1] == " ") and (hi == len(text) or text[hi] == " ")
    assert window("short text", 0, 5, 120) == (0, 10)


@pytest.mark.unit
def test_lexical_features_flag_what_mutations_change():
    passage = "The kubelet restarts a Pod at most 3 times. Set `maxSurge` to tune rollouts."
    assert lexical_features("The kubelet restarts a Pod at most 3 times.", passage) == [0.0, 0.0, 0.0, 0.0, 0.0]
    numbers, idents, negation, terms, polarity = lexical_features("The kubelet never restarts a Pod 5 times.", passage)
    assert numbers == 1.0 and idents == 0.0 and negation == 1.0 and polarity == 1.0 and 0 < terms < 1
    assert lexical_features("Set `maxUnavailable` to tune rollouts.", passage)[1] == 1.0
    # words that point at the source state nothing a passage must hold; an added fact still counts
    leads = ('The guide says: "Set `maxSurge` to tune rollouts."', "Based on the passages, set `maxSurge` to tune it.")
    for lead in leads:
        assert lexical_features(lead, passage, ("terms_absent",)) == [0.0], lead
    assert lexical_features("The documentation says to set `maxSurge` weekly.", passage, ("terms_absent",))[0] > 0
    # numbers that label a source or a step are not claimed numbers; a changed one still is
    labelled = ("Passage 2 says the kubelet restarts a Pod at most 3 times.", "Step 4: restart it 3 times [1].",
                "As steps 7 and 8 show (passage 3), it restarts 3 times.")  # fmt: skip
    for claim in labelled:
        assert lexical_features(claim, passage, ("numbers_absent",)) == [0.0], claim
    assert lexical_features("Passage 2 says it restarts a Pod 4 times.", passage, ("numbers_absent",)) == [1.0]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("claim", "sentence", "flagged"),
    [
        ("Pods are not restarted after a failure.", "Pods are restarted after a failure.", True),
        (
            "No, Kubernetes does recommend a metrics pipeline.",
            "Kubernetes does not recommend any metrics pipeline.",
            True,
        ),
        ("The field is optional.", "The field is required for every Pod.", True),
        ("The flag is always set.", "The flag is never set.", True),
        (
            "Kubernetes doesn't recommend a metrics pipeline.",
            "Kubernetes does not recommend any metrics pipeline.",
            False,
        ),
        ("The feature is disabled by default.", "The feature is not enabled by default.", False),
        ("Without a selector, no Pods are matched.", "A Service without a selector matches no Pods.", False),
        (
            "Secrets are not encrypted at rest by default.",
            "By default, Secrets are stored unencrypted; nothing is encrypted.",
            False,
        ),
    ],
)
def test_polarity_mismatch_compares_what_is_negated(claim, sentence, flagged):
    """Reworded right claims keep their polarity; a flipped negation or an antonym is flagged, even
    when the sentence holds some other negation (which the older presence check missed)."""
    assert polarity_mismatch(claim, sentence) == float(flagged)


@pytest.mark.unit
def test_pairs_are_balanced_deterministic_and_labelled_by_construction():
    chunks, rows = _chunks(), _train_rows()
    pairs = build_judge_pairs(chunks, rows, max_pairs=60, seed=3, window_chars=400)
    again = build_judge_pairs(list(reversed(chunks)), rows, max_pairs=60, seed=3, window_chars=400)
    assert pairs == again and pairs.composition == again.composition  # input order does not matter
    assert pairs != build_judge_pairs(chunks, rows, max_pairs=60, seed=4, window_chars=400)
    comp = pairs.composition
    assert len(pairs) == comp["pairs"] <= 60
    assert comp["support_pos"] == comp["support_neg"] and comp["relevance_pos"] == comp["relevance_neg"]
    assert sum(v for k, v in comp.items() if k.startswith("kind_")) == len(pairs)
    sentences = {" ".join(s.split()) for c in chunks for s in c["text"].split(". ")}
    questions = {r["question"] for r in rows}
    for p in pairs:
        if p.task == RELEVANCE:
            assert p.first in questions
        elif p.kind in MUTATIONS:
            assert p.first.rstrip(".") not in sentences  # changed
        elif p.kind == "sentence":
            assert p.first in p.second  # verbatim in its own window
        elif p.kind == "other_page":
            assert not any(p.second in c["text"] for c in chunks if c["doc_id"] == p.doc_id)
    assert {p.kind for p in pairs} >= {"sentence", "paraphrase", "answer", "relevant", "other_page"}
    assert comp["contradicted"] <= sum(p.kind in MUTATIONS for p in pairs)


@pytest.mark.unit
def test_a_version_without_train_pages_asks_its_headings():
    """A one-source (non-k8s) version: no train question's page is there, so the relevance pairs
    ask its section headings (before: no relevance pairs, and the judge's calibration failed)."""
    chunks = [
        {**c, "doc_id": c["doc_id"].replace("kubernetes:", "prometheus-site:"),
         "text": f"## {c['doc_id'].split('_')[-1].title()} rollout settings\n\n{c['text']}"}
        for c in _chunks()
    ]  # fmt: skip
    pairs = build_judge_pairs(chunks, _train_rows(), max_pairs=60, seed=3, window_chars=400)
    relevance = [p for p in pairs if p.task == RELEVANCE]
    assert {p.label for p in relevance} == {0, 1}
    assert all(p.first.startswith("What about ") and "rollout settings" in p.first for p in relevance)
    positives = [p for p in relevance if p.label == 1]
    assert all(p.first.split()[2].lower() in p.second.lower() for p in positives)  # the section's own sentence
    with_rows = build_judge_pairs(_chunks(), _train_rows(), max_pairs=60, seed=3, window_chars=400)
    assert not any(p.first.startswith("What about ") for p in with_rows)  # only a fallback


@pytest.mark.unit
def test_page_split_and_the_train_split_guard(tmp_path: Path):
    docs = [f"kubernetes:p{i}" for i in range(20)]
    held = page_split(docs + docs, 0.25, seed=1)
    assert len(held) == 5 and held == page_split(list(reversed(docs)), 0.25, seed=1)
    pairs = build_judge_pairs(_chunks(), _train_rows(), max_pairs=60, seed=0, window_chars=400)
    train, calibration, pages = split_for_calibration(pairs, 0.25, seed=1)
    assert sorted(train + calibration, key=repr) == sorted(pairs, key=repr)
    if pages:  # by page: no page on both sides
        assert {p.doc_id for p in calibration} == pages and not pages & {p.doc_id for p in train}
    for task in (SUPPORT, RELEVANCE):  # whichever way it split, each task can be calibrated
        assert {p.label for p in calibration if p.task == task} == {0, 1}
    (tmp_path / "qa_eval.jsonl").write_text('{"question": "q"}\n')
    with pytest.raises(ValueError, match="train split only"):
        load_train_rows(tmp_path / "qa_eval.jsonl")


@pytest.mark.unit
def test_calibration_maths():
    rng = np.random.default_rng(0)
    x = rng.normal(size=4000)
    y = (rng.random(4000) < 1 / (1 + np.exp(-(2.0 * x - 0.5)))).astype(int)
    platt = fit_platt(x, y, ["logit"], l2=0.0)
    assert platt.weights[0] == pytest.approx(2.0, abs=0.2) and platt.bias == pytest.approx(-0.5, abs=0.15)
    probs = platt.apply(x)
    assert expected_calibration_error(probs, y) < 0.03
    assert expected_calibration_error(np.clip(probs + 0.3, 0, 1), y) > 0.2
    table = reliability(probs, y)
    assert sum(r["count"] for r in table) == 4000 and all(0 <= r["observed_rate"] <= 1 for r in table)
    scores, labels = [0.1, 0.4, 0.4, 0.8, 0.3], [0, 1, 0, 1, 1]
    pairs = [(p, n) for p in range(5) for n in range(5) if labels[p] and not labels[n]]
    brute = sum(1.0 if scores[p] > scores[n] else 0.5 if scores[p] == scores[n] else 0.0 for p, n in pairs)
    assert auroc(scores, labels) == pytest.approx(brute / len(pairs))
    assert auroc([0.2, 0.3], [1, 1]) is None
    assert platt == type(platt).from_dict(json.loads(json.dumps(platt.to_dict())))


@pytest.mark.unit
def test_judge_key_is_a_content_address(monkeypatch):
    recipe = JudgeRecipe()
    key = judge_key(recipe, "train", "chunks", "weights")
    assert len(key) == 12 and int(key, 16) >= 0 and key == judge_key(JudgeRecipe(), "train", "chunks", "weights")
    assert key != judge_key(JudgeRecipe(epochs=2), "train", "chunks", "weights")
    assert key != judge_key(JudgeRecipe(lexical_features=False), "train", "chunks", "weights")
    monkeypatch.setattr(support_judge, "FEATURES", (*support_judge.FEATURES, "terms_absent"))
    assert key != judge_key(recipe, "train", "chunks", "weights")  # the calibrator would read other checks
    assert key != judge_key(recipe, "train2", "chunks", "weights") != judge_key(recipe, "train", "chunks", "w2")


@pytest.mark.unit
def test_train_load_score_end_to_end(tmp_path: Path, monkeypatch):
    recipe = JudgeRecipe(
        max_pairs=64, batch_size=16, train_seq_length=64, max_seq_length=96, layers=1, calibration_share=0.25
    )
    pairs = build_judge_pairs(_chunks(), _train_rows(), max_pairs=recipe.max_pairs, seed=0, window_chars=300)
    target = tmp_path / "judges" / "k1"
    steps = []
    record = train_support_judge("all-MiniLM-L6-v2", pairs, target, recipe, progress=lambda _s, t, _l: steps.append(t))
    assert steps and steps[-1] == record["steps"]
    assert record["train_pairs"] + record["calibration_pairs"] + record["report_pairs"] == len(pairs)
    assert sorted(p.name for p in target.parent.iterdir()) == ["k1"]  # staging renamed, nothing left
    saved = json.loads((target / JUDGE_JSON).read_text())
    assert saved["recipe"] == recipe.to_dict() and saved["composition"] == pairs.composition
    assert set(saved["calibrators"]) == {SUPPORT, RELEVANCE} and len(
        saved["calibrators"][SUPPORT]["weights"]
    ) == 1 + len(support_judge.FEATURES)
    assert 0.0 < saved["thresholds"][SUPPORT] < 1.0 and 0.0 < saved["thresholds"][RELEVANCE] < 1.0  # fitted, not 0.5
    with pytest.raises(FileExistsError):
        train_support_judge("all-MiniLM-L6-v2", pairs, target, recipe)

    judge = SupportJudge.load(target)
    assert judge.identity.startswith(f"k1:{saved['trained_weights_hash'][:12]}")
    claims = ["The controller checks replicas every 10 seconds.", "A Job never stores its state in etcd. " * 40]
    passages = [_chunks()[1]["text"], _chunks()[3]["text"] * 10]  # a long claim and a long passage
    probs = judge.support(claims, passages)
    assert len(probs) == 2 and all(0.0 < p < 1.0 for p in probs)
    assert judge.support(claims[::-1], passages[::-1]) == pytest.approx(probs[::-1], abs=1e-6)
    seen = []  # a repeated pair is scored once and answered at each of its places
    scored = judge._scored
    monkeypatch.setattr(judge, "_scored", lambda task, f, s: seen.append(len(f)) or scored(task, f, s))
    again = judge.support([claims[0], claims[1], claims[0], claims[0]], [passages[0], passages[1]] + [passages[0]] * 2)
    assert seen == [2] and again == pytest.approx([probs[0], probs[1], probs[0], probs[0]], abs=0.02)
    monkeypatch.undo()
    rel = judge.relevance(["How often are replicas checked?"] * 3, ["It checks every 10 seconds.", "x", "A Job."])
    assert len(rel) == 3 and all(0.0 < p < 1.0 for p in rel)
    assert judge.support([], []) == [] and judge.relevance([], []) == []
    assert judge.threshold == saved["thresholds"][SUPPORT]
    changed = "The controller checks replicas every 99 seconds."
    spans = judge.unsupported_spans(changed, _chunks()[1]["text"], at=0.0)
    assert spans and all(s["text"] == changed[s["start"] : s["end"]] for s in spans)
    assert judge.unsupported_spans("", "x") == []
    with pytest.raises(ValueError):
        judge.support(["one"], [])
    # calibrated on int8 scores: a torch without quantize_dynamic scores in fp32 and says so
    monkeypatch.setattr(support_judge, "quantized", lambda _model: None)
    fallback = SupportJudge.load(target)
    assert fallback.identity == judge.identity + "+fp32"
    assert fallback.support(claims, passages) == pytest.approx(probs, abs=0.05)


@pytest.mark.unit
def test_auroc_interval_covers_the_figure_and_widens_with_fewer_sources():
    from infra_rag_assets.rag.probabilities import auroc_interval

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 400)
    scores = labels + rng.normal(0, 1.2, 400)
    low, high = auroc_interval(scores, labels)
    assert low < auroc(scores, labels) < high and high - low < 0.15
    # 12 sources of 30 near-copies each (a source's answers share its label and its errors): the
    # rows are not 360 independent draws, and resampling whole sources says so
    grouped_labels = np.repeat(np.arange(12) % 2, 30)
    grouped = np.repeat(np.arange(12) % 2 + rng.normal(0, 1.0, 12), 30) + rng.normal(0, 0.01, 360)
    rows = auroc_interval(grouped, grouped_labels)
    sources = auroc_interval(grouped, grouped_labels, [str(i // 30) for i in range(360)])
    assert sources[1] - sources[0] > 2 * (rows[1] - rows[0])
    assert auroc_interval([0.1, 0.2], [1, 1]) is None  # one label: no AUROC to bound


@pytest.mark.unit
def test_training_sample_keeps_every_real_answer_sentence_beside_the_sample():
    from infra_rag_assets.rag.judge.pairs.judge_pairs import JudgePair
    from infra_rag_assets.rag.judge.support_judge import training_sample

    real = [JudgePair(SUPPORT, "ragtruth_qa_sentence", f"claim {i}", "passage", i % 2, f"rt:{i}") for i in range(30)]
    made = [JudgePair(SUPPORT, "reference", f"answer {i}", "passage", 1, f"page:{i}") for i in range(200)]
    chosen = training_sample(real + made, JudgeRecipe(train_pairs=50))
    assert len(chosen) == 80 and all(p in chosen for p in real)
    assert chosen == training_sample(real + made, JudgeRecipe(train_pairs=50))  # seeded
    plain = training_sample(real + made, JudgeRecipe(train_pairs=50, real_answers_in_full=False))
    assert len(plain) == 50 and training_sample(made[:10], JudgeRecipe(train_pairs=50)) == made[:10]


@pytest.mark.unit
def test_support_threshold_keeps_the_faithful_shapes_it_is_told_to():
    from infra_rag_assets.rag.judge.pairs.judge_data import best_threshold

    # faithful reference answers score 0.3-0.95, defects 0.0-0.5: balanced accuracy alone cuts
    # near 0.5 (losing a third of the references); asked to keep 90 % of them it cuts lower
    refs = list(np.linspace(0.3, 0.95, 20))
    bad = list(np.linspace(0.0, 0.5, 20))
    probs, labels, kinds = refs + bad, [1] * 20 + [0] * 20, ["reference"] * 20 + ["number"] * 20
    free = best_threshold(probs, labels, kinds)
    kept = best_threshold(probs, labels, kinds, (["reference"], 0.9))
    assert kept < free and np.mean(np.array(refs) >= kept) >= 0.9
    assert best_threshold(probs, labels, kinds, (["quote"], 0.9)) == free  # no such positives: no constraint
    # each kept kind on its own: easy quotes (all 0.99) do not let the references fall short
    quotes = [0.99] * 20
    kinds = ["reference"] * 20 + ["quote"] * 20 + ["number"] * 20
    both = best_threshold(refs + quotes + bad, [1] * 40 + [0] * 20, kinds, (["reference", "quote"], 0.9))
    assert np.mean(np.array(refs) >= both) >= 0.9
