"""Host inventory: the machine, its GPUs through NVML, topology, and what a run used."""
