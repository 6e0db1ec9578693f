#!/bin/sh
# The lab's stand-in of nvcr.io/nvidia/pytorch:26.07-py3 (the TensorFold kit's base image):
# run by lab/spark_lab.py in a throwaway container of the node base image (lab/image/base,
# debootstrapped), whose file system is then imported as glm53-lab/pytorch:26.07-py3 and
# loaded into every node's engine. Python 3 with pip; the node's services are removed.
#   sh setup.sh <debian mirror URL>
set -eu
export DEBIAN_FRONTEND=noninteractive SUDO_FORCE_REMOVE=yes
echo "deb $1 bookworm main" >/etc/apt/sources.list
apt-get -qq update
apt-get -qq install -y --no-install-recommends python3-pip python3-setuptools python3-wheel >/dev/null
apt-get -qq purge -y --auto-remove docker.io containerd runc git busybox-static openssh-server \
  openssh-client sudo cron rsync less >/dev/null
apt-get -qq clean
rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/*
# NGC images let pip install into the system Python (/usr/local/lib/python3.X/dist-packages);
# Debian marks it externally managed.
rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
python3 -m pip --version
