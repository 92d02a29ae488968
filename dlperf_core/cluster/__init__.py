"""Where it runs: the nodes (the inventory), their preflight checks, CPU placement, SSH keys, containers, GPU sampling, and the environment probed on them."""
