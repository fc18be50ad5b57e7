package web

import (
	"os"
	"testing"
)

// productionKDF is DefaultKDF as shipped, kept before TestMain makes the
// package's tests cheap; TestProductionKDF runs it.
var productionKDF = DefaultKDF

func TestMain(m *testing.M) {
	DefaultKDF = cheapKDF
	os.Exit(m.Run())
}
