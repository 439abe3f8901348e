"""An option that adds GPUs to a bare memory size keeps the size the query gave.

"on 24GB" is a card of 24 GiB (the unit GPU memory is sold in: 25.77 GB, as the answer's
assumptions say). An option "4-bit weights on 2x ..." must ask about two of that same card:
"2x 24gb", read the same way, not "2x 25.769803776gb" (the size written back in GB and then read
as GiB again, a card 7% larger than the one asked about).
"""

from __future__ import annotations

import re

from kb import ask


def test_more_cards_of_a_bare_size_are_the_size_asked():
    a = ask("serve 70B fp16 on 24GB")          # 70e9 x 2 B = 140 GB of weights: no 24 GB card holds it
    assert a.options, "a job that does not fit gets options"
    sizes = {m for o in a.options for m in re.findall(r"(\d+(?:\.\d+)?)gb", o["query"])}
    assert sizes == {"24"}, [o["query"] for o in a.options]
    more = [o for o in a.options if o["count"] > 1]
    assert more and all(o["gpu"] == "24 GB GPU" for o in more)
