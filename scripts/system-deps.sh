#!/usr/bin/env bash
# System packages the tests need (Debian/Ubuntu): Chromium for browser tests, PostgreSQL
# for the DuckLake tests, nginx + openssl for the reverse-proxy recipe in docs/access.md,
# python3-venv for the virtual env. Installs only what is missing.
set -euo pipefail
need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/lib/postgresql/15/bin/initdb ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -x /usr/sbin/nginx ] || need+=(nginx)
command -v openssl >/dev/null || need+=(openssl)
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "stepscope: installing system packages: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
