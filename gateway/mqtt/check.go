package mqtt

import (
	"fmt"
	"log/slog"
)

// Check validates what New would refuse in o (the topic roots, the broker
// URL, the TLS files) without opening a store or a connection, so that a
// command line with a bad MQTT flag is refused before the gateway starts
// anything. An empty o.Broker skips the broker checks (the embedded
// broker's URL is known only once it listens).
func Check(o Options) error {
	o.Base, o.HAPrefix = rootsOrDefault(o.Base, o.HAPrefix)
	if err := checkRoots(o.Base, o.HAPrefix); err != nil {
		return err
	}
	if o.Broker == "" {
		if (o.CertFile == "") != (o.KeyFile == "") {
			return fmt.Errorf("%w: the client certificate and key go together", ErrConfig)
		}
		return nil
	}
	b := &Bridge{o: o, t: topics{base: o.Base, ha: o.HAPrefix}, log: slog.New(slog.DiscardHandler)}
	_, err := b.clientOptions()
	return err
}

// rootsOrDefault fills empty topic roots with the defaults.
func rootsOrDefault(base, haPrefix string) (string, string) {
	if base == "" {
		base = DefaultBase
	}
	if haPrefix == "" {
		haPrefix = DefaultHAPrefix
	}
	return base, haPrefix
}

// checkRoots refuses a topic root the bridge cannot use, naming its flag.
func checkRoots(base, haPrefix string) error {
	if err := validRoot(base); err != nil {
		return fmt.Errorf("%w: --mqtt-base: %w", ErrConfig, err)
	}
	if err := validRoot(haPrefix); err != nil {
		return fmt.Errorf("%w: --ha-prefix: %w", ErrConfig, err)
	}
	return nil
}
