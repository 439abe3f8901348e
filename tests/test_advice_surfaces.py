"""Right-sizing on the surfaces (CLI, page, wiki export) and targets in the question (users under a
memory and speed floor, tokens per day)."""

import subprocess

from advice_common import KN, PRICE_H100

from kb.engine import answer
from kb.query.parse import parse

# ---------------------------------------------------------------- surfaces

def kbq(*args):
    return subprocess.run(["kbq", *args], capture_output=True, text=True, check=False, timeout=120)


def test_cli_sort_prices_and_options(tmp_path):
    bad = kbq("--sort", "cots", "which gpu for 7b")
    assert bad.returncode == 2 and "did you mean 'cost'" in bad.stderr
    out = kbq("--options", "--no-trace", "serve 70b int4 on h100")
    assert out.returncode == 0 and "OTHER CONFIGURATIONS" in out.stdout and "buy $" in out.stdout
    assert "WHAT WOULD FIT" not in out.stdout        # it fits: the options are not "what to change"
    (tmp_path / "p.yaml").write_text('as_of: "2026-11"\nprices:\n' + PRICE_H100, encoding="utf-8")
    out = kbq("--prices", str(tmp_path / "p.yaml"), "--no-trace", "serve 70b int4 on h100")
    assert out.returncode == 0 and "$20,000 per card" in out.stdout
    md = kbq("--markdown", "which gpu for 7b")
    assert "ranked by value" in md.stdout and "buy $" in md.stdout


def test_page_shows_recommendation_costs_and_options():
    from server import create_app

    client = create_app().test_client()
    page = client.get("/", query_string={"q": "can I run llama 3 70B on a 4090"}).data.decode()
    assert "What it costs" in page and "What to change so it fits" in page
    # an option links the Workload with its change, written back by kb.query.unparse: the
    # first words query.yaml lists (focus 'can i run'), the catalogue's ids
    assert 'href="/?q=can+i+run+llama-3-70b+int4+on+2x+rtx-4090"' in page
    page = client.get("/", query_string={"q": "which gpu for 13b lora"}).data.decode()
    assert "Recommendation" in page and "Ranked by value" in page and "<script" not in page


# ---------------------------------------------------------------- targets in the question

def test_max_users_under_memory_and_speed_floor():
    def solve(floor=None):
        w = parse("max users for 70B int4 on h200", KN)
        w.speed_floor_tok_s = floor
        return answer(w, KN, "q")
    free, bound = solve(), solve(60.0)
    assert "Memory binds" in free.verdict
    n = bound.question["value"]
    assert n < free.question["value"]
    assert bound.gpus[0].decode_tokens_per_s >= 60                 # n users still get 60 tok/s each
    more = parse(f"serve 70B int4 {int(n) + 1} users on h200", KN)
    assert answer(more, KN, "q").gpus[0].decode_tokens_per_s < 60   # one more user does not
    assert "The speed floor binds" in bound.verdict and "under 60" in bound.verdict


def test_tokens_per_day_is_a_target():
    w = parse("serve 70b int4 16 users on h100", KN)
    w.tokens_per_day = 1e12                                          # more than any one card makes
    g = answer(w, KN, "q").gpus[0]
    assert g.meets_target is False
    w = parse("serve 70b int4 16 users on h100", KN)
    w.tokens_per_day = 1e6
    assert answer(w, KN, "q").gpus[0].meets_target is True


def test_page_shows_the_price_pages_behind_each_rent_figure():
    from server import create_app

    page = create_app().test_client().get("/", query_string={"q": "serve 70b int4 on h100 sxm"}).data.decode()
    # H100 SXM: six listings on five pages, $2.49-$4.76 (4.76 / 2.49 = 1.9, at least the rules' 1.5)
    assert "median of 6 on 5 pages: $2.49–$4.76 <strong>(they disagree)</strong>" in page


def test_export_prices_page_lists_each_source(tmp_path):
    out = kbq("export", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "prices.md").read_text(encoding="utf-8")
    listed = text.split("## Cloud prices, each source", 1)[1].split("## How configurations", 1)[0]
    h100 = [line for line in listed.splitlines() if line.startswith("| NVIDIA H100 SXM5 80GB |")]
    assert len(h100) == len(KN.prices["h100-sxm5"]["cloud"]) == 6
    for c in KN.prices["h100-sxm5"]["cloud"]:
        assert any(f"(sources.md#src-{c['source']})" in line and f"${c['usd_per_hour']:.2f}" in line for line in h100)
    row = next(line for line in text.splitlines() if "`h100-sxm5`" in line)
    assert "| $3.25 | $2.49-$4.76 | 5 | no: highest 1.9× lowest |" in row


def test_machines_with_more_than_the_base_memory_cost_more_than_the_base_machine():
    # Launch prices of the cheapest machine with each chip (rules/sources.yaml): the M2 Ultra Mac Studio
    # from $3,999 with 64 GB (price-apple-mac-studio-2023), the M4 Pro Mac mini from $1,399 with 24 GB
    # (price-apple-mac-mini-m4-pro). The catalogue's entries hold 192 GB and 64 GB, so they cost more.
    assert KN.prices["apple-m2-ultra"]["purchase_usd"] > 3999
    assert KN.prices["apple-m4-pro"]["purchase_usd"] > 1399
    for gid in ("apple-m2-ultra", "apple-m4-pro"):
        assert "whole computer" in KN.prices[gid]["note"]
