"""The ``selection:`` section of the configuration, typed.

Each knob is checked when the settings load, so a bad ``--config`` is refused before
anything runs: the strategy must be a registered selector (``gangmaster selectors``
lists them), the rest must be within their documented ranges (conf/defaults.yaml).
"""
from __future__ import annotations

from dataclasses import dataclass

from gangmaster.conf.fields import Fields
from gangmaster.conf.limits import MAX_CANDIDATE_NODES_FACTOR
from gangmaster.conf.settings import Settings

from .ports import PORT_MAX
from .request import RACK_POLICIES

PORT_CHOICES = ("sequential", "random")


@dataclass(frozen=True)
class SelectionSettings:
    selector: str = "job-packing"
    candidate_nodes_factor: int = 2
    allow_non_gpu_job_on_gpu_node: bool = True
    skip_nodes_where_role_failed: bool = True
    rack_policy: str = "none"
    port_min: int = 20000
    port_choice: str = "sequential"
    seed: int = 0

    @classmethod
    def from_fields(cls, f: Fields) -> "SelectionSettings":
        return cls(
            selector=_selector(f, "selector"),
            candidate_nodes_factor=f.integer("candidate_nodes_factor", minimum=1,
                                             maximum=MAX_CANDIDATE_NODES_FACTOR,
                                             limit="MAX_CANDIDATE_NODES_FACTOR"),
            allow_non_gpu_job_on_gpu_node=f.boolean("allow_non_gpu_job_on_gpu_node"),
            skip_nodes_where_role_failed=f.boolean("skip_nodes_where_role_failed"),
            rack_policy=f.string("rack_policy", choices=RACK_POLICIES),
            port_min=f.integer("port_min", minimum=0, maximum=PORT_MAX),
            port_choice=f.string("port_choice", choices=PORT_CHOICES),
            seed=f.integer("seed"),
        )

    @classmethod
    def load(cls, override: str | None = None) -> "SelectionSettings":
        return cls.from_fields(Settings(override).section("selection"))


def _selector(f: Fields, key: str) -> str:
    """A registered strategy; one whose plugin failed to load is named with the reason."""
    from .selector import broken_selectors, selector_classes

    name = f.string(key)
    broken = broken_selectors()
    if name in broken:
        raise f.error(key, f"a selector that loads (its plugin failed: {broken[name]})", name)
    return f.string(key, choices=selector_classes())
