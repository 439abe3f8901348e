"""The verdict of a serving fleet: N× GPU as R replicas of a layout, with its figures under load,
and the disaggregated option when it takes fewer GPUs (query.yaml solve.how_many_gpus
verdict_replicas, verdict_disaggregated; the layout and what binds: verdict.templates layout_*, fleet_*).

In: an Answer whose `replicas` block kb.engine.search.replicas filled, the Knowledge. Out: its text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.verdicts.wording import say
from kb.figures import num
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.assembly.answer import Answer
    from kb.engine.assembly.answer_records import Replicas, Side
    from kb.knowledge.data import Knowledge


def _layout(kn: Knowledge, tp: int, pp: int) -> str:
    """'TP4' or 'TP4 × PP2' (query.yaml verdict.templates layout_*)."""
    return say(kn, "layout_tp", tp=tp) + (say(kn, "layout_pp", pp=pp) if pp > 1 else "")


def layout_text(kn: Knowledge, tp: int, pp: int, dp_attention: bool) -> str:
    """'TP8 × PP2 with data-parallel attention' (query.yaml verdict.templates layout_*)."""
    return _layout(kn, tp, pp) + (say(kn, "layout_dp_attention") if dp_attention else "")


def fleet(a: Answer, kn: Knowledge) -> str:
    """A serving fleet: N× GPU as R replicas of a layout, with its figures under load (query.yaml
    solve.how_many_gpus verdict_replicas)."""
    r = a.replicas
    if r is None:
        return ""
    lay = r["layout"]
    layout = layout_text(kn, lay["tp"], lay["pp"], lay[N.DP_ATTENTION])
    binds = r.get("binds") or ""
    binds_text = (say(kn, "fleet_one_replica") if binds == "one replica holds every user"
                  else say(kn, "fleet_binds", binds=binds))

    def f(name: str) -> str:
        v = r.get(name)
        return num(float(v)) if isinstance(v, (int, float)) else "?"
    text = str(kn.query["solve"]["how_many_gpus"]["verdict_replicas"]).format(
        gpus=r["gpus"], gpu=a.question["gpu"] if a.question else "", replicas=r["replicas"],
        s="" if r["replicas"] == 1 else "s", layout=layout, users_per_replica=r["users_per_replica"],
        users_s="" if r["users_per_replica"] == 1 else "s",
        tokens_per_s_per_user=f("tokens_per_s_per_user"), ttft_s=f(N.TTFT_S),
        tokens_per_s_per_gpu=f("tokens_per_s_per_gpu"), requests_per_s=f("requests_per_s"),
        nodes=r["nodes"], nodes_s="" if r["nodes"] == 1 else "s",
        per_hour=say(kn, "fleet_per_hour", usd_per_hour=f("usd_per_hour")) if r.get("usd_per_hour") else "",
        binds_text=binds_text)
    d = r.get("disaggregated")
    if not d or not d["fewer_gpus"]:
        return text
    dl = d["decode_layout"]
    return text + " " + str(kn.query["solve"]["how_many_gpus"]["verdict_disaggregated"]).format(
        gpus=d["gpus"], prefill_gpus=d["prefill_gpus"], decode_replicas=d["decode_replicas"],
        s="" if d["decode_replicas"] == 1 else "s", layout=_layout(kn, dl["tp"], dl["pp"]),
        decode_gpus=d["decode_gpus"], ttft_s=num(d[N.TTFT_S]) if d[N.TTFT_S] is not None else "?",
        kv_transfer_s=num(d["kv_transfer_s"]) if d["kv_transfer_s"] is not None else "?")


def fleet_sides(a: Answer, kn: Knowledge) -> list[str]:
    """Fleets of two or more cards for one traffic (Answer.comparison with replicas,
    kb.engine.advising.fleets): the card that costs less an hour to rent (or needs fewer GPUs,
    where a card has no rental price), by at least verdict.faster_ratio, first; then one clause
    per card that serves the traffic, that card first; then the cards no count of serves
    (query.yaml verdict.templates fleet_*)."""
    served: list[tuple[Side, Replicas]] = [(side, r) for side in a.comparison or [] if (r := side.get("replicas"))]
    priced = all(r.get("usd_per_hour") for _, r in served)
    template = "fleet_cheaper" if priced else "fleet_fewer"
    served.sort(key=lambda sr: weight(sr[1], priced))
    parts: list[str] = []
    if len(served) >= 2:
        low, high = weight(served[0][1], priced), weight(served[-1][1], priced)
        parts.append(say(kn, template, gpu=served[0][0]["gpu"], ratio=f"{(1 - low / high) * 100:.0f}%") + "."
                     if high >= kn.query["verdict"]["faster_ratio"]["value"] * low else say(kn, "fleet_even"))
    for side, r in served:
        lay, per_hour = r["layout"], r.get("usd_per_hour")
        parts.append(say(kn, "fleet_side", gpus=r["gpus"], gpu=side["gpu"], replicas=r["replicas"],
                         layout=layout_text(kn, lay["tp"], lay["pp"], lay[N.DP_ATTENTION]),
                         per_hour=say(kn, "fleet_per_hour", usd_per_hour=num(float(per_hour))) if per_hour else ""))
    return parts + fleets_unserved(a, kn, served_first=bool(served))


def weight(r: Replicas, priced: bool) -> float:
    """What a fleet is weighed by against another: its rent an hour, else its GPUs."""
    return float(r.get("usd_per_hour") or 0) if priced else float(r["gpus"])


def fleets_unserved(a: Answer, kn: Knowledge, served_first: bool) -> list[str]:
    """The cards of a fleet comparison no count of serves within the targets, one sentence each;
    when none serves, the first card's answer says so and the others follow it."""
    unserved = [side for side in a.comparison or [] if "replicas" in side and not side["replicas"]]
    if served_first:
        return [say(kn, "fleet_side_unserved", gpu=side["gpu"]) for side in unserved]
    return [say(kn, "fleet_side_unserved_too", gpu=side["gpu"]) for side in unserved[1:]]
