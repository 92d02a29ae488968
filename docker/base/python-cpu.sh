#!/bin/sh
# The setup every seed framework's CPU image starts with (docker/*-cpu/Dockerfile):
#   sh /tmp/setup/python-cpu.sh [DEBIAN_PACKAGE...]
# - the host's CA bundle (copied to /tmp/setup/ by the Dockerfile from docker/ca/, put there by
#   scripts/build-cpu-images.sh): the package registries are reachable only through it;
# - Python 3 with venv, procps, and the image's own Debian packages given as arguments;
# - with openssh-server among them (mpirun across nodes): sshd's run folder and no host keys (dlperf puts the
#   per-case keys into /etc/dlperf-ssh at run time);
# - pip told to trust the bundle, not to check its own version and to keep no cache (/etc/pip.conf);
# - the image's virtualenv /opt/venv with pinned pip, setuptools and wheel (the Dockerfile puts it on PATH).
# The Dockerfile keeps the environment: SSL_CERT_FILE and REQUESTS_CA_BUNDLE=$CA (below), LANG, PATH.
set -eux
CA=/usr/local/share/ca-certificates/dlperf-host-ca-bundle.crt
install -D -m 0644 /tmp/setup/ca-certificates.crt "$CA"
apt-get update
apt-get install -y --no-install-recommends ca-certificates python3 python3-venv procps "$@"
update-ca-certificates
case " $* " in
  *" openssh-server "*) mkdir -p /run/sshd; rm -f /etc/ssh/ssh_host_* ;;
esac
apt-get clean
rm -rf /var/lib/apt/lists/* /tmp/setup
printf '[global]\ncert = %s\ndisable-pip-version-check = true\nno-cache-dir = true\n' "$CA" > /etc/pip.conf
python3 -m venv /opt/venv
/opt/venv/bin/pip install pip==24.0 setuptools==69.5.1 wheel==0.43.0
