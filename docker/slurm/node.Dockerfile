# A slurmd stand-in node of dlperf's Slurm test cluster, built FROM a framework CPU image so that the node has the
# framework's software (dlperf's `software: none`): NODE_IMAGE=dlperf/pytorch-reference:cpu (partition torch) or
# dlperf/ngc-mxnet:cpu (partition mxnet). Adds Debian bookworm's slurmd 22.05, the client commands (srun runs on the
# job's first node) and MUNGE; the image's own PATH (/opt/venv/bin first), Open MPI and workload stay as they are.
# Build: docker/slurm/build.sh (context docker/slurm/).
# No `# syntax=` line on purpose: it would make BuildKit pull a frontend image, and no registry is reachable.
ARG NODE_IMAGE=dlperf/pytorch-reference:cpu
FROM ${NODE_IMAGE}
COPY ca/ca-certificates.crt install-slurm.sh /tmp/slurm-setup/
RUN sh /tmp/slurm-setup/install-slurm.sh node
COPY entrypoint.sh /usr/local/bin/dlperf-slurm-entrypoint
WORKDIR /
LABEL org.opencontainers.image.title="dlperf Slurm test cluster: slurmd node" \
      dlperf.slurm.role="node"
ENTRYPOINT ["/usr/local/bin/dlperf-slurm-entrypoint"]
CMD ["node"]
