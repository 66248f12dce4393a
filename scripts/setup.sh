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

# A test environment, remade only where the interpreter or its pinned list changed since it was
# filled (the stamp holds both): make_venv DIR REQUIREMENTS MODULES-TO-CHECK
make_venv() {
  local venv=$1 requirements=$2 check=$3
  local stamp=$venv/.allocsim-requirements
  local want
  want="$("$allocsim_base_python" -c 'import sys; print(sys.version)') $(sha256sum <"$requirements")"
  if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  echo "setup: the test environment $venv, from $requirements"
  "$allocsim_base_python" -m venv --clear "$venv"
  # -qq: the machine's pip may name index folders it lacks, one warning line per package.
  "$venv/bin/python" -m pip install -qq --disable-pip-version-check -r "$requirements"
  "$venv/bin/python" -c "import $check" # fails here, not in the tests
  echo "$want" >"$stamp"
}
make_venv "$allocsim_venv" "$allocsim_requirements" "torch, distributed, pytest"
make_venv "$allocsim_trace_venv" "$allocsim_trace_requirements" \
  "torch, torchvision, transformers, peft, lightning, timm, pytest"
