#!/bin/sh
# Transfer benchmark (not part of the test suite): SSH executor vs OpenSSH scp, 1 GiB both ways.
# Usage: scripts/bench_transfer.sh [size_mib]   (needs /usr/sbin/sshd, scp, ssh-keygen; run as root in CI)
set -e
cd "$(dirname "$0")/.."
exec python3 scripts/bench_transfer.py "$@"
