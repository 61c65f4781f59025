# shellcheck shell=bash
# Shell helpers shared by the scripts that boot the test image (smoke-boot, bench/boot.sh).
# Source it; it defines functions only. Every wait is bounded and says what it waited for.
# The caller may set uri (libvirt URI) and network (libvirt network name) before calling them.
: "${uri:=qemu:///system}" "${network:=default}"

guest_log() { printf '[%s %s] %s\n' "${guest_log_tag:-guest}" "$(date +%T)" "$*" >&2; }
guest_die() { guest_log "FAILED: $*"; exit 1; }

now_ms() { date +%s%3N; }
seconds_since() { # start_ms -> elapsed seconds with one decimal
  local ms=$(($(now_ms) - $1))
  printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}

# A MAC no other guest here uses (52:54:00 is the prefix qemu guests use), so its lease is ours.
random_mac() { echo "52:54:00:$(od -An -N3 -tx1 /dev/urandom | sed 's/^ //; s/ /:/g')"; }

# Writes user-data (default user gets the public key), meta-data and network-config (DHCP on the
# NIC with the given MAC) into DIR.
write_seed_files() { # dir hostname mac public_key_file
  local dir=$1 hostname=$2 mac=$3 key_file=$4
  mkdir -p "$dir"
  cat >"$dir/user-data" <<EOF
#cloud-config
ssh_authorized_keys:
  - $(<"$key_file")
EOF
  cat >"$dir/meta-data" <<EOF
instance-id: $hostname
local-hostname: $hostname
EOF
  cat >"$dir/network-config" <<EOF
version: 2
ethernets:
  primary:
    match:
      macaddress: "$mac"
    dhcp4: true
EOF
}

# Prints the IPv4 address of the newest DHCP lease for MAC, waiting up to TIMEOUT_S for one.
wait_for_lease() { # mac timeout_s
  local mac=$1 deadline=$((SECONDS + $2)) address=
  while [[ -z $address ]]; do
    ((SECONDS < deadline)) || guest_die "no DHCP lease for $mac on network $network within $2 s"
    # Columns: date time mac protocol address/prefix hostname client-id.
    address=$(virsh -q -c "$uri" net-dhcp-leases "$network" --mac "$mac" 2>/dev/null |
      awk '$5 ~ /\// {print $1" "$2" "$5}' | sort | tail -n1 | awk '{print $3}' | cut -d/ -f1)
    [[ -n $address ]] || sleep 0.5
  done
  echo "$address"
}

# guest_ssh KEY ADDRESS COMMAND...: runs a command on the guest as the image's default user.
guest_ssh() {
  local key=$1 address=$2
  shift 2
  ssh -i "$key" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
    -o LogLevel=ERROR -o ConnectTimeout=5 "debian@$address" "$@" </dev/null
}

wait_for_ssh() { # key address timeout_s
  local deadline=$((SECONDS + $3))
  until guest_ssh "$1" "$2" true 2>/dev/null; do
    ((SECONDS < deadline)) || guest_die "SSH on $2 did not answer within $3 s"
    sleep 0.5
  done
}

# Waits for cloud-init to finish on the guest; fails unless it reports "status: done".
wait_for_cloud_init() { # key address timeout_s
  local status
  status=$(timeout "$3" ssh -i "$1" -o BatchMode=yes -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5 "debian@$2" \
    cloud-init status --wait </dev/null 2>&1 | tail -n1) || true
  [[ $status == *"status: done"* ]] || guest_die "cloud-init did not finish cleanly within $3 s: '$status'"
}
