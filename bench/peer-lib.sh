# shellcheck shell=bash
# What bench/boot.sh and bench/kcli.sh do once their tool has started the guest: wait for its
# lease, SSH and cloud-init's end (tests/image/guest-lib.sh's bounded waits), save its bootchart and
# serial console when TROG_BENCH_BOOTCHART names a file, and print the line bench/provision.sh
# reads. Source it after guest-lib.sh; the caller sets root, vcpus, memory_mib and timeout_s.
# shellcheck disable=SC2154 # those four are the caller's

# peer_phases TOOL KEY MAC STARTED_MS COMMAND_S SERIAL_LOG: every phase counted from STARTED_MS,
# the guest reached as the image's default user (debian) with KEY.
peer_phases() {
  local tool=$1 key=$2 mac=$3 started_ms=$4 command_s=$5 serial_log=$6
  local address lease_s ssh_s cloud_init_s
  address=$(wait_for_lease "$mac" "$timeout_s")
  lease_s=$(seconds_since "$started_ms")
  wait_for_ssh "$key" "$address" "$timeout_s"
  ssh_s=$(seconds_since "$started_ms")
  guest_log "SSH answers on $address after ${ssh_s} s"
  wait_for_cloud_init "$key" "$address" "$timeout_s"
  cloud_init_s=$(seconds_since "$started_ms")
  guest_log "cloud-init done after ${cloud_init_s} s"
  if [[ -n ${TROG_BENCH_BOOTCHART:-} ]]; then
    "$root/bench/bootchart.sh" "$key" "debian@$address" >"$TROG_BENCH_BOOTCHART" 2>&1 || true
    cp "$serial_log" "${TROG_BENCH_BOOTCHART%.txt}-serial.log" 2>/dev/null || true
  fi
  echo "bench $tool: vcpus=$vcpus memory_mib=$memory_mib command_s=$command_s lease_s=$lease_s ssh_s=$ssh_s cloud_init_s=$cloud_init_s load=$(cut -d' ' -f1 /proc/loadavg)"
}
