#!/usr/bin/env bash
# Installs every Debian package allocsim needs to build and test. Safe to run twice.
set -euo pipefail
packages=(
  build-essential cmake ninja-build clang clang-format clang-tidy libclang-rt-14-dev
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev libcli11-dev
  zlib1g-dev libdeflate-dev libxxhash-dev nlohmann-json3-dev python3 libtsan2
  python3-pip python3-setuptools python3-wheel python3-venv binutils
  python3-distributed  # allocsim fleet on a Dask cluster: its test runs a LocalCluster
  chromium  # the timeline page's test opens it headless
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
