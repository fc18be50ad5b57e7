package rs485

import (
	"log/slog"
	"os"
)

func debugLog() *slog.Logger {
	if os.Getenv("RS485_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
