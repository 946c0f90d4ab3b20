"""``gangmaster selectors``: the registered strategies, a line each."""
from __future__ import annotations

from gangmaster.selectors.selector import broken_selectors, selector_classes


def add_parser(sub):
    p = sub.add_parser(
        "selectors", help="list the registered node-selection strategies",
        description="List the strategies registered through the `gangmaster.selectors` entry-point "
                    "group (built-in and installed plugins), with a line each.")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    classes = selector_classes()
    width = max(map(len, list(classes) + list(broken_selectors())), default=0)
    for name, cls in classes.items():
        print(f"{name:<{width}}  {cls.description or (cls.__doc__ or '').strip().splitlines()[0]}")
    for name, why in broken_selectors().items():
        print(f"{name:<{width}}  (failed to load: {why})")
    return 0
