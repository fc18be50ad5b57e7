package mqtt

import (
	"fmt"
	"log/slog"

	"github.com/holofleet/holofleet/gateway/mqtt/layout"
)

// Check validates what New would refuse in o (the topic roots, the broker
// URL, the TLS files) without opening a store or a connection, so that a
// command line with a bad MQTT flag is refused before the gateway starts
// anything. An empty o.Broker skips the broker checks (the embedded
// broker's URL is known only once it listens).
func Check(o Options) error {
	o.Base, o.HAPrefix = layout.RootsOrDefault(o.Base, o.HAPrefix)
	if err := checkRoots(o.Base, o.HAPrefix); err != nil {
		return err
	}
	if o.Broker == "" {
		if (o.CertFile == "") != (o.KeyFile == "") {
			return fmt.Errorf("%w: the client certificate and key go together", ErrConfig)
		}
		return nil
	}
	b := &Bridge{o: o, t: layout.Topics{Base: o.Base, HA: o.HAPrefix}, log: slog.New(slog.DiscardHandler)}
	_, err := b.clientOptions()
	return err
}

// checkRoots refuses a topic root the bridge cannot use, naming its flag.
func checkRoots(base, haPrefix string) error {
	if err := layout.CheckRoots(base, haPrefix); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}
