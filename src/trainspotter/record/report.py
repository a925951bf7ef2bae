"""Plots and self-contained HTML pages of an audit (wealth trajectory W_t on a log scale with
the 1/α line, decision, feature weights) and of an audit of several suspect sets (e-BH's table and
every set's W_t). A benchmark's are ``trainspotter.evaluation.plots``."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from trainspotter.auditing.explain import EBH_CAPTION  # noqa: E402

__all__ = ["audit_heading", "html_report", "save_figure", "sets_html", "sets_wealth_plot", "wealth_plot"]


def save_figure(fig, path: Path) -> Path:
    """Lay out, write and close a figure (matplotlib's Agg backend: files only)."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def wealth_plot(wealth: np.ndarray, alpha: float, path: Path, title: str = "",
                stop_time: int | None = None, run_start: int = 0, blind: np.ndarray | None = None,
                placebo: np.ndarray | None = None) -> Path:
    """W_0 = 1, W_1..W_n on a log axis; reject H0 once W_t ≥ 1/α (Ville's inequality).
    ``run_start`` > 0 marks where a continued audit's latest run took over; ``blind`` is the
    blind check's wealth on the same pairs (trainspotter.stats.blind), ``placebo`` the placebo
    check's (trainspotter.auditing.placebo), drawn beside it."""
    w = np.concatenate([[1.0], np.asarray(wealth, dtype=float)])
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=120)
    ax.plot(np.arange(len(w)), w, color="tab:blue", lw=1.6, label="wealth $W_t$ (model)")
    if blind is not None and len(blind):
        b = np.concatenate([[1.0], np.asarray(blind, dtype=float)])
        ax.plot(np.arange(len(b)), b, color="tab:orange", lw=1.2, ls="--", label="blind check (texts only)")
    if placebo is not None and len(placebo):
        p = np.concatenate([[1.0], np.asarray(placebo, dtype=float)])
        ax.plot(np.arange(len(p)), p, color="tab:purple", lw=1.2, ls="-.", label="placebo check (reference)")
    ax.axhline(1 / alpha, color="tab:red", ls="--", lw=1, label=f"1/α = {1 / alpha:g}")
    if run_start > 0:
        ax.axvline(run_start, color="grey", ls="-.", lw=1, label=f"this run from t = {run_start + 1}")
    if stop_time is not None:
        ax.axvline(stop_time, color="tab:green", ls=":", lw=1, label=f"stop at t = {stop_time}")
    return _wealth_axes(fig, ax, title or "Testing by betting", path)


def _wealth_axes(fig, ax, title: str, path: Path) -> Path:
    """What every wealth plot shares: the W = 1 line, a log axis, labels, legend; saved."""
    ax.axhline(1, color="grey", lw=0.6)
    ax.set_yscale("log")
    ax.set_xlabel("pairs t")
    ax.set_ylabel("wealth (e-value)")
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8)
    return save_figure(fig, path)


REPORT_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{{ heading }}</title>
<style>
 body { font-family: system-ui, sans-serif; max-width: 860px; margin: 2em auto; color: #222; }
 h1 { font-size: 1.5em; } .verdict { font-size: 1.2em; padding: .6em 1em; border-radius: 6px; }
 .reject { background: #fde2e1; border: 1px solid #d9534f; }
 .keep { background: #e3f4e1; border: 1px solid #5cb85c; }
 .inconclusive { background: #fff4d6; border: 1px solid #e0a800; }
 table { border-collapse: collapse; margin: 1em 0; } td, th { padding: .25em .8em; border-bottom: 1px solid #ddd; text-align: left; }
 td.num { text-align: right; font-variant-numeric: tabular-nums; }
 .bar { display: inline-block; height: .8em; background: #4a7fb5; } .neg { background: #c9734a; }
 small { color: #666; }
</style></head><body>
<h1>{{ heading }}</h1>
{% set style = {'trained on': 'reject', 'no evidence': 'keep', 'inconclusive': 'inconclusive'}[s.verdict] %}
<p class="verdict {{ style }}">
{% if s.verdict == 'trained on' %}<b>Reject H0</b>: the evidence says the suspect set was used to train the model
(e-value {{ '%.4g' % s.e_value }} ≥ 1/α = {{ '%g' % (1 / s.alpha) }}).
{% elif s.verdict == 'inconclusive' and s.guard == 'placebo' %}<b>Inconclusive</b>: a model that never trained on the suspect set tells the sets apart too
(placebo e-value {{ '%.4g' % s.placebo.e_value }} ≥ 1/α); no verdict about training.
{% elif s.verdict == 'inconclusive' and s.guard == 'small' %}<b>Inconclusive</b>: too few pairs to rule out a shift without a reference model; no verdict about training.
{% elif s.verdict == 'inconclusive' %}<b>Inconclusive</b>: the held-out set differs from the suspect set
(blind e-value {{ '%.4g' % s.blind.e_value }} ≥ 1/α = {{ '%g' % (1 / (s.blind.alpha or s.alpha)) }}); no verdict about training.
{% else %}<b>No rejection</b>: not enough evidence that the suspect set was trained on
(e-value {{ '%.4g' % s.e_value }} &lt; 1/α = {{ '%g' % (1 / s.alpha) }}).{% endif %}</p>
<p>{{ s.explanation }}</p>
<table>
<tr><th>e-value at the stop (or now)</th><td class="num">{{ '%.4g' % s.e_value }}</td></tr>
<tr><th>anytime-valid p-value 1/max W</th><td class="num">{{ '%.4g' % s.p_value }}</td></tr>
{% if s.blind %}<tr><th>blind check: e-value (pairs used / available)</th><td class="num">{{ '%.4g' % s.blind.e_value }} ({{ s.blind.pairs_used }} / {{ s.blind.pairs_available }})</td></tr>{% endif %}
{% if s.placebo and s.placebo.ran %}<tr><th>placebo check (<code>{{ s.placebo.model }}</code> in the target's place): e-value (pairs used / available)</th><td class="num">{{ '%.4g' % s.placebo.e_value }} ({{ s.placebo.pairs_used }} / {{ s.placebo.pairs_available }})</td></tr>{% endif %}
<tr><th>fixed-n DI p-value (Maini et al., comparison only)</th><td class="num">{{ '—' if s.baseline_p_value is none else '%.4g' % s.baseline_p_value }}</td></tr>
<tr><th>pairs used / available</th><td class="num">{{ s.pairs_used }} / {{ s.pairs_available }}</td></tr>
<tr><th>pairs queried this run</th><td class="num">{{ s.pairs_queried }}</td></tr>
{% if s.texts_queried %}<tr><th>texts queried this run (each pair a passage against every private twin)</th><td class="num">{{ s.texts_queried }}</td></tr>{% endif %}
<tr><th>stop time</th><td class="num">{{ s.stop_time if s.stop_time is not none else '—' }}</td></tr>
{% for k, v in (s.usage or {}).items() %}<tr><th>{{ k }}</th><td class="num">{{ v }}</td></tr>{% endfor %}
{% for name, a in (s.api or {}).items() %}<tr><th>API mode of <code>{{ name }}</code></th><td>{{ a.summary }}</td></tr>{% endfor %}
</table>
{% if s.record_digest %}<h2>Check this audit</h2>
<p>Sealed record, sha256 <code>{{ s.record_digest }}</code>{{ ' (signed)' if s.record_signed else '' }}. Anyone holding the record
can check it offline, without the model: <code>trainspotter verify {{ s.record or 'record.json' }}</code> replays the blind check
and the e-process pair by pair and checks every hash (the user guide, "Check an audit").</p>{% endif %}
{% if s.baseline_note %}<p><b>e-value and fixed-n p-value.</b> {{ s.baseline_note }}</p>{% endif %}
{% if bounds %}<p><b>Log-probs that are bounds.</b> {{ bounds }}</p>{% endif %}
<h2>Wealth trajectory</h2>
<img alt="wealth trajectory" src="data:image/png;base64,{{ wealth_png }}" style="max-width:100%">
<p><small>W_t on a log scale; the dashed line is 1/α. Under H0 the chance that W ever reaches it is at most α (Ville's inequality).
The blind check bets the same way on the same pairs with scores from the texts alone (length, casing, punctuation, word and character n-grams): when it reaches 1/α the sets differ without any model, and the model's evidence cannot be read as evidence of training.
The placebo check runs the same test on a reference model's own features (a model that never trained on the suspect set), on every available pair: when it reaches 1/α, what the target sees any language model sees.</small></p>
{% if s.blind and s.blind.differences %}<h2>What differs between the sets (texts only)</h2>
<ul>{% for d in s.blind.differences %}<li>{{ d }}</li>{% endfor %}</ul>{% endif %}
{% if weights %}<h2>Scoring-model feature weights</h2>
<p><small>Logistic weights on normalised features after the last pair (positive: more member-like).</small></p>
<table>{% for name, w in weights %}<tr><td><code>{{ name }}</code></td><td class="num">{{ '%+.3f' % w }}</td>
<td><span class="bar {{ 'neg' if w < 0 else '' }}" style="width: {{ (120 * (w|abs) / wmax)|round|int }}px"></span></td></tr>{% endfor %}</table>{% endif %}
{% for title, png in figures %}<h2>{{ title }}</h2><img alt="{{ title }}" src="data:image/png;base64,{{ png }}" style="max-width:100%">{% endfor %}
{% set p = s.provenance %}{% if p %}<h2>What was audited, and how</h2>
<table>
<tr><th>model</th><td><code>{{ p.model.spec }}</code>{% if p.model.snapshot %}, snapshot <code>{{ p.model.snapshot }}</code>{% endif %} (fingerprint <code>{{ p.model.fingerprint }}</code>)</td></tr>
{% for r in p.references %}<tr><th>reference model</th><td><code>{{ r.spec }}</code>{% if r.snapshot %}, snapshot <code>{{ r.snapshot }}</code>{% endif %} (fingerprint <code>{{ r.fingerprint }}</code>)</td></tr>{% endfor %}
{% for f in p.inputs %}<tr><th>{{ 'suspect set' if f.side == 'suspect' else 'held-out set' }}</th>
<td><code>{{ f.path }}</code>: {{ f.passages }} passages, sha256 <code>{{ f.sha256 }}</code></td></tr>{% endfor %}
<tr><th>access</th><td>{{ p.access }}</td></tr>
<tr><th>feature set</th><td>{{ p.feature_set }}{% if s.features %}: {% for c in s.features %}<code>{{ c }}</code>{{ ', ' if not loop.last }}{% endfor %}{% endif %}</td></tr>
<tr><th>test</th><td>preset {{ p.test.preset }}: {{ p.test.strategy }}/{{ p.test.payoff }}, λ_max {{ p.test.lambda_max }},
{{ p.test.scorer }} scorer{{ ', one-sided' if p.test.oriented }}; {{ p.test.batch_pairs }} pairs per batch{% if p.test.max_pairs %}, at most {{ p.test.max_pairs }} pairs{% endif %};
shift check {{ p.test.shift_check }}{{ '; continues its ledger' if p.test.ledger }}</td></tr>
<tr><th>α</th><td class="num">{{ p.alpha }}</td></tr>
<tr><th>seed</th><td class="num">{{ p.seed }}</td></tr>
<tr><th>trainspotter</th><td>{{ p.version }}, git commit <code>{{ p.git_commit }}</code></td></tr>
</table>{% endif %}
<p><small>MLflow run {{ s.run_id }} · trainspotter {{ version }}</small></p>
</body></html>
"""


def audit_heading(name: str | None) -> str:
    """The page's title: the audit's name where it has one of its own (the default name is
    "audit", which read "Dataset-inference audit audit")."""
    return "Dataset-inference audit" + (f" {name!r}" if name and name != "audit" else "")


def html_report(summary: dict, wealth_png: bytes, weights: dict[str, float] | None = None,
                figures: list[tuple[str, bytes]] | None = None) -> str:
    """A self-contained HTML page (images inlined as base64): decision, e-value,
    anytime-valid p-value, pairs and queries, wealth trajectory, feature weights,
    and extra figures (e.g. benchmark ROC curves)."""
    import base64

    from jinja2 import Environment

    from trainspotter import __version__

    b64 = lambda data: base64.b64encode(data).decode("ascii")  # noqa: E731
    ranked = sorted((weights or {}).items(), key=lambda kv: -abs(kv[1]))
    # runs logged before the blind check existed have no verdict of their own
    summary = {"verdict": "trained on" if summary["reject"] else "no evidence", "explanation": "",
               "blind": None, "placebo": None, "guard": None} | summary
    template = Environment(autoescape=True).from_string(REPORT_TEMPLATE)
    from trainspotter.backends.api.positions import bound_note

    return template.render(s=summary, heading=audit_heading(summary.get("name")), wealth_png=b64(wealth_png),
                           weights=ranked, bounds=bound_note(summary.get("usage")),
                           wmax=max([abs(w) for _, w in ranked] + [1e-12]), version=__version__,
                           figures=[(t, b64(p)) for t, p in figures or []])


def sets_wealth_plot(wealth: dict[str, list[float]], alpha: float, path: Path, title: str = "") -> Path:
    """Every suspect set's W_t on one log axis, with e-BH's extreme thresholds: K/α (a set
    there is rejected whatever the others show; it stops querying) and 1/α (the K-th, reached
    by all K sets for all to be rejected)."""
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=120)
    for label, w in wealth.items():
        ax.plot(np.arange(len(w) + 1), np.concatenate([[1.0], w]), lw=1.4, label=label)
    k = len(wealth)
    ax.axhline(k / alpha, color="tab:red", ls="--", lw=1, label=f"K/α = {k / alpha:g}")
    if k > 1:
        ax.axhline(1 / alpha, color="tab:red", ls=":", lw=1, label=f"1/α = {1 / alpha:g}")
    return _wealth_axes(fig, ax, title or "Suspect sets, testing by betting", path)


SETS_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{{ heading }}</title>
<style>
 body { font-family: system-ui, sans-serif; max-width: 900px; margin: 2em auto; color: #222; }
 table { border-collapse: collapse; margin: 1em 0; } td, th { padding: .25em .8em; border-bottom: 1px solid #ddd; text-align: left; }
 td.num { text-align: right; font-variant-numeric: tabular-nums; }
 .reject { background: #fde2e1; } .inconclusive { background: #fff4d6; } small { color: #666; }
</style></head><body>
<h1>{{ heading }}: {{ s.sets|length }} suspect sets</h1>
<p>Held-out set <code>{{ s.heldout }}</code>. <b>{{ s.explanation }}</b></p>
<table>
<tr><th>set</th><th>pairs used / available</th><th>e-value</th><th>blind check fired</th><th>e-BH rejected</th><th>decision</th><th>MLflow run</th></tr>
{% for x in s.sets %}<tr class="{{ {'trained on': 'reject', 'inconclusive': 'inconclusive'}.get(x.verdict, '') }}">
<td><code>{{ x.label }}</code></td><td class="num">{{ x.result.pairs_used }} / {{ x.result.pairs_available }}</td>
<td class="num">{{ '%.4g' % x.result.e_value }}</td><td>{{ 'yes' if x.result.blind.fired else 'no' }}</td>
<td>{{ 'yes' if x.rejected else 'no' }}</td><td>{{ x.verdict }}</td><td><small>{{ x.run_id }}</small></td></tr>
{% endfor %}</table>
<p><small>{{ caption }}</small></p>
<h2>Wealth trajectories</h2>
<img alt="wealth trajectories" src="data:image/png;base64,{{ wealth_png }}" style="max-width:100%">
<p><small>Each set's own audit report (its wealth, blind check, feature weights) is in its MLflow run.
MLflow run {{ s.run_id }} · trainspotter {{ version }}</small></p>
</body></html>
"""


def sets_html(summary: dict, wealth_png: bytes) -> str:
    """A self-contained HTML page of an audit of several suspect sets (``AuditSetsResult``
    and where its runs are): e-BH's decision, one row per set (pairs, e-value, blind check,
    rejected) under what e-BH controls, and every set's wealth trajectory."""
    import base64

    from jinja2 import Environment

    from trainspotter import __version__

    return Environment(autoescape=True).from_string(SETS_TEMPLATE).render(  # no run ids: blank
        s=summary, heading=audit_heading(summary.get("name")), caption=EBH_CAPTION, version=__version__,
        wealth_png=base64.b64encode(wealth_png).decode("ascii"))
