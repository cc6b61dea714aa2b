"""Known answers scored in one teacher-forced forward (issue 43 part 4): the same scores as decoding
every item, items proven without ``generate``, and the gold log-probability of a plain forward.

Truths, none from the code under test: decoding every item (``--forced false``, the route of every
earlier run); a *script* model, a one-layer GPT-2 whose weights make its greedy token at position p
a token the test chose (so which items greedy decoding answers with their gold text is known by
construction); ``transformers``' own full-vocabulary logits of prompt + gold; and the tokenizers'
own ``decode`` for the prefix property the proof rests on.
"""

from __future__ import annotations

import random

import pytest
import torch

from ctxlens.lm import from_model
from ctxlens.probes import passkey
from ctxlens.probes.tasks import TaskOptions, rows_for, samples
from ctxlens.tasks import forced as forced_module
from ctxlens.tasks import generate, get_task
from ctxlens.tasks.backends import TransformersBackend
from ctxlens.tasks.forced import Forced, gold_ids
from ctxlens.tasks.scoring import gold_text, proves, score
from tests.conftest import build_model

from ._tokenizers import trained_bpe

WIDTH = 192  # script positions a model can hold: more than any gold + continuation here
TAIL = " and that is all."  # what the script model writes after its gold answer, before the end


def script_model(vocab: int, positions: int, script: dict[int, tuple[int, ...]]):
    """A one-layer GPT-2 whose greedy token at position p is ``script[p]`` whatever the ids before it:
    token and attention/MLP outputs are zero, so the final hidden state is the LayerNorm of p's
    position embedding, a one-hot vector of its own for each scripted position; the LM head row of a
    scripted token holds a 1 in that position's column (a tuple of tokens: the same logit, a tie).
    Unscripted positions see a zero state: every logit 0."""
    from transformers import GPT2Config, GPT2LMHeadModel

    assert len(script) <= WIDTH
    config = GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=WIDTH, n_layer=1, n_head=1, n_inner=8,
                        tie_word_embeddings=False, bos_token_id=vocab - 1, eos_token_id=vocab - 1)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln_" not in name:
                p.zero_()
        head = model.get_output_embeddings().weight  # [vocab, WIDTH]
        for column, (position, tokens) in enumerate(sorted(script.items())):
            model.transformer.wpe.weight[position, column] = 1.0
            for t in tokens:
                head[t, column] = 1.0
    return model


def scripted_lm(tok, positions: int, start: int, gold: list[int], tie_at: int | None = None, lead: str = ""):
    """An LM (``tok`` its tokenizer) that greedily writes ``lead``, ``gold``, then ``TAIL``, then its end
    id from position ``start`` (the last prompt position) on; ``tie_at``: that gold position ties with
    a larger id, which ``argmax`` (the first maximum) passes over, so decoding still writes ``gold``."""
    tail = tok(TAIL, add_special_tokens=False)["input_ids"]
    lead_ids = tok(lead, add_special_tokens=False)["input_ids"] if lead else []
    written = [*lead_ids, *gold, *tail, tok.eos_token_id]
    script = {start + k: (t,) for k, t in enumerate(written) if start + k < positions}  # past them: no decoding
    if tie_at is not None:
        script[start + tie_at] = (gold[tie_at], len(tok) - 2)  # a tie with an id above every gold id here
    lm = from_model(script_model(len(tok), positions, script))
    lm.tokenizer = tok
    return lm


def _rows(lm, task: str, length: int, forced: bool, n: int = 3, **options) -> list[dict]:
    config = TaskOptions(n_samples=n, cache=False, forced=forced, **options)
    cache: dict = {}
    return rows_for(lm, config, cache, samples(lm, config, task, length, cache))


def _gold(tok, sample) -> list[int]:
    return gold_ids(tok, gold_text(get_task(sample.task).family, sample.outputs))


# (tokenizer, task, lengths): every task family, two lengths each, prompts that fit both tokenizers
GRID = [("byte", "niah_single_1", (1024, 1536)), ("byte", "niah_single_3", (1024, 1536)),
        ("byte", "niah_multivalue", (1024, 1536)), ("byte", "vt", (1024, 1536)), ("byte", "fwe", (640, 1024)),
        ("byte", "qa_1", (640, 1024)), ("bpe", "niah_multikey_1", (512, 768)), ("bpe", "cwe", (1536, 2048)),
        ("bpe", "niah_single_2", (512, 768))]


@pytest.mark.parametrize("kind, task, lengths", GRID, ids=[f"{k}-{t}" for k, t, _ in GRID])
def test_forced_scores_equal_decoded_scores_item_by_item(kind, task, lengths, byte_tok, bpe_tok):
    """The script model writes sample 0's gold answer: sample 0 is proven ('forced', 100 either way, its
    decoded answer starting with the stored gold text); every other sample is decoded, as before."""
    tok = byte_tok if kind == "byte" else bpe_tok
    for length in lengths:
        first = generate(task, tok, length, 1, 0, cache=False)[0]
        lm = scripted_lm(tok, length, first.n_tokens - 1, _gold(tok, first))
        forced, decoded = _rows(lm, task, length, True), _rows(lm, task, length, False)
        assert [r["score"] for r in forced] == [r["score"] for r in decoded]
        assert [r["scored_by"] for r in decoded] == ["decoded"] * 3 and decoded[0]["score"] == 100.0
        assert forced[0]["scored_by"] == "forced" and decoded[0]["pred"].startswith(forced[0]["pred"])
        assert decoded[0]["pred"] == (forced[0]["pred"] + TAIL)[:len(decoded[0]["pred"])]  # to the budget
        for f, d in zip(forced[1:], decoded[1:]):
            assert f["scored_by"] == "decoded" and f["pred"] == d["pred"]
        assert all(r["gold_tokens"] > 0 and r["gold_logprob"] <= 0 for r in forced)


def test_a_tie_at_a_gold_position_is_decoded_not_proven(byte_tok):
    task, length = "niah_single_1", 1024
    first = generate(task, byte_tok, length, 1, 0, cache=False)[0]
    lm = scripted_lm(byte_tok, length, first.n_tokens - 1, _gold(byte_tok, first), tie_at=3)
    forced, decoded = _rows(lm, task, length, True, n=1), _rows(lm, task, length, False, n=1)
    assert decoded[0]["score"] == forced[0]["score"] == 100.0  # decoding passes over the tie: the gold
    assert forced[0]["scored_by"] == "decoded" and forced[0]["pred"] == decoded[0]["pred"]


@pytest.mark.parametrize("lead, forced", [(":", True), ("\n", True), (" is", False)])
def test_a_lead_in_before_the_gold_answer_is_forced_after_it(lead, forced, byte_tok):
    """A model that writes ': 7050827' where ' 7050827' was forced (Gemma-3's way): the gold ids are forced
    again after its lead-in when that writes no letter or digit; a lead-in with letters is decoded."""
    task, length = "niah_single_1", 1024
    first = generate(task, byte_tok, length, 1, 0, cache=False)[0]
    lm = scripted_lm(byte_tok, length, first.n_tokens - 1, _gold(byte_tok, first), lead=lead)
    got, truth = _rows(lm, task, length, True, n=1)[0], _rows(lm, task, length, False, n=1)[0]
    assert got["score"] == truth["score"] == 100.0
    assert got["scored_by"] == ("forced" if forced else "decoded")
    assert truth["pred"].startswith(got["pred"]) and got["pred"].startswith(lead)
    assert got["gold_tokens"] == len(_gold(byte_tok, first))  # the canonical gold's tokens and log-probability


def test_a_repetition_penalty_in_the_models_generation_config_proves_nothing(byte_tok):
    task, length = "niah_single_1", 1024
    first = generate(task, byte_tok, length, 1, 0, cache=False)[0]
    lm = scripted_lm(byte_tok, length, first.n_tokens - 1, _gold(byte_tok, first))
    lm.model.generation_config.repetition_penalty = 1.5  # generate applies it: no longer the raw argmax
    forced, decoded = _rows(lm, task, length, True, n=2), _rows(lm, task, length, False, n=2)
    assert [r["scored_by"] for r in forced] == ["decoded"] * 2
    assert [r["pred"] for r in forced] == [r["pred"] for r in decoded]


def test_items_the_forced_forward_proves_never_reach_generate(byte_tok, monkeypatch):
    task, length = "niah_single_1", 1024
    batch = generate(task, byte_tok, length, 4, 0, cache=False)
    lm = scripted_lm(byte_tok, length, batch[0].n_tokens - 1, _gold(byte_tok, batch[0]))
    seen: list[list[int]] = []
    real = lm.model.generate

    def spy(*args, **kwargs):  # the prompts decoded (not the cache reuse check's random ids)
        seen.extend(row for row in kwargs["input_ids"].tolist() if len(row) == batch[0].n_tokens)
        return real(*args, **kwargs)

    monkeypatch.setattr(lm.model, "generate", spy)
    rows = _rows(lm, task, length, True, n=4)
    proven = [s.input_ids for s, r in zip(batch, rows) if r["scored_by"] == "forced"]
    assert proven == [batch[0].input_ids]
    assert len(seen) == 3 and not any(p in seen for p in proven)
    seen.clear()  # a unit whose one item is proven calls generate not at all
    assert _rows(lm, task, length, True, n=1)[0]["scored_by"] == "forced" and seen == []


@pytest.mark.parametrize("family", ["llama", "gemma3_text"])
def test_gold_logprob_is_the_sum_of_a_plain_forwards_log_softmax(family, bpe_tok):
    """The gold tokens' log-probabilities from transformers' own full forward of prompt + gold."""
    lm = from_model(build_model(family, vocab_size=len(bpe_tok)))
    lm.tokenizer = bpe_tok
    config = TaskOptions(n_samples=3, cache=False, max_new_tokens=16)
    cache: dict = {}
    batch = samples(lm, config, "niah_single_2", 256, cache)
    rows = rows_for(lm, config, cache, batch)
    for s, r in zip(batch, rows):
        gold = _gold(bpe_tok, s)[:s.budget]
        ids = torch.tensor([s.input_ids + gold])
        with torch.no_grad():
            logp = torch.log_softmax(lm.model(ids, use_cache=False).logits[0].float(), dim=-1)  # [n, vocab]
        at = torch.arange(s.n_tokens - 1, s.n_tokens - 1 + len(gold))
        truth = float(logp[at, torch.tensor(gold)].sum())
        assert r["gold_tokens"] == len(gold)
        assert r["gold_logprob"] == pytest.approx(truth, rel=1e-4, abs=1e-3)


@pytest.mark.parametrize("family, share", [("llama", True), ("gemma3_text", True), ("llama", False),
                                           ("mamba2", True)])
def test_unproven_rows_decode_from_the_forced_batch_as_from_a_fresh_prefill(family, share, byte_tok, monkeypatch):
    """Rows the forced forward leaves to decoding start from the prompts' cache cut back (llama), from a
    copy kept aside (gemma3's sliding layers cannot be cut), or from nothing (no sharing; mamba2's
    cache is not reusable): their answers equal decoding every row afresh. Row 0 is declared proven
    here (a stand-in forced forward), so the others are a strict subset of their batch."""
    g = torch.Generator().manual_seed(3)
    stem = torch.randint(32, 127, (50,), generator=g).tolist()
    prompts = [stem + torch.randint(32, 127, (30,), generator=g).tolist() for _ in range(4)]
    golds = [[65 + k] * (2 + k) for k in range(4)]  # unequal gold lengths: right-padded in one forward

    def backend() -> TransformersBackend:
        lm = from_model(build_model(family, vocab_size=257))
        lm.tokenizer = byte_tok
        b = TransformersBackend(lm, batch_size=4, share_prefix=share)
        b.eos = set()
        return b

    real = forced_module.forced

    def first_proven(lm, ids, forced_golds, cache=None):  # row 0's gold: the argmax everywhere, as if it were
        found = real(lm, ids, forced_golds, cache)
        return [Forced(list(g) == golds[0], f.logprob, f.lead) for g, f in zip(forced_golds, found)]

    monkeypatch.setattr(forced_module, "forced", first_proven)
    answers = backend().generate_forced(prompts, golds, [6] * 4, lambda i, text: True)
    fresh = backend().generate(prompts, [6] * 4)
    assert [a.scored_by for a in answers] == ["forced", "decoded", "decoded", "decoded"]
    assert [a.text for a in answers[1:]] == fresh[1:]
    assert answers[0].text == byte_tok.decode(golds[0])


def test_gold_text_is_the_answer_as_rulers_prompts_and_examples_write_it():
    assert gold_text("niah", ["7050827"]) == " 7050827"
    assert gold_text("niah", ["1", "2", "3"]) == " 1, 2, 3"
    assert gold_text("vt", ["AAAAA", "BBBBB"]) == " AAAAA BBBBB"  # after "they are: ": two spaces, as the example
    assert gold_text("cwe", ["bear", "occur"]) == " 1. bear 2. occur"
    assert gold_text("fwe", ["ab", "cd", "ef"]) == " ab cd ef"
    assert gold_text("qa", ["Riwenvar Varancor", "Riwenvar"]) == " Riwenvar Varancor"
    assert proves(" 1, 2, 3", ["1", "2", "3"], "all") and not proves(" 1, 2", ["1", "2", "3"], "all")
    assert proves(" B", ["a", "b"], "part")


@pytest.mark.parametrize("kind", ["byte", "bytelevel", "metaspace", "whole"])
def test_decoding_more_ids_keeps_the_decoded_gold_text_as_its_prefix(kind, byte_tok):
    """The proof's premise, per tokenizer: the text of gold ids + any continuation starts with the text of
    the gold ids (special tokens skipped, as the backend decodes), so the continuation cannot undo a
    reference found in the gold text."""
    tok = byte_tok if kind == "byte" else trained_bpe(kind)
    rng = random.Random(0)
    tails = [tok(t, add_special_tokens=False)["input_ids"] for t in (" .", " ,", "'s", "n't", " ?", "\n", " ", "é")]
    tails += [[rng.randrange(len(tok)) for _ in range(rng.randint(1, 12))] for _ in range(40)]
    for task, length in (("niah_single_3", 1024), ("vt", 1024), ("qa_1", 640), ("niah_multivalue", 1024)):
        for s in generate(task, tok, length, 2, 0, cache=False):
            gold = _gold(tok, s)
            text = tok.decode(gold, skip_special_tokens=True)
            if kind != "whole":  # no decoder: its tokens come back space-joined, and the gold text proves nothing
                assert score(text, s.outputs, s.metric) == 100.0
            for tail in tails:
                assert tok.decode(gold + tail, skip_special_tokens=True).startswith(text), (kind, gold, tail)


@pytest.mark.parametrize("style", ["ruler", "corpus", "classic"])
def test_passkeys_proven_by_the_forced_forward_are_the_ones_decoding_retrieves(style, byte_tok):
    probes = passkey.probes(byte_tok, 512, [0.3, 0.7], 2, seed=1, style=style)
    first = probes[0]
    lm = scripted_lm(byte_tok, 600, first.n_tokens - 1, gold_ids(byte_tok, first.gold))
    got = passkey.scored(lm, probes)
    assert [r.hit for r in got] == [passkey.retrieved(lm, p) for p in probes]
    assert got[0].hit and got[0].scored_by == "forced"
    assert [r.scored_by for r in passkey.scored(lm, probes, forced=False)] == ["decoded"] * 4


def test_passkey_forced_forward_runs_under_the_head_masks(byte_tok):
    """Inside ``lm.mask_heads``, the hits equal decoding's under the same masks and the gold log-probability
    is a masked transformers forward's, not the unmasked one's."""
    lm = from_model(build_model("llama", vocab_size=257))
    lm.tokenizer = byte_tok
    probes = passkey.probes(byte_tok, 384, [0.5], 2, seed=0, style="ruler")
    plain = passkey.scored(lm, probes)
    with lm.mask_heads({0: [0, 1], 1: [2]}):
        masked = passkey.scored(lm, probes)
        assert [r.hit for r in masked] == [passkey.retrieved(lm, p) for p in probes]
        p, gold = probes[0], gold_ids(byte_tok, probes[0].gold)
        with torch.no_grad():
            logits = lm.model(torch.cat([p.ids, torch.tensor(gold)])[None], use_cache=False).logits[0]
        logp = torch.log_softmax(logits.float(), dim=-1)[torch.arange(p.n_tokens - 1, p.n_tokens - 1 + len(gold))]
        truth = float(logp[torch.arange(len(gold)), torch.tensor(gold)].sum())
    assert masked[0].gold_logprob == pytest.approx(truth, rel=1e-4, abs=1e-3)
    assert abs(masked[0].gold_logprob - plain[0].gold_logprob) > 1e-3
