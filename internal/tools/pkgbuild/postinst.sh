#!/bin/sh
# enginehealth: create the system user and tell systemd of the unit.
# Never starts or restarts the service: an operator decides when a node
# joins the cluster (systemctl enable --now enginehealth), and when a
# running node restarts onto the new version (systemctl restart
# enginehealth: a clean handoff of the master's office).
set -e
if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers enginehealth.conf || true
fi
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
exit 0
