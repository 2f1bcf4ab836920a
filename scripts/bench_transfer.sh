#!/bin/sh
# Transfer benchmark (not part of the test suite): SSH executor vs tar | ssh and scp, 1 GiB both ways.
# Usage: scripts/bench_transfer.sh [size_mib]   (needs OpenSSH: sshd, ssh, scp, ssh-keygen; exit 1 when the target is missed)
set -e
cd "$(dirname "$0")/.."
exec python3 scripts/bench_transfer.py "$@"
