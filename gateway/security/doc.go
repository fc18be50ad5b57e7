// Package security holds the gateway's security suite: one test per
// attack the gateway must withstand, each through real sockets against
// the in-process API server on a loopback port 0 or a real holo-gateway
// process the tests build, and each failing against the gateway as it was
// before the fix it guards. It has no code of its own; `make test` runs it.
//
//	api_test.go      roles hold on every path: an operator's raw board
//	                 call cannot install firmware or change a board's
//	                 password (REST and gRPC); refusals are audited
//	limits_test.go   a 400 MiB body is refused before it is read (the
//	                 process's RSS stays flat); slow bodies are cut; event
//	                 and rollout streams are capped per token and in all;
//	                 changing calls are rate limited; revoking a token ends
//	                 its streams; streams outlive the write timeout
//	demo_test.go     demo mode and --insecure-lab refuse cross-site posts,
//	                 foreign Host names (DNS rebinding) and foreign
//	                 Origins, never open CORS, and never take a proxy's or
//	                 a header's word for "loopback"; the README's demo
//	                 commands still work
//	process_test.go  board passwords stay out of argv; /metrics can need a
//	                 token
//	mqtt_test.go     the MQTT surface: anonymous and viewer logins cannot
//	                 command, operators cannot send bridge requests,
//	                 anonymous access beyond loopback needs a flag that
//	                 says so, revoked tokens are disconnected, oversize
//	                 packets and will tricks are refused
//
//	go test ./gateway/security            every attack
//	go test ./gateway/security -run MQTT  the MQTT surface
//
// The tests build holo-gateway once per run (set HOLO_SECURITY_GATEWAY to
// a binary to test that one instead) and use mosquitto_pub and
// mosquitto_sub where a check needs a client paho is not (MQTT 5),
// skipping those checks with a message when the binaries are missing
// outside CI.
package security
