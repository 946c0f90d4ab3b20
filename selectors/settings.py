"""The ``selection:`` section of the configuration, typed."""
from __future__ import annotations

from dataclasses import dataclass

from gangmaster.conf.fields import Fields
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
            selector=f.string("selector"),
            candidate_nodes_factor=f.integer("candidate_nodes_factor", minimum=1),
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
