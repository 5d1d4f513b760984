# Sourced by the bench scripts. hwm_mib PID... prints a tunnel's memory in
# MiB: the largest process's peak RSS plus the anonymous memory of the
# others. fips-go's privilege-separated daemon is a root monitor beside the
# worker, both the same binary: the monitor's code pages are the worker's
# (one copy in the page cache), and summing both RSS figures would count
# them twice.
hwm_mib() {
  local max=0 maxanon=0 anon=0 h a p
  for p in "$@"; do
    h=$(awk '/VmHWM/{print $2}' /proc/$p/status)
    a=$(awk '/RssAnon/{print $2}' /proc/$p/status)
    if [ "$h" -gt "$max" ]; then
      anon=$((anon + maxanon)); max=$h; maxanon=$a
    else
      anon=$((anon + a))
    fi
  done
  awk -v k=$((max + anon)) 'BEGIN{printf "%.1f", k / 1024}'
}
