#!/bin/sh
# Makes the MQTT logins of the compose installation, once: a random
# password per login, one file each ($SECRETS/<login>.password, mode
# 0600), and Mosquitto's password file ($SECRETS/passwd, hashed, mode
# 0600). An existing password file is kept, so restarts change nothing;
# delete the volume (docker compose down -v) to start over.
#
# The compose file runs it in the Mosquitto image (it needs
# mosquitto_passwd); by hand:  SECRETS=/some/dir sh make-secrets.sh
#
# When run as root, the files go to their readers: passwd to Mosquitto
# ($MOSQUITTO_UID, 1883 in the eclipse-mosquitto image), the bridge's
# password to the gateway ($GATEWAY_UID, 65532 in holofleet's image); the
# others stay root's (read them with docker compose run --rm mqtt-secrets
# cat /secrets/admin.password).
set -eu
dir=${SECRETS:-/secrets}
logins="holo-gateway homeassistant viewer operator admin"
umask 077
mkdir -p "$dir"
if [ -f "$dir/passwd" ]; then
	echo "make-secrets: $dir/passwd exists; kept"
	exit 0
fi
: > "$dir/passwd.new"
for login in $logins; do
	pw=$(head -c 48 /dev/urandom | base64 | tr -d '+/=\n' | cut -c1-40)
	printf '%s\n' "$pw" > "$dir/$login.password"
	printf '%s:%s\n' "$login" "$pw" >> "$dir/passwd.new"
done
# -U hashes the plain passwords in place: none is ever on a command line.
mosquitto_passwd -U "$dir/passwd.new"
mv "$dir/passwd.new" "$dir/passwd"
if [ "$(id -u)" = 0 ]; then
	chown "${MOSQUITTO_UID:-1883}" "$dir/passwd"
	chown "${GATEWAY_UID:-65532}" "$dir/holo-gateway.password"
fi
echo "make-secrets: logins $logins made in $dir"
