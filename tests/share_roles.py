"""A role that asks a share of one GPU, for the selection-side tests.

The job spec's ``gpuMilli`` key and ``RoleSpec``'s own field come with the job-spec
side of GPU sharing; gang placement only reads ``role.ask_resource()``, so these
tests give it a role whose ask carries the share, whatever RoleSpec holds."""
from __future__ import annotations

from dataclasses import dataclass

from gangmaster.am.spec.jobspec_model import RoleSpec
from gangmaster.selectors.resources import ResourceDescriptor


@dataclass(frozen=True)
class ShareRole(RoleSpec):
    """A RoleSpec whose instances each ask ``gpu_milli`` of one GPU (``gpus`` must be 0)."""

    gpu_milli: int = 0

    def planned_resource(self) -> ResourceDescriptor:
        planned = super().planned_resource()
        return planned.with_(gpu_milli=self.gpu_milli) if self.gpu_milli else planned
