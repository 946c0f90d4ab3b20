"""The jobs shipped in conf/jobs/ and the cluster each is meant for: one table for every
test that runs or fits them (tests/e2e/test_stories_guard.py, tests/unit/test_jobspec_load.py)."""
from __future__ import annotations

#: job file -> (the cluster in conf/clusters/ its header and conf/jobs/README.md name,
#: the exit `gangmaster run` gives)
JOBS = {
    "mpi-allreduce.yaml": ("default.yaml", 0),
    "parameter-server.yaml": ("default.yaml", 0),
    "single-gpu.yaml": ("default.yaml", 0),
    "snapshot-8gpu-pair.yaml": ("default.yaml", 0),
    "shared-gpu-inference.yaml": ("shared-gpu.yaml", 0),
    "story3-parameter-server.yaml": ("story3.yaml", 0),   # 6,001 tasks: past PER_INSTANCE_VARIABLES_UP_TO
    "story3-ps.yaml": ("story3-incidents.yaml", 0),      # the empty cluster holds it; the incidents are below
    "story3-xlibmpi.yaml": ("story3-incidents.yaml", 0),
}
