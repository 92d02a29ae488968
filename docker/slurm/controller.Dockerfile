# The controller of dlperf's Slurm test cluster, also its login node: Debian bookworm's slurmctld 22.05, the client
# commands (sbatch, srun, scontrol, squeue, scancel, sinfo), MUNGE and OpenSSH's server (user dlperf, key only).
# Build: docker/slurm/build.sh (context docker/slurm/; ca/ holds the host CA bundle, gitignored).
# No `# syntax=` line on purpose: it would make BuildKit pull a frontend image, and no registry is reachable.
ARG BASE_IMAGE=dlperf/debian-base:bookworm
FROM ${BASE_IMAGE}
COPY ca/ca-certificates.crt install-slurm.sh /tmp/slurm-setup/
RUN sh /tmp/slurm-setup/install-slurm.sh controller
COPY slurm.conf /etc/slurm/
COPY entrypoint.sh /usr/local/bin/dlperf-slurm-entrypoint
EXPOSE 22 6817
LABEL org.opencontainers.image.title="dlperf Slurm test cluster: controller and login node" \
      dlperf.slurm.role="controller"
ENTRYPOINT ["/usr/local/bin/dlperf-slurm-entrypoint"]
CMD ["controller"]
