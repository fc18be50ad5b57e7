//go:build !linux

package serialport

import "fmt"

func setRS485(path string, _ RS485) error {
	return fmt.Errorf("%w: kernel RS485 mode is only set on Linux", ErrRS485Unsupported)
}
