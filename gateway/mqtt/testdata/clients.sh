#!/usr/bin/env bash
# Drives the bridge with Mosquitto's own clients (mosquitto_sub and
# mosquitto_pub), as a user would: read the bridge state, a board's
# availability, send a request and read its response, set a board's LEDs
# and read the new state. Environment: HOST PORT BASE BOARD.
set -euo pipefail
: "${HOST:?}" "${PORT:?}" "${BASE:?}" "${BOARD:?}"
sub() { mosquitto_sub -h "$HOST" -p "$PORT" -q 1 -W 15 "$@"; }
pub() { mosquitto_pub -h "$HOST" -p "$PORT" -q 1 "$@"; }

state=$(sub -C 1 -t "$BASE/bridge/state")
[[ $state == *'"online"'* ]] || { echo "bridge/state: $state"; exit 1; }

avail=$(sub -C 1 -t "$BASE/$BOARD/availability")
[[ $avail == *'"online"'* ]] || { echo "availability: $avail"; exit 1; }

# A request and its response (subscribe first, then ask).
sub -C 1 -t "$BASE/bridge/response/board" > "$TMPDIR/resp" &
sp=$!
sleep 0.5
pub -t "$BASE/bridge/request/board" -m "{\"board\":\"$BOARD\",\"transaction\":\"sh-1\"}"
wait "$sp"
resp=$(cat "$TMPDIR/resp")
[[ $resp == *'"status":"ok"'* && $resp == *'"sh-1"'* ]] || { echo "response: $resp"; exit 1; }

# A set, then the retained state shows it.
pub -t "$BASE/$BOARD/set/leds" -m '{"mode":"solid","colour":"#abcdef"}'
for _ in $(seq 50); do
  leds=$(sub -C 1 -t "$BASE/$BOARD/leds")
  [[ $leds == *'#abcdef'* ]] && { echo ok; exit 0; }
  sleep 0.2
done
echo "leds: $leds"
exit 1
