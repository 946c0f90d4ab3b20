"""Every documented limit on what gangmaster accepts, in one place.

Each limit exists so that a hostile or mistaken input is refused at once with a
message naming the limit, instead of exhausting memory, CPU or time. The README's
*Limits* section lists them; a test pins each one. Keep the value, its unit and the
reason together, one section per part of the system.
"""
from __future__ import annotations
