"""GPU interconnect: which GPUs of a node talk over NVLink or which PCIe path, and
which free GPUs to give a request.

Modules (import them directly; this package imports nothing so that the mask helpers
stay cheap to import):

* :mod:`.masks` — GPU bitmask helpers (the only place for bit arithmetic);
* :mod:`.links` — :class:`~.links.Link` and THE pair-score table;
* :mod:`.model` — :class:`~.model.Topology`, a networkx graph of GPUs and NICs;
* :mod:`.topo_text` — reading (and writing) ``nvidia-smi topo -m`` text;
* :mod:`.nvml_reader` — reading the local machine through NVML (pynvml);
* :mod:`.presets` — ``conf/topologies/*.yaml`` presets by name;
* :mod:`.chooser` — :class:`~.chooser.GpuChooser`, the best-subset chooser.
"""
