#!/usr/bin/env bash
# Install one kraftlog node on this host as a systemd service (see deploy/systemd/README.md).
#
#   sudo deploy/install.sh --config deploy/config/broker-101.toml --cluster-id ID
#   deploy/install.sh --dry-run --node-id 1          # print every command, change nothing
#
# Steps, each printed as the exact command before it runs ("+ ..."):
#   1. the system user and group `kraftlog` (home /var/lib/kraftlog, no login shell);
#   2. a venv under PREFIX (default /opt/kraftlog/venv) with kraftlog pip-installed from this repo
#      (without the [spark] extra: a node needs neither pyspark nor a JRE);
#   3. the node's data dirs (log.dirs, metadata.log.dir), owned by kraftlog, mode 0750;
#   4. /etc/kraftlog/{cluster-id,raft-password} and the node config as /etc/kraftlog/ROLE-ID.toml,
#      with the @RAFT_PASSWORD@ placeholder filled in;
#   5. `kraftlog storage format` as the kraftlog user (--ignore-formatted, so reruns are no-ops);
#   6. the unit templates into /etc/systemd/system, plus a per-node drop-in (data dirs, stop timeout);
#   7. systemctl daemon-reload and systemctl enable (and start with --now).
# Every step is idempotent: rerunning the script upgrades the code and rewrites the files, and
# never reformats a node. A real install needs root; --dry-run does not and touches nothing.
set -euo pipefail

readonly DEFAULT_PREFIX=/opt/kraftlog
readonly SERVICE_USER=kraftlog
readonly ETC_DIR=/etc/kraftlog
readonly DATA_ROOT=/var/lib/kraftlog
readonly UNIT_DIR=/etc/systemd/system
readonly PLACEHOLDER=@RAFT_PASSWORD@
readonly MIN_STOP_TIMEOUT_S=60

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(dirname -- "$script_dir")

usage() {
  cat <<EOF
usage: $(basename -- "$0") [--dry-run] [--prefix DIR] [--config FILE | --node-id N] [options]

Install one kraftlog node on this host as a systemd service.

  --dry-run                 print every step as the exact command, change nothing (no root needed)
  --prefix DIR              install root of the venv (default $DEFAULT_PREFIX; the venv is DIR/venv)
  --config FILE             the node's TOML config (e.g. deploy/config/broker-101.toml)
  --node-id N               the node to install; without --config, picks deploy/config/*-N.toml,
                            with --config, must equal the file's node.id
  --cluster-id ID           cluster id (from 'kraftlog storage random-uuid'), the same on every
                            node; default: the one saved in $ETC_DIR/cluster-id by an earlier run,
                            else a new one is generated (then pass it to every other node)
  --raft-password-file F    file holding the controllers' shared Raft password, filled into the
                            config's $PLACEHOLDER; default: $ETC_DIR/raft-password from an earlier
                            run, else a new one is generated (then copy it to the other controllers)
  --source DIR              the kraftlog source tree to pip-install (default: $repo_dir)
  --python BIN              Python >= 3.11 that creates the venv (default: /usr/bin/python3 if it
                            is >= 3.11, else python3.11 or python3 from PATH)
  --now                     also start the node (systemctl enable --now)
  -h, --help                show this help
EOF
}

die() {
  printf 'install.sh: error: %s\n' "$*" >&2
  exit 1
}

note() {
  printf '# %s\n' "$*"
}

dry_run=0
prefix=$DEFAULT_PREFIX
config=""
node_id=""
cluster_id=""
password_file=""
source_dir=$repo_dir
python_bin=""
start_now=0

need_value() {
  [ "$#" -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"
}

while [ "$#" -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --now) start_now=1 ;;
    -h | --help) usage; exit 0 ;;
    --prefix | --config | --node-id | --cluster-id | --raft-password-file | --source | --python)
      need_value "$@"
      opt=$1
      shift
      set -- "$opt=$1" "${@:2}"
      continue
      ;;
    --prefix=*) prefix=${1#*=} ;;
    --config=*) config=${1#*=} ;;
    --node-id=*) node_id=${1#*=} ;;
    --cluster-id=*) cluster_id=${1#*=} ;;
    --raft-password-file=*) password_file=${1#*=} ;;
    --source=*) source_dir=${1#*=} ;;
    --python=*) python_bin=${1#*=} ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

# ---------------------------------------------------------------------------------------------
# How commands are shown and run
# ---------------------------------------------------------------------------------------------

# quote ARGS...: the arguments as one shell command line (single quotes only where needed).
quote() {
  local out="" arg q="'"
  for arg in "$@"; do
    if ! [[ $arg =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
      arg="$q${arg//$q/$q\\$q$q}$q"
    fi
    out+="${out:+ }$arg"
  done
  printf '%s' "$out"
}

step_no=0
step() {
  step_no=$((step_no + 1))
  printf '\n## step %d: %s\n' "$step_no" "$*"
}

# run CMD ARGS...: print the command, then run it unless --dry-run.
run() {
  printf '+ %s\n' "$(quote "$@")"
  if [ "$dry_run" -eq 0 ]; then
    "$@"
  fi
}

# run_sh 'COMMAND LINE': the same for a pipeline or redirection (paths already quoted by the caller).
run_sh() {
  printf '+ %s\n' "$1"
  if [ "$dry_run" -eq 0 ]; then
    bash -o errexit -o nounset -o pipefail -c "$1"
  fi
}

# write_file MODE OWNER GROUP DEST CONTENT: install CONTENT as DEST, printed as a here-document.
write_file() {
  local mode=$1 owner=$2 group=$3 dest=$4 content=$5
  printf '+ %s <<'"'"'EOF'"'"'\n%s\nEOF\n' "$(quote install -m "$mode" -o "$owner" -g "$group" /dev/stdin "$dest")" \
    "$content"
  if [ "$dry_run" -eq 0 ]; then
    printf '%s\n' "$content" | install -m "$mode" -o "$owner" -g "$group" /dev/stdin "$dest"
  fi
}

# ---------------------------------------------------------------------------------------------
# Checks: nothing below changes anything until the first step
# ---------------------------------------------------------------------------------------------

if [ "$dry_run" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
  die "a real install must run as root (sudo $0 ...); --dry-run shows the steps without root"
fi

[ -n "$config" ] || [ -n "$node_id" ] || { usage >&2; die "give --config FILE or --node-id N"; }
if [ -n "$node_id" ] && ! [[ $node_id =~ ^[0-9]+$ ]]; then
  die "--node-id must be a non-negative integer, got '$node_id'"
fi
if [ -z "$config" ]; then
  matches=()
  for candidate in "$script_dir/config/controller-$node_id.toml" "$script_dir/config/broker-$node_id.toml"; do
    if [ -f "$candidate" ]; then
      matches+=("$candidate")
    fi
  done
  [ "${#matches[@]}" -eq 1 ] || die "no single example config for node $node_id in $script_dir/config; pass --config FILE"
  config=${matches[0]}
fi
[ -f "$config" ] || die "config file not found: $config"
[[ $config == *.toml ]] || die "the config must be a TOML file (*.toml): the units read /etc/kraftlog/ROLE-ID.toml"
config=$(cd -- "$(dirname -- "$config")" && pwd)/$(basename -- "$config")

[[ $prefix == /* ]] || die "--prefix must be an absolute path, got '$prefix'"
prefix=${prefix%/}
[[ $prefix =~ ^[A-Za-z0-9._/+-]+$ ]] || die "--prefix may hold only letters, digits and ._/+- (it goes into a unit file)"
[ -f "$source_dir/pyproject.toml" ] || die "--source $source_dir is not the kraftlog source tree (no pyproject.toml)"
source_dir=$(cd -- "$source_dir" && pwd)

# A system interpreter first: the venv links to it, and the sandbox hides /home and /root.
if [ -z "$python_bin" ]; then
  for candidate in /usr/bin/python3 /usr/local/bin/python3 "$(command -v python3.11 || true)" \
    "$(command -v python3 || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] \
      && "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      python_bin=$candidate
      break
    fi
  done
fi
[ -n "$python_bin" ] || die "Python >= 3.11 is needed (Debian/Ubuntu: apt-get install python3 python3-venv)"
"$python_bin" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || die "Python >= 3.11 is needed, $python_bin is $("$python_bin" --version 2>&1)"
python_bin=$("$python_bin" -c 'import sys; print(sys.executable)')
base_prefix=$("$python_bin" -c 'import sys; print(sys.base_prefix)')
case "$base_prefix/" in
  /home/* | /root/*)
    msg="$python_bin lives under $base_prefix, which ProtectHome=true hides from the service; use a system Python (--python /usr/bin/python3)"
    if [ "$dry_run" -eq 0 ]; then
      die "$msg"
    fi
    note "warning: $msg; a real run stops here"
    ;;
  *) ;;
esac
if ! "$python_bin" -c 'import ensurepip, venv' 2>/dev/null; then
  ver=$("$python_bin" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  if [ "$dry_run" -eq 0 ]; then
    die "$python_bin cannot create venvs: apt-get install python${ver}-venv"
  fi
  note "warning: $python_bin cannot create venvs yet (apt-get install python${ver}-venv); a real run stops here"
fi

# Validate the config with kraftlog's own loader (straight from the source tree, stdlib only, no
# bytecode written) and read what the install needs: node id, roles, data dirs, session timeout.
read_config_py='
import importlib.util, math, re, sys, types
source, path = sys.argv[1], sys.argv[2]
def load(name, file, package_dir=None):
    spec = importlib.util.spec_from_file_location(
        name, file, submodule_search_locations=[package_dir] if package_dir else None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
# the namespace as pyproject maps it, with only the ground floor (stdlib only) under it
root = types.ModuleType("kraftlog")
root.__path__ = []
sys.modules["kraftlog"] = root
load("kraftlog.common", source + "/common/__init__.py", source + "/common")
import kraftlog.common.config as mod
try:
    cfg = mod.load_node_config(path)
except mod.ConfigError as err:
    sys.exit(f"invalid config {path}: {err}")
dirs = list(cfg.log_dirs)
if cfg.metadata_log_dir not in dirs:
    dirs.append(cfg.metadata_log_dir)
for d in dirs:
    if not d.startswith("/") or not re.fullmatch(r"[A-Za-z0-9._/+@:-]+", d):
        sys.exit(f"data dir {d!r} of {path}: use absolute paths of letters, digits and ._/+@:- only")
print(cfg.node_id)
print(",".join(cfg.roles))
print(math.ceil(cfg["broker.session.timeout.ms"] / 1000))
print("\n".join(dirs))
'
config_info=$("$python_bin" -B -c "$read_config_py" "$source_dir" "$config") || die "cannot use $config"
mapfile -t info_lines <<<"$config_info"
cfg_node_id=${info_lines[0]}
cfg_roles=${info_lines[1]}
session_s=${info_lines[2]}
data_dirs=("${info_lines[@]:3}")

if [ -n "$node_id" ] && [ "$node_id" != "$cfg_node_id" ]; then
  die "--node-id $node_id does not match node.id $cfg_node_id in $config"
fi
node_id=$cfg_node_id
case ",$cfg_roles," in
  *,controller,*) role=controller ;;
  *) role=broker ;;
esac
name=$role-$node_id
unit_template=kraftlog-$role@.service
unit=kraftlog-$role@$node_id.service
etc_config=$ETC_DIR/$name.toml
stop_timeout_s=$MIN_STOP_TIMEOUT_S
case ",$cfg_roles," in
  *,broker,*) if [ $((session_s + 30)) -gt "$stop_timeout_s" ]; then stop_timeout_s=$((session_s + 30)); fi ;;
  *) ;;
esac

needs_password=0
if grep -qF -- "$PLACEHOLDER" "$config"; then
  needs_password=1
fi
password=""
if [ -n "$password_file" ]; then
  [ -f "$password_file" ] || die "--raft-password-file not found: $password_file"
  password_file=$(cd -- "$(dirname -- "$password_file")" && pwd)/$(basename -- "$password_file")
fi
check_password() {
  local pw=$1 origin=$2
  if [ "${#pw}" -lt 16 ] || [[ $pw == *[\"\\]* ]] || ! [[ $pw =~ ^[[:graph:]]+$ ]]; then
    die "the Raft password in $origin must be one line of at least 16 printable characters without spaces, \" or \\"
  fi
}

if [ -n "$cluster_id" ]; then
  [[ $cluster_id =~ ^[A-Za-z0-9_][A-Za-z0-9_-]{21}$ ]] \
    || die "invalid --cluster-id '$cluster_id': 22 URL-safe base64 characters, e.g. from 'kraftlog storage random-uuid'"
  if [ -f "$ETC_DIR/cluster-id" ] && [ "$(<"$ETC_DIR/cluster-id")" != "$cluster_id" ]; then
    die "this host is installed for cluster $(<"$ETC_DIR/cluster-id") ($ETC_DIR/cluster-id), not $cluster_id; remove that file only if you mean to move the host to another cluster"
  fi
fi

kraftlog_bin=$prefix/venv/bin/kraftlog
printf '# kraftlog install%s: node %s (%s) from %s\n' "$( [ "$dry_run" -eq 1 ] && printf ' (dry run: nothing is changed)')" \
  "$node_id" "$cfg_roles" "$config"
printf '# unit %s, config %s, venv %s/venv\n' "$unit" "$etc_config" "$prefix"
cd /

# ---------------------------------------------------------------------------------------------
# 1. user
# ---------------------------------------------------------------------------------------------
step "system user $SERVICE_USER"
if getent passwd "$SERVICE_USER" >/dev/null; then
  note "user $SERVICE_USER already exists"
else
  group_opt=(--user-group)
  if getent group "$SERVICE_USER" >/dev/null; then
    group_opt=(--gid "$SERVICE_USER")
  fi
  run useradd --system "${group_opt[@]}" --home-dir "$DATA_ROOT" --no-create-home \
    --shell /usr/sbin/nologin --comment "kraftlog node" "$SERVICE_USER"
fi

# ---------------------------------------------------------------------------------------------
# 2. venv
# ---------------------------------------------------------------------------------------------
step "venv $prefix/venv with kraftlog from $source_dir"
if [ -x "$prefix/venv/bin/python" ]; then
  note "venv $prefix/venv already exists"
else
  run "$python_bin" -m venv "$prefix/venv"
fi
run "$prefix/venv/bin/pip" install --quiet --disable-pip-version-check --upgrade "$source_dir"

# ---------------------------------------------------------------------------------------------
# 3. data dirs
# ---------------------------------------------------------------------------------------------
step "data dirs"
run install -d -m 0750 -o "$SERVICE_USER" -g "$SERVICE_USER" "$DATA_ROOT" "${data_dirs[@]}"

# ---------------------------------------------------------------------------------------------
# 4. configuration
# ---------------------------------------------------------------------------------------------
step "config $etc_config"
run install -d -m 0750 -o root -g "$SERVICE_USER" "$ETC_DIR"
format_id=$cluster_id
if [ -n "$cluster_id" ]; then
  if [ -f "$ETC_DIR/cluster-id" ]; then
    note "cluster id $cluster_id already saved in $ETC_DIR/cluster-id"
  else
    write_file 0640 root "$SERVICE_USER" "$ETC_DIR/cluster-id" "$cluster_id"
  fi
elif [ -f "$ETC_DIR/cluster-id" ]; then
  format_id=$(<"$ETC_DIR/cluster-id")
  note "using cluster id $format_id saved in $ETC_DIR/cluster-id"
else
  run_sh "$(quote "$kraftlog_bin" storage random-uuid) | $(quote install -m 0640 -o root -g "$SERVICE_USER" /dev/stdin "$ETC_DIR/cluster-id")"
  if [ "$dry_run" -eq 0 ]; then
    format_id=$(<"$ETC_DIR/cluster-id")
    note "NEW CLUSTER ID $format_id: install every other node of this cluster with --cluster-id $format_id"
  else
    note "a new cluster id would be generated: every other node then needs --cluster-id with it"
  fi
fi

if [ "$needs_password" -eq 1 ]; then
  if [ -n "$password_file" ]; then
    check_password "$(<"$password_file")" "$password_file"
    run install -m 0600 -o root -g root "$password_file" "$ETC_DIR/raft-password"
  elif [ -f "$ETC_DIR/raft-password" ]; then
    note "using the Raft password saved in $ETC_DIR/raft-password"
  else
    run_sh "$(quote "$python_bin" -c 'import secrets; print(secrets.token_urlsafe(32))') | $(quote install -m 0600 -o root -g root /dev/stdin "$ETC_DIR/raft-password")"
    note "NEW RAFT PASSWORD in $ETC_DIR/raft-password: copy that file to the other controller hosts and install them with --raft-password-file"
  fi
  if [ "$dry_run" -eq 0 ]; then
    password=$(<"$ETC_DIR/raft-password")
    check_password "$password" "$ETC_DIR/raft-password"
  fi
  printf '+ %s < %s  # %s filled in from %s\n' \
    "$(quote install -m 0640 -o root -g "$SERVICE_USER" /dev/stdin "$etc_config")" "$(quote "$config")" \
    "$PLACEHOLDER" "$ETC_DIR/raft-password"
  if [ "$dry_run" -eq 0 ]; then
    shopt -u patsub_replacement 2>/dev/null || true  # bash 5.2: '&' in a replacement is literal again
    content=$(<"$config")
    printf '%s\n' "${content//"$PLACEHOLDER"/$password}" \
      | install -m 0640 -o root -g "$SERVICE_USER" /dev/stdin "$etc_config"
  fi
else
  run install -m 0640 -o root -g "$SERVICE_USER" "$config" "$etc_config"
fi

# ---------------------------------------------------------------------------------------------
# 5. storage format
# ---------------------------------------------------------------------------------------------
step "storage format"
if [ -n "$format_id" ]; then
  run runuser -u "$SERVICE_USER" -- "$kraftlog_bin" storage format -t "$format_id" -c "$etc_config" --ignore-formatted
else
  # The id is generated in step 4 of a real run; the dry run shows where it is read from.
  printf '+ %s -t "%s" %s\n' "$(quote runuser -u "$SERVICE_USER" -- "$kraftlog_bin" storage format)" \
    "\$(cat $ETC_DIR/cluster-id)" "$(quote -c "$etc_config" --ignore-formatted)"
fi

# ---------------------------------------------------------------------------------------------
# 6. systemd units
# ---------------------------------------------------------------------------------------------
step "systemd units"
run install -m 0644 "$script_dir/systemd/kraftlog-controller@.service" "$script_dir/systemd/kraftlog-broker@.service" \
  "$UNIT_DIR/"
dropin="# Written by deploy/install.sh for node $node_id: rerun it rather than editing this file
# (put local changes into another drop-in of this directory, e.g. 60-local.conf).
[Service]
ReadWritePaths=${data_dirs[*]}
TimeoutStopSec=${stop_timeout_s}s"
if [ "$prefix" != "$DEFAULT_PREFIX" ]; then
  dropin+="
ExecStart=
ExecStart=$kraftlog_bin serve -c $ETC_DIR/$role-%i.toml"
fi
run install -d -m 0755 "$UNIT_DIR/$unit.d"
write_file 0644 root root "$UNIT_DIR/$unit.d/50-install.conf" "$dropin"

# ---------------------------------------------------------------------------------------------
# 7. systemctl
# ---------------------------------------------------------------------------------------------
step "systemctl daemon-reload and enable"
if [ -d /run/systemd/system ]; then
  run systemctl daemon-reload
else
  printf '+ %s  # skipped: systemd is not running on this host\n' "$(quote systemctl daemon-reload)"
fi
if [ "$start_now" -eq 1 ] && [ -d /run/systemd/system ]; then
  run systemctl enable --now "$unit"
else
  if [ "$start_now" -eq 1 ]; then
    note "--now ignored: systemd is not running on this host"
  fi
  run systemctl enable "$unit"
fi

printf '\n# done%s: %s (unit template %s)\n' "$( [ "$dry_run" -eq 1 ] && printf ' (dry run)')" "$unit" "$unit_template"
printf '#   start:   systemctl start %s   (after a rerun: systemctl restart %s)\n' "$unit" "$unit"
printf '#   logs:    journalctl -u %s -o cat\n' "$unit"
