"""Every documented limit on what gangmaster accepts, in one place.

Each limit exists so that a hostile or mistaken input is refused at once with a
message naming the limit, instead of exhausting memory, CPU or time. The README's
*Limits* section lists them; a test pins each one. Keep the value, its unit and the
reason together, one section per part of the system.
"""
from __future__ import annotations


# ---------------------------------------------------------------- readers
# Files gangmaster reads: YAML (job specs, cluster, queue, scenario and settings files,
# topology presets), `nvidia-smi topo -m` text, and the RM state file. Every reader reads
# at most limit + 1 bytes, so an endless or enormous input is refused after reading
# that much, and refuses a path that is not a regular file (a FIFO, /dev/zero) before
# reading anything.

MiB = 1024 * 1024

#: YAML files, bytes. 1,000x the largest shipped file (the story-3 cluster and job are
#: under 2 KB; real OpenPAI job files are a few KB) and room for a hand-written cluster
#: file that lists 100,000 hosts by name (about 2 MB). Parsing this much takes seconds.
MAX_YAML_FILE_BYTES = 4 * MiB

#: Saved `nvidia-smi topo -m` output, bytes. A 16-GPU machine with 8 NICs prints
#: about 4 KB; 256x that is room for any machine and its legend.
MAX_TOPO_TEXT_BYTES = 1 * MiB

#: The live RM's JSON state file, bytes. Story 3's 3,040 idle nodes save 0.6 MB and each
#: container adds its booking and launch context (command, environment); 256 MiB is
#: far past any state we write, and JSON this size still parses in seconds.
MAX_STATE_FILE_BYTES = 256 * MiB

#: Nesting of YAML collections (mappings and lists), levels. Our deepest real path is
#: about 6 (`taskRoles.worker.gangmaster.gpuTypes[0]`; OpenPAI `extras` go a little
#: deeper); past 64 the parser would recurse towards Python's recursion limit.
MAX_YAML_DEPTH = 64

#: YAML aliases (`*name`) in one document. Anchors share a command or a resource block a
#: handful of times in real files; thousands of aliases are an attack, not a config.
MAX_YAML_ALIASES = 1000

#: Nodes of a YAML document with every alias expanded. A 4 MiB file holds at most about
#: 2 million nodes written out (`[1,1,...]`: two bytes a node), so aliases may not make a
#: document larger than the file size limit allows without them ("billion laughs").
MAX_YAML_NODES = MAX_YAML_FILE_BYTES // 2

#: Instances of one job, all roles together. 16x story 3 (6,001 instances in one gang);
#: the AM keeps a record per instance and the RM a container, so memory and every
#: placement pass grow with it. (`instances: 1000000000` passed validate, then `run`
#: died with MemoryError.)
MAX_INSTANCES_PER_JOB = 100_000

#: Instances of one task role: one role may hold the whole job.
MAX_INSTANCES_PER_ROLE = MAX_INSTANCES_PER_JOB

#: Attempts of a job or a role (OpenPAI's jobRetryCount / taskRetryCount + 1, or
#: gangmaster.attempts). A job that fails a thousand times has a bug, not bad luck; the
#: bound keeps attempt numbers inside the RM protocol's 32-bit fields.
MAX_ATTEMPTS = 1000

#: Characters of a job name. The name becomes folder names (`<name>-<n>`, `<k>-<name>`)
#: that must stay under the file system's 255-byte name limit.
MAX_JOB_NAME_LENGTH = 200

#: Nodes one cluster file may describe, all node groups together. 330x story 3's 3,040
#: nodes and above the largest single clusters reported (tens of thousands of machines);
#: a cluster this size loads in seconds and about 0.5 GB.
MAX_CLUSTER_NODES = 1_000_000

#: Memory of one node, or asked by one instance, MB: 2^32 MB is 4 PiB, far past any
#: machine, and sums over MAX_CLUSTER_NODES nodes stay exact in 64-bit integers.
MAX_MEMORY_MB = 2 ** 32

#: vcores of one node, or asked by one instance: 2^20 (about a million cores); sums in
#: milli-vcores over MAX_CLUSTER_NODES nodes stay within 64-bit integers.
MAX_VCORES = 2 ** 20

#: Ports one instance may ask for under one label: there are only 65,535 ports.
MAX_PORTS_PER_LABEL = 65535

# Settings (conf/defaults.yaml and `--config` files): every period and duration knob is
# a finite number within these bounds; each knob's own range is in conf/defaults.yaml.

#: The shortest period any knob may set (heartbeats, polls, saves), seconds. A shorter
#: one only burns CPU: 1e-9 s heartbeats made a simulated week take forever.
MIN_PERIOD_S = 0.001

#: The longest duration or timeout any knob may set, seconds (ten years). Finite, so a
#: deadline computed from it is a real time; use the knob's null where it has one for
#: "never".
MAX_DURATION_S = 10 * 365 * 24 * 3600.0

#: The longest AM heartbeat period (am.heartbeat_s), seconds: an AM that reports less
#: often than hourly cannot react to anything (YARN's AM heartbeats every second).
MAX_HEARTBEAT_S = 3600.0

#: The longest period of an RM housekeeping loop (rm.process_poll_s,
#: rm.state_save_interval_s, rm.scheduling_interval_s), seconds: past a minute the RM
#: notices task exits, and saves its state, too late to be of use.
MAX_LOOP_PERIOD_S = 60.0

#: The longest SIGTERM-to-SIGKILL grace (rm.kill_grace_s), seconds.
MAX_KILL_GRACE_S = 3600.0

#: Threads a server may start (rm.grpc_workers).
MAX_WORKER_THREADS = 1024

#: Ranked candidates kept per pending task (selection.candidate_nodes_factor): more
#: only makes every selection slower.
MAX_CANDIDATE_NODES_FACTOR = 1000
