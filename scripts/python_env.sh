# The Python of the tests and of the wheel's build, named in one place: a virtual environment that
# scripts/setup.sh makes and fills from python/requirements-test.txt. Sourced by the scripts, not
# run. Which python3 comes first on the PATH does not matter.
#   ALLOCSIM_VENV          where the environment is (default: .venv at the repository root)
#   ALLOCSIM_BASE_PYTHON   the interpreter it is made from (default: Debian's /usr/bin/python3,
#                          which setup.sh installs; PyTorch's CPU build is pinned for its 3.11)
allocsim_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
allocsim_venv=${ALLOCSIM_VENV:-$allocsim_root/.venv}
allocsim_python=$allocsim_venv/bin/python
allocsim_base_python=${ALLOCSIM_BASE_PYTHON:-/usr/bin/python3}
allocsim_requirements=$allocsim_root/python/requirements-test.txt
# The second environment, for allocsim.trace under PyTorch's CUDA build with no GPU
# (python/requirements-trace.txt; ALLOCSIM_TRACE_VENV, default .venv-trace).
allocsim_trace_venv=${ALLOCSIM_TRACE_VENV:-$allocsim_root/.venv-trace}
allocsim_trace_python=$allocsim_trace_venv/bin/python
allocsim_trace_requirements=$allocsim_root/python/requirements-trace.txt

# Fails with one line where setup.sh has not made the environment.
allocsim_require_venv() {
  if [ ! -x "$allocsim_python" ]; then
    echo "$allocsim_python: no test environment: run scripts/setup.sh first" >&2
    return 1
  fi
}
