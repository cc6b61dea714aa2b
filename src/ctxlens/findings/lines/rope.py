"""The RoPE lines: positional heads and masking them (the RoPE-distance paper, Sections 4.2-4.3,
Figures 8-9, Appendix A.3). The paper's quantities come first (the rho ranking, the top heads'
rho and sign, the |rho| spread; every fraction's passkey accuracy and perplexity); the tests are
ctxlens's (``ctxlens.findings.positional`` and ``ctxlens.findings.masking``): a t test across prompts
per head, Bonferroni over heads, each head against its RoPE-zeroed control on the same prompts, and a
randomization test of the top heads against random draws on paired passkeys."""

from __future__ import annotations

from collections.abc import Sequence

from ctxlens.core.papers import named
from ctxlens.findings import masking as mask
from ctxlens.findings import positional as pos
from ctxlens.findings.card import Context, Line, absent, card_line, needs_by_se
from ctxlens.findings.models import has_rope


@card_line("positional_heads", "positional heads (top 5% / 10% by Spearman rho)",
           named("rope-distance", "Sections 4.2-4.3.1"),
           "some heads whose dominant RoPE dimension tracks distance, beyond the same heads with RoPE zeroed "
           "(ctxlens's test: per-prompt rho, t across prompts and paired t against the control, Bonferroni over "
           "heads)", order=9, applies=has_rope, reads=("positional-heads",))
def _positional_heads(ctx: Context) -> Line:
    return positional_heads(_plain(ctx.of("positional-heads")), ctx.model)


@card_line("masking_effect", "masking the top positional heads", named("rope-distance", "Section 4.3.2, Figures 8-9"),
           "passkey accuracy with the top heads masked below as many random heads', perplexity not collapsed "
           "(ctxlens's test: randomization p <= 0.05 at every fraction)", order=10, applies=has_rope,
           reads=("head-masking",))
def _masking_effect(ctx: Context) -> Line:
    return masking_effect(_plain(ctx.of("head-masking")), _plain(ctx.of("positional-heads")), ctx.model)


def _plain(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("transform", "none") == "none"]


def _head(h: Sequence[int]) -> str:
    return f"L{h[0]}H{h[1]}"


def _q(q: Sequence[float] | None) -> str:
    return "-" if q is None else f"{q[1]:.2f} (IQR {q[0]:.2f}-{q[2]:.2f})"


def _ranking_text(rank: dict) -> str:
    """The paper's quantities: each top fraction's heads (rho range, signs) and the |rho| spread."""
    parts = []
    for f, t in rank["top"].items():
        rhos = [h[2] for h in t["heads"]]
        parts.append(f"top {float(f) * 100:g}% ({t['n']} of {rank['n_heads']} heads): rho {rhos[0]:+.2f} "
                     f"({_head(t['heads'][0])}) .. {rhos[-1]:+.2f}, {t['positive']}+ / {t['negative']}-")
    parts.append(f"|rho| median {_q(rank['abs_rho'])}")
    parts += [f"{t}: {_q(q)}" for t, q in rank["abs_rho_by_type"].items()]
    return "; ".join(parts)


def positional_heads(rows: list[dict], model: str) -> Line:
    """The rho ranking of Section 4.3.1 (pooled over the detection inputs, as the paper), then
    ctxlens's presence test on the per-prompt rho rows (``ctxlens.findings.positional.presence_test``)."""
    rank = pos.ranking(rows)
    if not rank["n_heads"] or rank["first"] is None:
        return absent("positional_heads", model, "not measured: no positional-heads rows")
    text = _ranking_text(rank)
    first = rank["first"]
    test = pos.presence_test(rows)
    if not test["n_heads"]:
        return Line("positional_heads", model, first["rho"], text,
                    "not tested: the rows hold rho pooled over the detection texts, no rho per prompt; the presence "
                    f"test (ctxlens's) needs one rho per head and prompt over >= {pos.MIN_PROMPTS} prompts, as the "
                    "paper samples; re-run positional-heads", "untested",
                    {"ranking": rank}, bounds=(-1.0, 1.0))
    n = test["n_prompts"]
    top = test["heads"].get((int(first["layer"]), int(first["head"])))
    ci = pos.head_interval(rows, first["layer"], first["head"])
    value = None if top is None else top["mean"]
    under = n < pos.MIN_PROMPTS or test["mde"] is None or test["mde"] > pos.MIN_RHO
    unc = (f"n = {n} prompts; strongest head {_head((first['layer'], first['head']))} mean per-prompt rho "
           f"{_f(value)}, 95% CI {_ci(ci)} (bootstrap over prompts); t across prompts per head, Bonferroni over "
           f"{test['n_heads']} heads (ctxlens's test); detects mean rho >= {_f(test['mde'], '.2f')}")
    if n < pos.MIN_PROMPTS:
        unc += f" (underpowered: fewer than the paper's {pos.MIN_PROMPTS} prompts)"
    numbers = {"ranking": rank, "n_pass": test["n_pass"], "positive": test["positive"], "negative": test["negative"],
               "by_type": test["by_type"], "level": test["level"], "controlled": test["controlled"]}
    mde = test["mde"]
    if test["controlled"]:
        control = test["control"]
        unc += (f"; each head against its RoPE-zeroed control: paired one-sided t across the same prompts of rho "
                f"with RoPE minus rho without, along the head's sign, Bonferroni over {control['n_heads']} heads "
                f"(ctxlens's test); detects gains >= {_f(control['mde'], '.2f')}")
        numbers.update(n_positional=test["n_positional"], n_beat_control=control["n_pass"],
                       n_pass_zeroed=test["zeroed"]["n_pass"], positional_by_type=test["positional_by_type"])
        mde = None if test["mde"] is None or control["mde"] is None else max(test["mde"], control["mde"])
        under = under or mde is None or mde > pos.MIN_RHO
    return Line("positional_heads", model, value, text, unc, _presence_verdict(test), numbers, n=n, unit="prompts",
                interval=ci, bounds=(-1.0, 1.0), mde=mde, underpowered=under,
                null=bool(test["controlled"] and not test["present"]), effect=pos.MIN_RHO,
                needs=needs_by_se(n, mde, pos.MIN_RHO))


def _passing(test: dict) -> str:
    """"R of H heads pass ctxlens's t test (P positive, N negative)" with the per-layer-type split."""
    types = test["by_type"]
    split = "; ".join(f"{t} {v['pass']} of {v['heads']}" for t, v in types.items()) if len(types) > 1 else ""
    return (f"{test['n_pass']} of {test['n_heads']} heads pass ctxlens's t test ({test['positive']} positive, "
            f"{test['negative']} negative)" + (f"; {split}" if split else ""))


def _presence_verdict(test: dict) -> str:
    """Present only when some head beats its RoPE-zeroed control; rows without the control say so."""
    if not test["controlled"]:
        return ("uncontrolled (the verdict lacks its RoPE-zeroed control, without which a test that passes nearly "
                "every head may measure the statistic, not RoPE; re-run positional-heads with --control rope-zeroed): "
                + _passing(test))
    zeroed, control = test["zeroed"], test["control"]
    against = (f"{control['n_pass']} of {control['n_heads']} beat their RoPE-zeroed control; with RoPE "
               f"{test['n_pass']} of {test['n_heads']} pass the t test, with RoPE zeroed {zeroed['n_pass']} of "
               f"{zeroed['n_heads']}")
    if not test["present"]:
        return f"none beyond the control: 0 of {test['n_heads']} heads pass both ctxlens's tests; {against}"
    types = test["positional_by_type"]
    split = "; ".join(f"{t} {types.get(t, 0)} of {v['heads']}" for t, v in test["by_type"].items()) \
        if len(test["by_type"]) > 1 else ""
    return (f"present, as expected: {test['n_positional']} of {test['n_heads']} heads pass both ctxlens's tests "
            f"({test['positional_positive']} positive, {test['positional_negative']} negative)"
            + (f"; {split}" if split else "") + f"; {against}")


def _f(x: float | None, fmt: str = "+.2f") -> str:
    return "-" if x is None else format(x, fmt)


def _ci(ci: Sequence[float] | None) -> str:
    return "-" if ci is None else f"{ci[0]:+.2f} to {ci[1]:+.2f}"


def _ppl_text(s: dict) -> str:
    ppl = [p for p in s["random_ppl"] if p is not None]
    if s["top_ppl"] is None or not ppl:
        return ""
    return f", ppl {s['top_ppl']:.1f} vs random {min(ppl):.1f}-{max(ppl):.1f}"


def _design_text(test: dict) -> str:
    """The design: the passkeys' prompt lengths and the perplexity's windows."""
    lengths = "/".join(str(n) for n in test["lengths"]) or "-"
    windows = "/".join(str(n) for n in test["window_lengths"])
    ppl = f", perplexity over {test['windows']} window{'s' if test['windows'] != 1 else ''}" + \
        (f" of {windows} tokens" if windows else "") if test["windows"] else ""
    return f"passkeys of {lengths} tokens{ppl}"


def _masking_text(test: dict) -> str:
    """Every fraction's passkey accuracy (top vs the random draws' mean and range) and perplexity,
    and the design (passkey length, perplexity windows)."""
    parts = []
    for f, s in test["fractions"].items():
        draws = [d for d in s["random_draws"] if d is not None]
        if s["top"] is None or not draws:
            parts.append(f"top {float(f) * 100:g}%: not scored" + _ppl_text(s))
            continue
        parts.append(f"top {float(f) * 100:g}%: {s['top']:.2f} vs random {sum(draws) / len(draws):.2f} "
                     f"({min(draws):.2f}-{max(draws):.2f}): {s['effect']:+.2f}" + _ppl_text(s))
    unmasked = "-" if test["none"] is None else f"{test['none']:.2f}"
    ppl = "" if test["none_ppl"] is None else f", ppl {test['none_ppl']:.1f}"
    return "; ".join(parts) + f"; unmasked {unmasked}{ppl}; {_design_text(test)}"


def _same_heads(test: dict, head_rows: list[dict]) -> str:
    """A note when the masked top heads are not the positional-heads line's selection."""
    chosen = {str(float(r["fraction"])): {tuple(h) for h in r["heads"]} for r in head_rows
              if r.get("kind") == "selection" and r.get("heads") is not None}
    notes = []
    for f, s in test["fractions"].items():
        if s["top_heads"] is None or f not in chosen:
            continue
        masked = {tuple(h) for h in s["top_heads"]}
        if masked != chosen[f]:
            notes.append(f"{len(masked & chosen[f])} of {len(masked)} at {float(f) * 100:g}%")
    return ("; masked top heads differ from the positional-heads line's (shared: " + ", ".join(notes) + ")"
            if notes else "")


def _collapse_note(test: dict) -> str:
    hit = [f for f, s in test["fractions"].items() if s.get("collapse")]
    if not hit:
        return ""
    f = hit[-1]
    s = test["fractions"][f]
    ppl = [p for p in s["random_ppl"] if p is not None]
    return (f"general collapse at {float(f) * 100:g}% (ppl {s['top_ppl']:.1f} vs random "
            f"{min(ppl):.1f}-{max(ppl):.1f})")


def _spread_text(test: dict, plan: dict) -> str:
    """Why no design sees the stated drop: the fractions whose random head sets already retrieve as
    little as the top set would ("random 10% head sets already range 0.00-1.00")."""
    scored = [(f, v) for f, v in test["fractions"].items()
              if v["top"] is not None and any(d is not None for d in v["random_draws"])]
    wide = []
    for (f, v), ok in zip(scored, plan["reachable"]):
        if not ok:
            draws = [d for d in v["random_draws"] if d is not None]
            wide.append(f"random {float(f) * 100:g}% head sets already range {min(draws):.2f}-{max(draws):.2f}")
    return "; ".join(wide) + f"; the design cannot detect a drop of {mask.MIN_DROP:g}"


def _plan_text(test: dict, plan: dict) -> str:
    """What the design needs to see the stated drop with 80% power (``positional.masking_plan``)."""
    if not all(plan["reachable"]):
        return _spread_text(test, plan)
    if plan["needs"] is not None:
        return (f"80% power needs {plan['needs']} passkeys at {plan['draws']} draws" if plan["needs"] > test[
            "n_passkeys"] else f"80% power at {test['n_passkeys']} passkeys and {plan['draws']} draws")
    if plan["design"] is not None:
        return (f"80% power needs {plan['design']['draws']} draws and {plan['design']['passkeys']} passkeys "
                f"(no number of passkeys at {plan['draws']} draws)")
    return (f"no design up to {mask.DRAW_LADDER[-1]} draws and {mask.MAX_PASSKEYS} passkeys reaches 80% power to "
            f"detect a drop of {mask.MIN_DROP:g}")


def _power_text(plan: dict) -> str:
    """The simulated power at the rows' design and the model it assumes."""
    spreads = " / ".join(f"{m:.2f} +- {sd:.2f}" for m, sd in plan["spreads"])
    detect = "no drop (not even a top set at 0)" if plan["mde"] is None else f"drops >= {plan['mde']:.2f}"
    return (f"power {plan['power']:.2f} to detect a drop of {mask.MIN_DROP:g} (simulated: each random draw's rate "
            f"from a Beta with the draws' mean +- between-draw SD, {spreads}); detects {detect}")


def masking_effect(mask_rows: list[dict], head_rows: list[dict], model: str) -> Line:
    """Every fraction's top-vs-random passkey accuracy and perplexity (Figures 8-9) with the passkeys'
    length and the perplexity's windows, then ctxlens's randomization test
    (``ctxlens.findings.masking.masking_test``) with the Figure 9 perplexity check; the interval is
    a two-way bootstrap over passkeys and random draws of the largest fraction's effect; the power and
    the design that sees a drop of ``MIN_DROP`` are simulated (``positional.masking_plan``)."""
    test = mask.masking_test(mask_rows)
    if test["verdict"] == "absent":
        return absent("masking_effect", model, "not measured: no scored head-masking passkey rows")
    text = _masking_text(test)
    fracs = test["fractions"]
    largest = max(fracs, key=float)
    effect = fracs[largest]["effect"]
    n = test["n_passkeys"]
    draws = min(s["n_draws"] for s in fracs.values())
    ci = mask.masking_interval(mask_rows, largest)
    ps = " / ".join(f"{float(f) * 100:g}% p = {_f(s['p'], '.3f')}" for f, s in fracs.items())
    numbers = {"fractions": fracs, "none": test["none"], "none_ppl": test["none_ppl"], "n_draws": draws,
               "fraction": float(largest), "lengths": test["lengths"], "windows": test["windows"]}
    same = _same_heads(test, head_rows)
    collapse = _collapse_note(test)
    if test["verdict"] == "untestable" or ci is None and test["verdict"] not in ("nothing",):
        why = (f"not tested: the rows hold {draws} random draws and {n} passkeys per condition"
               + ("" if ci is not None else ", pooled per depth (no per-passkey outcome to pair)")
               + f"; a randomization p cannot go below 1/{draws + 1} (needs >= {mask.MIN_DRAWS} draws) and the design "
               f"needs >= {mask.MIN_PASSKEYS} paired passkeys; re-run head-masking")
        verdict = "untested" + (f"; {collapse}: not specific" if collapse else "")
        return Line("masking_effect", model, effect, text, why + same, verdict, numbers, n=n, unit="passkeys",
                    bounds=(-1.0, 1.0), underpowered=True)
    plan = mask.masking_plan(test)
    numbers["plan"] = plan
    planned = "" if plan is None else f"; {_power_text(plan)}; {_plan_text(test, plan)}"
    unc = (f"n = {n} passkeys (paired), {draws} random draws per fraction; effect at {float(largest) * 100:g}%: "
           f"95% CI {_ci(ci)} (two-way bootstrap over passkeys and random draws); randomization {ps} (ctxlens's "
           f"test){planned}" + same)
    verdict = {"hurts": "top heads hurt more, as expected (p <= 0.05 at every fraction)",
               "collapse": f"not specific: {collapse}",
               "no": "not more than random",
               "nothing": "nothing retrieved unmasked: untested"}[test["verdict"]]
    if test["verdict"] == "no" and plan is not None and plan["needs"] is None:  # why no passkeys help
        verdict += f": {_plan_text(test, plan)}"
    under = n < mask.MIN_PASSKEYS or plan is None or plan["power"] < mask.POWER
    return Line("masking_effect", model, effect, text, unc, verdict, numbers, n=n, unit="passkeys", interval=ci,
                bounds=(-1.0, 1.0), mde=None if plan is None else plan["mde"], underpowered=under,
                null=test["verdict"] == "no", effect=mask.MIN_DROP, needs=None if plan is None else plan["needs"])
