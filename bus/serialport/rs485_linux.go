package serialport

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Flag bits of serial_rs485.flags (linux/serial.h).
const (
	rs485Enabled      = 1 << 0
	rs485RTSOnSend    = 1 << 1
	rs485RTSAfterSend = 1 << 2
	rs485RxDuringTx   = 1 << 4
)

// serialRS485 mirrors the kernel's struct serial_rs485 (32 bytes).
type serialRS485 struct {
	Flags           uint32
	DelayBeforeSend uint32
	DelayAfterSend  uint32
	Padding         [5]uint32
}

func millisCeil(d time.Duration) uint32 {
	return uint32((d + time.Millisecond - 1) / time.Millisecond)
}

func (r RS485) kernel() serialRS485 {
	k := serialRS485{
		Flags:           rs485Enabled,
		DelayBeforeSend: millisCeil(r.DelayBeforeSend),
		DelayAfterSend:  millisCeil(r.DelayAfterSend),
	}
	if r.RTSActiveLow {
		k.Flags |= rs485RTSAfterSend
	} else {
		k.Flags |= rs485RTSOnSend
	}
	if r.ReceiveDuringSend {
		k.Flags |= rs485RxDuringTx
	}
	return k
}

// setRS485 opens path a second time (the RS485 state belongs to the UART,
// not to one descriptor) and applies the mode with TIOCSRS485.
func setRS485(path string, r RS485) error {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: reopen for ioctl: %w", ErrRS485Unsupported, err)
	}
	defer unix.Close(fd)
	k := r.kernel()
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(unix.TIOCSRS485), uintptr(unsafe.Pointer(&k)))
	if errno != 0 {
		// ENOTTY (pty, USB adapters without the mode), EINVAL and
		// EOPNOTSUPP all mean the driver will not do it.
		return fmt.Errorf("%w: TIOCSRS485: %w", ErrRS485Unsupported, errno)
	}
	return nil
}
