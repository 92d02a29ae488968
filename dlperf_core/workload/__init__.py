"""Reference training workload: hand-written ResNet-50 v1.5 trained on synthetic data (imports only torch)."""
