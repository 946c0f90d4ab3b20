"""Every documented limit on what gangmaster accepts, in one place.

Each limit exists so that a hostile or mistaken input is refused at once with a
message naming the limit, instead of exhausting memory, CPU or time. The README's
*Limits* section lists them; a test pins each one. Keep the value, its unit and the
reason together, one section per part of the system.
"""
from __future__ import annotations

MiB = 1024 * 1024

# ------------------------------------------------ sizes every part shares
# The size of a cluster, a node, a job and a duration: the readers refuse a file past
# them, the RM a request past them, so what a file may say the RM always accepts.

#: Instances of one job, all roles together. 16x story 3 (6,001 instances in one gang);
#: the AM keeps a record per instance and the RM a container, so memory and every
#: placement pass grow with it. (`instances: 1000000000` passed validate, then `run`
#: died with MemoryError.)
MAX_INSTANCES_PER_JOB = 100_000

#: Attempts of a job or a role (OpenPAI's jobRetryCount / taskRetryCount + 1, or
#: gangmaster.attempts). A job that fails a thousand times has a bug, not bad luck; the
#: bound keeps attempt numbers inside the RM protocol's 32-bit fields.
MAX_ATTEMPTS = 1000
#: A job's or a queue's priority lies within -MAX_PRIORITY..MAX_PRIORITY (higher preempts lower).
MAX_PRIORITY = 1000
#: The longest grace period a preemption gives (``replay --preemption-grace``): a day.
MAX_PREEMPTION_GRACE_S = 86_400.0

#: Nodes one cluster file may describe, all node groups together. 330x story 3's 3,040
#: nodes and above the largest single clusters reported (tens of thousands of machines);
#: a cluster this size loads in seconds and about 0.5 GB.
MAX_CLUSTER_NODES = 1_000_000

#: Memory of one node, or asked by one instance, MB: 2^32 MB is 4 PiB, far past any
#: machine, and sums over MAX_CLUSTER_NODES nodes stay exact in 64-bit integers.
MAX_MEMORY_MB = 2 ** 32

#: Network domain levels above the rack (a cluster file's domainLevels, a node report's
#: domains): real fabrics have three or four (leaf, spine, core, block).
MAX_DOMAIN_LEVELS = 16

#: vcores of one node, or asked by one instance: 2^20 (about a million cores); sums in
#: milli-vcores over MAX_CLUSTER_NODES nodes stay within 64-bit integers.
MAX_VCORES = 2 ** 20

#: The longest duration or timeout any knob may set, seconds (ten years). Finite, so a
#: deadline computed from it is a real time; use the knob's null where it has one for
#: "never".
MAX_DURATION_S = 10 * 365 * 24 * 3600.0

#: Characters in a name: a host, rack, node label, GPU type, queue, application or
#: container id. 255, like a file name (a host name is <= 253); no control characters or
#: white space. Cluster, queue, scenario and job files are held to it, so every name they
#: give reaches the RM intact.
MAX_NAME_CHARS = 255

#: The range of a 32-bit signed integer: the RM protocol's exit codes, priorities and
#: attempts, and FrameworkController's completion counts, are stored in one.
INT32 = (-(2 ** 31), 2 ** 31 - 1)

#: GPUs of one node: GPU masks are 64-bit integers (numpy ``uint64`` in the cluster view,
#: a 64-bit field on the wire), bit i for GPU i.
MAX_GPUS_PER_NODE = 64


# ------------------------------------------------ barrier coordinator (am/barrier*.py, am/barrier/task_context.py)
#: Default of ``barrier.max_message_bytes``: the most an all_gather may gather, in bytes —
#: every task's message together, each counted with 8 bytes of framing — and so the largest
#: single message too. gRPC's own default (4 MiB) made a larger gather fail as "coordinator
#: unreachable" after retrying for ``retry_give_up_s``; Spark's barrier mode allows 128 MiB
#: (``spark.rpc.message.maxSize``). Past it, the gather fails at once on every task, naming
#: the size and the limit. Enforced by the coordinator (am/barrier/coordinator.py) and, for one task's
#: own message, by the task (am/barrier/task_context.py); both sides' gRPC channels allow it.
BARRIER_MAX_MESSAGE_BYTES = 128 * 1024 * 1024

#: The largest ``barrier.max_message_bytes`` accepts (bytes): gRPC message lengths are
#: 32-bit, and the coordinator builds each gathered reply in memory.
BARRIER_MAX_MESSAGE_BYTES_CEILING = 1024 * 1024 * 1024

#: Room above ``barrier.max_message_bytes`` on the gRPC channels (bytes), for everything
#: else in a request or reply (the caller's names and token, an error's text).
BARRIER_ENVELOPE_BYTES = 64 * 1024

#: Ended attempts (closed, superseded or failed) the coordinator remembers, oldest
#: forgotten first: their late ("zombie") calls get a typed "attempt ended" error; an
#: attempt forgotten before that is refused like a wrong token. A finished attempt's
#: state is dropped at once; what is kept is its token and why it ended (~1 KB each),
#: so a long-running AM's coordinator stays within a few MB.
BARRIER_ENDED_ATTEMPTS_KEPT = 4096

#: Seconds between log lines about refused calls (a wrong token, an unknown attempt), in
#: the barrier coordinator and the live RM alike: the first refusal is logged, later ones
#: are summarized with a count at most once per this interval (also after a burst goes
#: quiet), so a token-guessing client cannot flood the log.
REFUSAL_LOG_INTERVAL_S = 60.0

#: Calls the coordinator's gRPC server holds waiting at once (``barrier.max_pending_calls``):
#: a call per task of every open gang; 16x the largest gang the design names (story 3's
#: 6,001 tasks and the 4,096-task barrier benchmark) with room for reconnects.
BARRIER_MAX_PENDING_CALLS = 2 ** 20


# ------------------------------------------------------------------ RM (ResourceManager API)
# Checked on every call into the RM core (protocol/rm_validation.py), so the in-process client
# and `gangmaster rm serve`'s gRPC clients meet the same limits; a call past one is refused
# with InvalidRequest / gRPC INVALID_ARGUMENT naming the field, the value and the limit.
# Sized so the largest job in the design (1 + 3,000 + 3,000 instances, one ask each) and
# `gangmaster bench rm` (20,000 containers held by one application) fit with room to spare.

#: Characters of free text: diagnostics and a fault's text (a stack trace fits, a log does not).
RM_MAX_TEXT_CHARS = 64 * 1024
#: Asks in one allocate call (one per gang instance from the AM).
RM_MAX_ASKS_PER_CALL = MAX_INSTANCES_PER_JOB
#: Entries in each of an allocate call's lists of ids: cancels, releases, blacklist changes.
RM_MAX_IDS_PER_CALL = 100_000
#: Containers one ask may request (its count): an AM asks for at most one job's instances.
RM_MAX_COUNT_PER_ASK = MAX_INSTANCES_PER_JOB
#: Containers an application may hold and wait for at once (live containers plus the
#: remaining count of its pending asks): one call can never make the RM grant without end.
#: Also the most containers one ``start_containers`` call may start.
RM_MAX_CONTAINERS_PER_APP = MAX_INSTANCES_PER_JOB
#: Ports one ask may request (by count or ranges): the whole port space.
RM_MAX_PORTS = 65536
#: Port ranges in one ask.
RM_MAX_PORT_RANGES = 1024
#: Arguments of a task's command, and variables in its environment.
RM_MAX_COMMAND_ARGS = 4096
RM_MAX_ENV_VARS = 4096
#: Bytes (UTF-8) of a task's command and environment together: half of Linux's usual
#: ARG_MAX (2 MiB), which also has to hold the NodeManager's own variables.
RM_MAX_LAUNCH_BYTES = 1024 * 1024
#: Applications submitted and not finished, at once, from clients the RM does not know
#: (`gangmaster rm serve`, `run`). A trace replay's own RM takes as many as its table has
#: jobs (held to MAX_TRACE_JOBS): in openb fill mode no pod ever finishes.
RM_MAX_RUNNING_APPS = 10_000
#: Finished applications remembered for reports (YARN: max-completed-applications); past it
#: the oldest tenth are forgotten (their reports answer NOT_FOUND).
RM_MAX_COMPLETED_APPS = 10_000
#: Finished containers remembered for container_status; past it the oldest tenth are forgotten.
RM_MAX_FINISHED_CONTAINERS = 100_000
#: Node reports in one allocate reply (the nodes changed since the AM's previous heartbeat);
#: past it the rest come in the next replies, the oldest changes first.
RM_MAX_NODE_UPDATES = 10_000
#: Bytes of one gRPC message to or from `gangmaster rm serve` (gRPC's default, 4 MiB, is
#: smaller than an allocate reply granting RM_MAX_CONTAINERS_PER_APP containers).
RM_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Characters of the RM's access token (read from --token-file).
RM_MAX_TOKEN_CHARS = 4096


# ---------------------------------------------------------------- readers
# Files gangmaster reads: YAML (job specs, cluster, queue, scenario and settings files,
# topology presets), `nvidia-smi topo -m` text, and the RM state file. Every reader reads
# at most limit + 1 bytes, so an endless or enormous input is refused after reading
# that much, and refuses a path that is not a regular file (a FIFO, /dev/zero) before
# reading anything.

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


#: Instances of one task role: one role may hold the whole job.
MAX_INSTANCES_PER_ROLE = MAX_INSTANCES_PER_JOB


#: Characters of a job name. The name becomes folder names (`<name>-<n>`, `<k>-<name>`)
#: that must stay under the file system's 255-byte name limit.
MAX_JOB_NAME_LENGTH = 200




#: Ports one instance may ask for under one label: there are only 65,535 ports.
MAX_PORTS_PER_LABEL = 65535

# Settings (conf/defaults.yaml and `--config` files): every period and duration knob is
# a finite number within these bounds; each knob's own range is in conf/defaults.yaml.

#: The shortest period any knob may set (heartbeats, polls, saves), seconds. A shorter
#: one only burns CPU: 1e-9 s heartbeats made a simulated week take forever.
MIN_PERIOD_S = 0.001


#: The longest AM heartbeat period (am.heartbeat_s), seconds: an AM that reports less
#: often than hourly cannot react to anything (YARN's AM heartbeats every second).
MAX_HEARTBEAT_S = 3600.0

#: The most gangs of one queue, or of the cluster, that hold a reservation at once (queue policy
#: reserve, ``--max-reservations``, ``--cluster-reservations``, the queue file's ``maxReservations``
#: and ``clusterReservations``): each holds nodes idle until it starts, so a long list of
#: reservations would idle the cluster for gangs far down the queue (Slurm bounds its
#: backfill planning the same way, bf_max_job_test).
MAX_RESERVATIONS = 64

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


# ------------------------------------------------ cluster snapshots (tools/snapshots/)
# `gangmaster diagnose --snapshot FILE ...` reads what an operator can dump from a real
# cluster: YARN's RM REST JSON, `kubectl get nodes/pods -o json`, Slurm's `--json`.

#: Bytes of a snapshot's files, all together. `kubectl get nodes -o json` lists every
#: node's container images (10-50 KB a node), so a 5,000-node cluster's dump is about
#: 100 MB, and `kubectl get pods -A -o json` of 100,000 pods a little more; JSON this
#: size parses in seconds, in a few GB of memory.
MAX_SNAPSHOT_BYTES = 256 * MiB

#: Files in one snapshot: YARN needs one containers file per application attempt to name
#: the jobs on each node; a thousand running applications is a very busy cluster.
MAX_SNAPSHOT_FILES = 1000

#: Running allocations (job x host) one snapshot may hold: every pod of a very large
#: Kubernetes cluster, each task host of every running Slurm job.
MAX_SNAPSHOT_ALLOCATIONS = 1_000_000

# ------------------------------------------------ the AM's endpoint, as a client reads it (`gangmaster why`)

#: Bytes of one answer of an AM's /why endpoint that `gangmaster why` reads. A gang's
#: diagnosis is a few KB (a reason per code, not per machine), so a run of thousands of
#: waiting jobs answers a few MB; a server that sends more is not an AM, and reading it
#: whole would only fill memory (a 200 MB body was read whole, 484 MB resident).
MAX_WHY_ANSWER_BYTES = 64 * MiB

# ------------------------------------------------ Slurm (tools/slurm/: the local test cluster and the Slurm RM client).

#: Nodes of a local Slurm cluster (`gangmaster slurm local-cluster start`): one slurmd
#: process each (~20 MB) on this one machine.
LOCAL_SLURM_MAX_NODES = 64

#: How long `local-cluster start` waits for every node to be idle, seconds.
LOCAL_SLURM_START_TIMEOUT_S = 60.0

#: SlurmdTimeout of a local cluster, seconds: a node whose slurmd is gone is DOWN (its jobs
#: NODE_FAIL) once it has not answered for this long, at slurmctld's next check of its nodes:
#: 20-30 s after on Slurm 22.05 (a lower timeout barely shortens that).
LOCAL_SLURMD_TIMEOUT_S = 10

#: Seconds a Slurm command (sbatch, squeue, scontrol, scancel) may take before the client
#: gives up on it and says so: a slurmctld that does not answer must not hang the AM.
SLURM_COMMAND_TIMEOUT_S = 30.0
# ---------------------------------------------------------------- trace replay (tools/replay/)
# `gangmaster replay` reads whole traces into memory (a job is about 1 KB there, with its
# outcome and report rows), so these bound what a replay may hold.

#: A trace file (Philly or Tiresias CSV, native CSV, a Tiresias cluster spec), bytes. The full
#: Philly trace is 4 MB; 256 MiB is room for traces 60x its size, still read in seconds.
#: A native YAML trace is a YAML file and held to MAX_YAML_FILE_BYTES.
MAX_TRACE_FILE_BYTES = 256 * MiB

#: Jobs of one trace kept for a replay (those inside --window: rows outside it are read,
#: checked and let go): 12x the full Philly trace (82,247 jobs), about 1 GB with every
#: job's outcome and report rows. An openb pod list is held whole (fill mode draws from
#: every pod), so its pods count, window or not.
MAX_TRACE_JOBS = 1_000_000

#: Characters of one field of a trace CSV. Every field a reader uses is a name (at most
#: MAX_NAME_CHARS), a number or a time; 4,096 leaves room for columns read past (a long
#: model name). Below the csv module's own limit (131,072), which stops with a bare
#: `_csv.Error`, so a longer field is refused naming its line and column.
MAX_TRACE_FIELD_CHARS = 4096

#: Seeds one replay runs per selector (--seed N ...), and capacities in one --capacity-sweep:
#: each is a whole replay of the trace.
MAX_REPLAY_SEEDS = 100
MAX_SWEEP_POINTS = 64
#: Processes of one ``replay --workloads`` run (--jobs N): each replay takes one core and a few
#: hundred MB (an openb fill seed peaks at ~180 MB), so more than a large machine's cores only queue.
MAX_FAMILY_PROCESSES = 256
# ---------------------------------------------------------------- workload shapes (selectors/workload.py)
#: Task shapes in one --workload file: a fragmentation-aware strategy weighs every shape
#: for every node it judges (the openb trace has 151 distinct shapes).
MAX_WORKLOAD_SHAPES = 1_000

#: openb fill mode's --inflate: the pods asked fill at most this many times the cluster's GPUs
#: (the paper fills to 1.3; a fill is also held to MAX_TRACE_JOBS pods).
MAX_FILL_INFLATE = 10
