#!/usr/bin/env bash
# Installs everything allocsim needs to build and test: the Debian packages (with sudo when not
# root), then the Python packages of python/requirements-test.txt into one virtual environment
# (scripts/python_env.sh names it; default .venv). Safe to run twice: the second run installs
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python_env.sh

packages=(
  build-essential cmake ninja-build clang clang-format clang-tidy libclang-rt-14-dev
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev libcli11-dev
  zlib1g-dev libdeflate-dev libxxhash-dev nlohmann-json3-dev libtsan2 binutils
  python3 python3-venv  # the interpreter the test environment is made from
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

# The test environment, remade only where the interpreter or the pinned list changed since it
# was filled (the stamp holds both).
stamp=$allocsim_venv/.allocsim-requirements
want="$("$allocsim_base_python" -c 'import sys; print(sys.version)') $(sha256sum <"$allocsim_requirements")"
if [ -x "$allocsim_python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "setup: the test environment $allocsim_venv, from $allocsim_requirements"
"$allocsim_base_python" -m venv --clear "$allocsim_venv"
# -qq: the machine's pip may name index folders it lacks, one warning line per package.
"$allocsim_python" -m pip install -qq --disable-pip-version-check -r "$allocsim_requirements"
"$allocsim_python" -c 'import torch, distributed, pytest' # fails here, not in the tests
echo "$want" >"$stamp"
