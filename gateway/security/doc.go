// Package security gathers the gateway's security tests: one test per
// attack, each run against real sockets and, where users run binaries, a
// real holo-gateway process the tests build. Each test names the attack
// it stands for and fails when the defence is gone.
//
// The package has no code of its own: its tests are the suite.
//
//	go test ./gateway/security            every attack
//	go test ./gateway/security -run MQTT  the MQTT surface
//
// The tests build holo-gateway once per run (skipped with -short; set
// HOLO_SECURITY_GATEWAY to a binary to test that one instead) and use
// mosquitto_pub and mosquitto_sub where a check needs a client paho is not
// (MQTT 5), skipping those checks with a message when the binaries are
// missing outside CI.
package security
