#!/bin/sh
# Makes the engine users of deploy/cluster/compose.yaml: a password per
# gateway (in .env, for the NATS nodes) and a credentials file per
# gateway in secrets/ (user, password and the cluster secret, mode 0600,
# handed to the gateway as a compose secret). Run it once, from anywhere;
# it refuses to overwrite what it made before (remove secrets/ and .env
# to start again, then restart everything).
set -eu
cd "$(dirname "$0")"
umask 077
if [ -e .env ] || [ -e secrets ]; then
	echo "make-credentials.sh: .env or secrets/ exists already" >&2
	exit 1
fi
mkdir secrets
secret=$(openssl rand -base64 32)
for gw in gw1 gw2 gw3; do
	pw=$(openssl rand -hex 24)
	printf '# holo-gateway cluster credentials of gateway "%s"\nuser=%s\npassword=%s\nsecret=%s\n' "$gw" "$gw" "$pw" "$secret" >"secrets/$gw.creds"
	printf 'HOLO_%s_PASSWORD=%s\n' "$(echo "$gw" | tr a-z A-Z)" "$pw" >>.env
done
# The gateway image runs as 65532 (deploy/Dockerfile): the files must be
# its own to read.
if ! chown 65532:65532 secrets/*.creds 2>/dev/null; then
	echo "make-credentials.sh: run: sudo chown 65532:65532 $(pwd)/secrets/*.creds (the gateways' user in the image)" >&2
fi
echo "engine users gw1, gw2, gw3: passwords in .env, credentials files in secrets/"
