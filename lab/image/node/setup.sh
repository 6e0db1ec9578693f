#!/bin/sh
# Runs once at image build (Dockerfile RUN): users, sshd policy, units.
set -eu

# spark: the deploy user, like the DGX OS first-boot user minus sudo; in group docker.
useradd --create-home --uid 1000 --user-group --groups docker --shell /bin/bash spark
# admin: passwordless sudo, for the few tasks that truly need root.
useradd --create-home --user-group --shell /bin/bash admin
# '*' = no password but not locked, so key logins work and password logins cannot.
usermod -p '*' spark
usermod -p '*' admin
echo 'admin ALL=(ALL:ALL) NOPASSWD: ALL' >/etc/sudoers.d/admin
chmod 0440 /etc/sudoers.d/admin
for u in spark admin; do
  install -d -m 0700 -o "$u" -g "$u" "/home/$u/.ssh"
done

cat >/etc/ssh/sshd_config.d/glm53-lab.conf <<'CONF'
# Keys only, as on a hardened Spark; no reverse DNS on the lab networks.
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UseDNS no
CONF

chmod 0755 /usr/local/bin/* /usr/local/sbin/* /usr/local/lib/systemd/system-generators/*
chmod 0644 /etc/glm53-lab/gpu.json /etc/glm53-lab/links.json
: >/etc/glm53-lab/hosts  # lab/spark_lab.py fills it per lab size
systemctl enable glm53-lab-hostkeys.service glm53-lab-netnames.service glm53-lab-rdma-sysfs.service \
  glm53-lab-hosts.service glm53-lab-gpud.service
# Units with nothing to do in a container; left enabled they fail and systemd
# reports "degraded" instead of "running".
systemctl mask e2scrub_reap.service e2scrub_all.timer getty@tty1.service console-getty.service \
  systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
  sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount 2>/dev/null
