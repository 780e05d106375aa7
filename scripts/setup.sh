#!/usr/bin/env bash
# One-command, idempotent set-up of a HomieBot checkout on Debian 12 with Python 3.11:
#   1. system packages (compiler, CMake, the EGL/OSMesa libraries MuJoCo renders with);
#   2. .venv/ with the ROS 2 Kilted wheels and every Python dependency, pinned in requirements/lock.txt (uv, pip
#      as the fallback);
#   3. the ROS wheels' CMake exports pointed at this interpreter (they name the wheel builder's paths);
#   4. colcon build of every package under src/;
#   5. env.sh, which everything sources (venv, overlay, ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT with the
#      loopback Fast DDS profile, CLIs on PATH).
# Each step is skipped when its inputs did not change, so a second run takes seconds.
# Environment: PYTHON (interpreter to build the venv from), TORCH_INDEX_URL (extra index serving torch 2.13.0+cpu
# on machines without a local copy), HOMIEBOT_SKIP_APT=1 (never call apt-get), HOMIEBOT_NO_UV=1 (install with pip).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
stamps="$venv/.homiebot"
started=$(date +%s)

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# ---- 1. interpreter and system packages ---------------------------------------------------------------------------
find_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then command -v "$candidate"; return; fi
  done
  echo ""
}
python=$(find_python)
[ -n "$python" ] || die "no Python found. Install Python 3.11 (Debian 12: apt-get install python3.11 python3.11-venv) or set PYTHON=/path/to/python3.11."
"$python" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
  || die "Python 3.11 is required (the ROS 2 Kilted wheels are built for CPython 3.11 only), but $python is $("$python" -c 'import platform; print(platform.python_version())'). Install python3.11 or set PYTHON=/path/to/python3.11."
"$python" -c 'import venv, ensurepip' 2>/dev/null \
  || die "$python lacks venv/ensurepip. On Debian: apt-get install python3.11-venv"

# Debian package -> why we need it.
declare -A system_packages=(
  [cmake]="builds emmoe_interfaces"
  [g++]="compiles the generated interface type support"
  [make]="drives the CMake build"
  [libegl1]="EGL loader for headless MuJoCo rendering"
  [libegl-mesa0]="Mesa EGL driver (MUJOCO_GL=egl)"
  [libgl1-mesa-dri]="Mesa software rasteriser"
  [libosmesa6]="OSMesa fallback renderer (MUJOCO_GL=osmesa)"
)
missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for pkg in "${!system_packages[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
    [ "${status:0:2}" = "ii" ] || missing+=("$pkg")
  done
else
  for tool in cmake g++ make; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
  log "not a Debian system: make sure EGL or OSMesa libraries are installed for MuJoCo rendering"
fi
if [ ${#missing[@]} -gt 0 ]; then
  for pkg in "${missing[@]}"; do log "missing system package $pkg (${system_packages[$pkg]:-required})"; done
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1 && [ "${HOMIEBOT_SKIP_APT:-0}" != "1" ]; then
    log "installing ${missing[*]} with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    die "install the missing system packages first, e.g.: sudo apt-get install ${missing[*]}"
  fi
fi
command -v g++ >/dev/null 2>&1 || die "no C++ compiler (g++) on PATH: apt-get install g++"
command -v cmake >/dev/null 2>&1 || die "no cmake on PATH: apt-get install cmake"

# One setup at a time per checkout (parallel shells, CI jobs and test runs may all call it).
mkdir -p "$root/log"
exec 9>"$root/log/.setup.lock"
flock 9

# ---- 2. virtual environment -----------------------------------------------------------------------------------------
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null; then
  log "existing .venv is not Python 3.11: recreating it"
  rm -rf "$venv"
fi
if [ ! -x "$venv/bin/python" ]; then
  log "creating .venv with $("$python" --version)"
  "$python" -m venv "$venv"
fi
mkdir -p "$stamps"
lock_hash=$(cat "$root/requirements/lock.txt" | sha256sum | cut -d' ' -f1)
# uv installs the lock in a fraction of pip's time (no bytecode compilation up front, parallel unpacking, a shared
# cache); it is itself pinned and comes from pip's sources. pip stays the fallback (HOMIEBOT_NO_UV=1 forces it).
uv_version=0.13.9
install_with_uv() {
  [ "${HOMIEBOT_NO_UV:-0}" != "1" ] || return 1
  local uv="$venv/bin/uv"
  if [ "$("$uv" --version 2>/dev/null | cut -d' ' -f2)" != "$uv_version" ]; then
    "$venv/bin/python" -m pip install --disable-pip-version-check -q "uv==$uv_version" \
      || { log "could not install uv==$uv_version with pip"; return 1; }
  fi
  local sources
  mapfile -t sources < <(TORCH_INDEX_URL="${TORCH_INDEX_URL:-}" "$venv/bin/python" "$root/scripts/uv_sources.py")
  "$uv" pip install --python "$venv/bin/python" --no-deps --index-strategy unsafe-best-match -q "${sources[@]}" \
    -r "$root/requirements/lock.txt"
}
if [ "$(cat "$stamps/lock.sha256" 2>/dev/null)" != "$lock_hash" ]; then
  pins=$(grep -vc '^#' "$root/requirements/lock.txt")
  log "installing $pins pinned Python packages into .venv with uv $uv_version (2.5 GB)"
  if ! install_with_uv; then
    log "uv did not install the lock (see above): installing with pip instead (first run: about 2 minutes)"
    pip_args=(--no-deps --disable-pip-version-check -q -r "$root/requirements/lock.txt")
    [ -n "${TORCH_INDEX_URL:-}" ] && pip_args+=(--extra-index-url "$TORCH_INDEX_URL")
    "$venv/bin/python" -m pip install "${pip_args[@]}" \
      || die "pip could not install requirements/lock.txt (see above). torch==2.13.0+cpu comes from a local wheel directory or from an index given in TORCH_INDEX_URL."
  fi
  echo "$lock_hash" > "$stamps/lock.sha256"
  rm -f "$stamps/build.sha256"
else
  log ".venv is up to date with requirements/lock.txt"
fi

# ---- 3. ROS wheel CMake exports ------------------------------------------------------------------------------------
"$venv/bin/python" "$root/scripts/fix_ros_wheel_cmake.py" "$venv"

# ---- 4. colcon build ------------------------------------------------------------------------------------------------
# Inputs that need a rebuild: everything under src/ except the Python sources, which the symlink install serves live.
build_inputs() {
  (cd "$root" && find src launch -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*/test/*' 2>/dev/null \
    | grep -vE '^src/([^/]+)/\1/.*\.py$' | LC_ALL=C sort | xargs -r sha256sum)
}
build_hash=$( { build_inputs; echo "$lock_hash"; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamps/build.sha256" 2>/dev/null)" != "$build_hash" ] || [ ! -f "$root/install/local_setup.sh" ]; then
  log "colcon build (symlink install) of the packages under src/"
  (
    cd "$root"
    export PATH="$venv/bin:$PATH" CMAKE_PREFIX_PATH="$venv" AMENT_PREFIX_PATH="$venv" _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
    export LD_LIBRARY_PATH="$venv/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    unset COLCON_PREFIX_PATH
    colcon --log-base log build --symlink-install --base-paths src --event-handlers console_cohesion- summary+ \
      --cmake-args -DPython3_EXECUTABLE="$venv/bin/python" -DBUILD_TESTING=OFF -Wno-dev
  ) || die "colcon build failed: the log is in log/latest_build/"
  echo "$build_hash" > "$stamps/build.sha256"
else
  log "colcon overlay is up to date"
fi

# ---- 5. env.sh ------------------------------------------------------------------------------------------------------
"$venv/bin/python" "$root/scripts/write_env_sh.py" "$root" > "$root/env.sh.tmp"
mv "$root/env.sh.tmp" "$root/env.sh"

# Smoke check: the overlay imports through env.sh exactly as users and tests will see it.
bash -c ". '$root/env.sh' && python -c 'import rclpy, emmoe_interfaces.msg, emmoe_interfaces.action, emmoe_interfaces.srv'" \
  || die "the built overlay does not import; delete build/ install/ .venv/ and run scripts/setup.sh again"
log "done in $(( $(date +%s) - started )) s. Now: source env.sh"
