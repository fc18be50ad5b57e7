package cluster

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
)

// SignedInstallExport is a routed installation export for gateway to,
// signed with the cluster secret as gateway via signs what it routes,
// made for caller name with role: what a gateway sends when its API let
// that caller export (the security tests send it for a caller the API
// would not have let in, to see the owner decide again).
func SignedInstallExport(secret, to, via, name, role, requestID string) *nats.Msg {
	req := rpcRequest{Op: opInstallExport, From: via, Boot: "test", To: to, At: time.Now(), TimeoutMS: 20000,
		Caller: &rpcCaller{Name: name, Role: role, Token: true, Via: via, RequestID: requestID}}
	data, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	m := nats.NewMsg(gwSubject(to))
	m.Data = data
	m.Header.Set(sigHeader, mac([]byte(secret), sigRPC, data))
	return m
}
