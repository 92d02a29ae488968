"""One case run: its job, its runtime (local processes, containers, a node's share), its launch spec, the hand-offs between DAG tasks and the status a benchmark run closes with."""
