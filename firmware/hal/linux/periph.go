package linux

import (
	"fmt"
	"strings"
	"sync"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
	"periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/i2c/i2creg"
	"periph.io/x/conn/v3/spi"
	"periph.io/x/conn/v3/spi/spireg"
	"periph.io/x/host/v3"
)

// PeriphHost opens parts through periph.io's host drivers (spidev,
// i2c-dev, the GPIO character device or the SoC's registers). host.Init
// runs once, on the first open: nothing here touches the machine before a
// board is started with --hal linux.
type PeriphHost struct {
	once sync.Once
	err  error
}

func (h *PeriphHost) init() error {
	h.once.Do(func() {
		if _, err := host.Init(); err != nil {
			h.err = fmt.Errorf("periph host drivers: %w", err)
		}
	})
	return h.err
}

// SPI opens an SPI port by device path or periph name.
func (h *PeriphHost) SPI(name string) (spi.PortCloser, error) {
	if err := h.init(); err != nil {
		return nil, err
	}
	p, err := spireg.Open(name)
	switch {
	case err != nil && strings.Contains(err.Error(), "no port found"):
		return nil, fmt.Errorf("no SPI port %s on this machine (is SPI on? dtparam=spi=on in config.txt; a second bus needs dtoverlay=spi1-1cs)", name)
	case err != nil:
		return nil, err
	}
	return p, nil
}

// I2C opens an I2C bus by device path, periph name or number.
func (h *PeriphHost) I2C(name string) (i2c.BusCloser, error) {
	if err := h.init(); err != nil {
		return nil, err
	}
	b, err := i2creg.Open(name)
	switch {
	case err != nil && strings.Contains(err.Error(), "no bus found"):
		return nil, fmt.Errorf("no I2C bus %s on this machine (is I2C on? dtparam=i2c_arm=on in config.txt)", name)
	case err != nil:
		return nil, err
	}
	return b, nil
}

// Pin finds a GPIO by name ("GPIO25").
func (h *PeriphHost) Pin(name string) (gpio.PinIO, error) {
	if err := h.init(); err != nil {
		return nil, err
	}
	p := gpioreg.ByName(name)
	if p == nil {
		return nil, fmt.Errorf("no pin named %q", name)
	}
	return p, nil
}
