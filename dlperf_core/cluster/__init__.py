"""Where it runs: the nodes (the inventory), their preflight checks, the GPU health gate, CPU placement, SSH keys, containers, GPU sampling and clock events, and the environment probed on them."""
