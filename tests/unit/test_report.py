import re

import numpy as np

from trainspotter.record.report import html_report, wealth_plot

SUMMARY = {"name": "books<script>", "reject": True, "e_value": 26.4, "p_value": 0.0379, "alpha": 0.05,
           "baseline_p_value": None, "pairs_used": 14, "pairs_available": 80, "pairs_queried": 16,
           "stop_time": 14, "run_id": "abc123"}


def test_report_is_self_contained_and_states_the_decision(tmp_path):
    png = wealth_plot(np.array([1.0, 2.0, 30.0]), 0.05, tmp_path / "w.png", stop_time=3).read_bytes()
    page = html_report(SUMMARY, png, {"gray_ppl": -1.0, "gray_ref_ratio": 2.0})
    assert "Reject H0" in page and "26.4" in page and "1/α = 20" in page
    # nothing to fetch: every image is inline, no external links or scripts
    assert not re.search(r'(src|href)="(https?:|//)', page)
    assert page.count("data:image/png;base64,") == 1
    # user-controlled names are escaped
    assert "books<script>" not in page and "books&lt;script&gt;" in page
    # weights sorted by magnitude
    assert page.index("gray_ref_ratio") < page.index("gray_ppl")


def test_report_without_rejection_says_so(tmp_path):
    png = wealth_plot(np.array([0.9, 0.8]), 0.05, tmp_path / "w.png").read_bytes()
    page = html_report(SUMMARY | {"reject": False, "e_value": 0.8}, png)
    assert "No rejection" in page and "Reject H0" not in page


def test_inconclusive_report_names_the_shift_and_draws_the_blind_wealth(tmp_path):
    blind = {"fired": True, "e_value": 31.0, "pairs_used": 12, "pairs_available": 80,
             "differences": ["log chars: suspect 5.39 vs held-out 5.19 (d = +2.39)"]}
    summary = SUMMARY | {"verdict": "inconclusive", "reject": False, "model_reject": True, "blind": blind,
                         "explanation": "Inconclusive: the held-out set differs from the suspect set."}
    path = wealth_plot(np.array([1.0, 2.0, 30.0]), 0.05, tmp_path / "w.png", blind=np.array([1.5, 4.0, 31.0]))
    page = html_report(summary, path.read_bytes())
    assert "<b>Inconclusive</b>" in page and "Reject H0" not in page
    assert "31 (12 / 80)" in page and "log chars: suspect 5.39" in page
    # the blind wealth is drawn: the plot differs from the same plot without it
    assert path.read_bytes() != wealth_plot(np.array([1.0, 2.0, 30.0]), 0.05, tmp_path / "v.png").read_bytes()
