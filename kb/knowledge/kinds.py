"""The closed vocabularies of the catalogue, declared once: the schemas validate against them
and the CLI's choices are read from them (this module imports no pydantic, so `kbq gpus`
starts without it).

Segment: who buys the card and where it runs. `embedded`: a module with its own CPU and
shared memory for robots and appliances (Jetson), neither a card for a PC nor a Mac.
"""

from __future__ import annotations

from typing import Literal, get_args

Vendor = Literal["nvidia", "amd", "intel", "apple", "google", "aws"]
Segment = Literal["datacenter", "workstation", "consumer", "apple", "embedded"]

VENDORS: tuple[str, ...] = get_args(Vendor)
SEGMENTS: tuple[str, ...] = get_args(Segment)
