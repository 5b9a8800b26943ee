#!/usr/bin/env bash
# Installs recorder, recorderd and the systemd unit (as root), after a build
# by scripts/setup.sh. Starts the service where systemd runs the machine.
# Usage: scripts/install.sh [PREFIX]   (default /usr/local)
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${1:-/usr/local}
B=${FLIGHTREC_BUILD_DIR:-build}
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root" >&2; exit 1; }
[ -x "$B/recorder/daemon/recorderd" ] || scripts/setup.sh
install -d "$PREFIX/bin" "$PREFIX/share/doc/flightrec"
install -m 0755 "$B/recorder/daemon/recorderd" "$B/recorder/cli/recorder" \
  "$B/coredump-hook/recorder-coredump" "$PREFIX/bin/"
install -m 0644 README.md docs/*.md "$PREFIX/share/doc/flightrec/"
sed "s#/usr/local#$PREFIX#g" scripts/systemd/recorderd.service > /etc/systemd/system/recorderd.service
chmod 0644 /etc/systemd/system/recorderd.service
# The text `journalctl -x` shows under each stored crash's journal entry.
install -D -m 0644 journal/flightrec.catalog /usr/lib/systemd/catalog/flightrec.catalog
command -v journalctl >/dev/null && journalctl --update-catalog || true
echo "installed $PREFIX/bin/recorderd, recorder, recorder-coredump, /etc/systemd/system/recorderd.service"
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  systemctl enable --now recorderd.service
  systemctl --no-pager status recorderd.service | head -5
else
  echo "systemd is not running on this machine: start the daemon with '$PREFIX/bin/recorderd --foreground'"
fi
